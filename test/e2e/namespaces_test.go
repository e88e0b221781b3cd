package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// A job file naming a namespace that does not exist is refused; applying
// the namespace from a file makes the same run succeed, and the namespace
// then cannot be deleted while the job is in it.
func TestNamespaceFileAndJobInNamespace(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	jobFile := harness.WriteFile(t, "web.hcl", strings.Replace(fmt.Sprintf(sleeperJob, "web"),
		`type        = "system"`, "namespace   = \"team-a\"\n  type        = \"system\"", 1))

	if r := a.CLI("job", "run", "-detach", jobFile); r.Code != 1 || !strings.Contains(r.Stderr, `job \"web\": namespace \"team-a\" does not exist`) &&
		!strings.Contains(r.Stderr, `job "web": namespace "team-a" does not exist`) {
		t.Fatalf("job run into a missing namespace: want exit 1 naming the namespace:\n%s", r)
	}

	nsFile := harness.WriteFile(t, "team-a.hcl", "name = \"team-a\"\ndescription = \"Team A\"\nmeta {\n  owner = \"a\"\n}\n")
	if r := a.MustCLI("namespace", "apply", nsFile); !strings.Contains(r.Stdout, `Successfully applied namespace "team-a"!`) {
		t.Fatalf("namespace apply file:\n%s", r)
	}
	status := a.MustCLI("namespace", "status", "team-a").Stdout
	if d, _ := kvField(status, "Description"); d != "Team A" || !strings.Contains(status, "owner = a") {
		t.Fatalf("namespace status team-a:\n%s", status)
	}

	a.MustCLI("job", "run", "-detach", jobFile)
	if r := a.CLI("namespace", "delete", "team-a"); r.Code != 1 || !strings.Contains(r.Stderr, "web") {
		t.Fatalf("namespace delete with web in it: want exit 1 naming the job:\n%s", r)
	}
	bad := harness.WriteFile(t, "bad.hcl", "name = \"team-b\"\nquota = \"q\"\n")
	if r := a.CLI("namespace", "apply", bad); r.Code != 1 || !strings.Contains(r.Stderr, "bad.hcl:2:1:") {
		t.Fatalf("namespace apply of a bad file: want exit 1 at bad.hcl:2:1:\n%s", r)
	}
}

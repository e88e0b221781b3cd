package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// The ACL workflow a Nomad operator knows, through drover's CLI on a dev
// agent with `acl { enabled = true }`: bootstrap, write a policy, create a
// token for it; the anonymous caller is refused, the read-only token reads
// but cannot submit, and the management token runs the job.
func TestACLWorkflowThroughTheCLI(t *testing.T) {
	t.Parallel()
	cfg := harness.WriteFile(t, "acl.hcl", "acl {\n  enabled = true\n}\n")
	// Not startAgent: its readiness check lists nodes, which needs a
	// token that exists only after the bootstrap. The leader endpoint is
	// public.
	var a *testAgent
	dataDir, logDir := t.TempDir(), t.TempDir()
	for attempt := 1; ; attempt++ {
		a = launchAgent(t, dataDir, filepath.Join(logDir, fmt.Sprintf("agent-%d.log", attempt)), "-config", cfg)
		_, up := harness.Poll(agentReadyTimeout, 100*time.Millisecond, func() (bool, string) {
			status, err := a.Do(http.MethodGet, "/v1/status/leader", nil, nil)
			return err == nil && status == http.StatusOK || !a.proc.Running(), fmt.Sprintf("status %d, %v", status, err)
		})
		if up && a.proc.Running() {
			break
		}
		portTaken := strings.Contains(a.log(), "address already in use")
		a.stop()
		if !portTaken || attempt == 3 {
			t.Fatalf("agent with ACLs did not start:\n%s", a.log())
		}
	}

	var boot struct{ SecretID, Type string }
	if err := json.Unmarshal([]byte(a.MustCLI("acl", "bootstrap", "-json").Stdout), &boot); err != nil || boot.Type != "management" {
		t.Fatalf("bootstrap: %+v, %v", boot, err)
	}
	if r := a.CLI("job", "status"); r.Code != 1 || !strings.Contains(r.Stderr, "Permission denied") {
		t.Fatalf("job status without a token: want exit 1, Permission denied:\n%s", r)
	}
	a.Token = boot.SecretID
	if err := a.waitReady(); err != nil {
		t.Fatalf("agent not ready: %v\n%s", err, a.log())
	}

	rules := harness.WriteFile(t, "readers.hcl", "namespace \"default\" {\n  policy = \"read\"\n}\n")
	a.MustCLI("acl", "policy", "apply", "-description", "read default", "readers", rules)
	var reader struct{ SecretID, Name string }
	if err := json.Unmarshal([]byte(a.MustCLI("acl", "token", "create", "-name", "ci", "-policy", "readers", "-json").Stdout), &reader); err != nil || reader.SecretID == "" {
		t.Fatalf("token create: %+v, %v", reader, err)
	}

	jobFile := harness.WriteFile(t, "web.hcl", fmt.Sprintf(sleeperJob, "web"))
	a.Token = reader.SecretID
	if r := a.CLI("job", "run", "-detach", jobFile); r.Code != 1 || !strings.Contains(r.Stderr, "Permission denied") {
		t.Fatalf("job run with a read-only token: want exit 1, Permission denied:\n%s", r)
	}
	if r := a.MustCLI("acl", "token", "self"); !strings.Contains(r.Stdout, "ci") {
		t.Fatalf("token self:\n%s", r)
	}

	a.Token = boot.SecretID
	a.MustCLI("job", "run", "-detach", jobFile)
	a.Token = reader.SecretID
	if r := a.MustCLI("job", "status", "web"); !strings.Contains(r.Stdout, "web") {
		t.Fatalf("job status as the reader:\n%s", r)
	}
	if r := a.CLI("acl", "token", "list"); r.Code != 1 || !strings.Contains(r.Stderr, "Permission denied") {
		t.Fatalf("token list as the reader: want exit 1:\n%s", r)
	}
}

package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// Registering a periodic job schedules it without evaluating it; a forced
// launch creates a child that runs to completion.
func TestPeriodicForce(t *testing.T) {
	t.Parallel()
	a := startAgent(t)

	run := a.MustCLI("job", "run", exampleJob("periodic.hcl"))
	if !strings.Contains(run.Stdout, "Approximate next launch time") || strings.Contains(run.Stdout, "Monitoring evaluation") {
		t.Errorf("job run of a periodic job should print the next launch and monitor nothing:\n%s", run)
	}
	var evals []evaluation
	a.MustGet("/v1/job/tick/evaluations", &evals)
	if len(evals) != 0 {
		t.Errorf("registering a periodic job created evaluations: %+v", evals)
	}

	force := a.MustCLI("job", "periodic", "force", "tick")
	m := regexp.MustCompile(`Evaluation triggered by job "(tick/periodic-\d+)"`).FindStringSubmatch(force.Stdout)
	if m == nil {
		t.Fatalf("periodic force did not monitor a child's evaluation:\n%s", force)
	}
	child := m[1]

	var kids []jobStub
	a.MustGet("/v1/jobs?prefix=tick/", &kids)
	found := false
	for _, k := range kids {
		found = found || (k.ID == child && k.ParentID == "tick" && k.Type == "sysbatch")
	}
	if !found {
		t.Errorf("child %s is not listed as tick's sysbatch child: %+v", child, kids)
	}
	a.waitJobDead(child)

	status := a.MustCLI("job", "status", "tick")
	if !strings.Contains(status.Stdout, child) {
		t.Errorf("job status tick does not list child %s:\n%s", child, status)
	}
}

// A parameterized job is dispatched with meta and a payload; the child's
// task sees both. Dispatches that break the job's parameters are refused and
// create nothing.
func TestDispatch(t *testing.T) {
	t.Parallel()
	a := startAgent(t)

	run := a.MustCLI("job", "run", exampleJob("dispatch.hcl"))
	if strings.Contains(run.Stdout, "Monitoring evaluation") {
		t.Errorf("job run of a parameterized job should monitor nothing:\n%s", run)
	}

	const text = "payload written by the e2e test"
	d := a.MustCLI("job", "dispatch", "-meta", "name=e2e", "greet", harness.WriteFile(t, "input.txt", text+"\n"))
	child, _ := kvField(d.Stdout, "Dispatched Job ID")
	if !regexp.MustCompile(`^greet/dispatch-\d+-[0-9a-f]{8}$`).MatchString(child) {
		t.Fatalf("dispatched job ID %q; output:\n%s", child, d)
	}
	allocs := a.waitJobDead(child)

	var j job
	a.MustGet("/v1/job/"+harness.Escape(child), &j)
	// The API answers with the payload as it was sent (the state keeps it
	// compressed, as Nomad does).
	payload := j.Payload
	if j.ParentID != "greet" || j.Meta["name"] != "e2e" || strings.TrimSpace(string(payload)) != text {
		t.Errorf("child job = parent %q, meta %v, payload %q", j.ParentID, j.Meta, payload)
	}
	logs := a.MustCLI("alloc", "logs", allocs[0].ID)
	if !strings.Contains(logs.Stdout, "hello e2e") || !strings.Contains(logs.Stdout, text) {
		t.Errorf("alloc logs should greet e2e and echo the payload:\n%s", logs)
	}

	big := harness.WriteFile(t, "big.txt", strings.Repeat("x", 16*1024+1))
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing required meta", []string{"job", "dispatch", "greet"}, []string{"required meta", "name"}},
		{"payload over 16 KiB", []string{"job", "dispatch", "-meta", "name=big", "greet", big}, []string{"exceeds maximum size", "16384"}},
	} {
		// Not subtests: the agent's helpers fail the test that owns it.
		res := a.CLI(tc.args...)
		if res.Code == 0 {
			t.Errorf("%s: dispatch was accepted: %s", tc.name, res)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(res.Stderr, w) {
				t.Errorf("%s: error does not mention %q: %s", tc.name, w, res)
			}
		}
	}

	var kids []jobStub
	a.MustGet("/v1/jobs?prefix=greet/", &kids)
	if len(kids) != 1 || kids[0].ID != child {
		t.Errorf("refused dispatches created jobs; children = %s", fmt.Sprint(kids))
	}
}

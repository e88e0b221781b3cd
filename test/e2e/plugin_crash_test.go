package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// The sysbatch scheduler plugin is killed while evaluations for it are
// queued. The core restarts the plugin and retries what it was working on:
// every evaluation completes, and no job is placed twice or not at all.
func TestSchedulerPluginKilledWhileEvalsQueued(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	// The plugin starts at the first sysbatch eval: run one to have it.
	var warm registerResponse
	a.MustWrite(http.MethodPut, "/v1/jobs", map[string]any{"Job": a.ParseJob(fmt.Sprintf(trueJob, "e2e-crash-warm"))}, &warm)
	harness.WaitFor(t, waitTimeout, "the first sysbatch eval to complete", func() (bool, string) {
		var e evaluation
		a.MustGet("/v1/evaluation/"+warm.EvalID, &e)
		return e.Status == "complete", fmt.Sprintf("%+v", e)
	})
	before, ok := harness.ChildPlugin(a.PID(), "scheduler-sysbatch")
	if !ok {
		t.Fatalf("no scheduler-sysbatch plugin under agent %d: %v", a.PID(), harness.Descendants(a.PID()))
	}

	// Parse first, so that the registrations follow each other closely.
	const n = 20
	ids := make([]string, n)
	bodies := make([]json.RawMessage, n)
	for i := range n {
		ids[i] = fmt.Sprintf("e2e-crash-%02d", i)
		bodies[i] = a.ParseJob(fmt.Sprintf(trueJob, ids[i]))
	}
	evalIDs := make([]string, n)
	for i := range n {
		var resp registerResponse
		a.MustWrite(http.MethodPut, "/v1/jobs", map[string]any{"Job": bodies[i]}, &resp)
		if resp.EvalID == "" {
			t.Fatalf("registering %s created no evaluation", ids[i])
		}
		evalIDs[i] = resp.EvalID
		if i == n/2 {
			if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
				t.Fatalf("kill plugin %v: %v", before, err)
			}
		}
	}

	harness.WaitFor(t, waitTimeout, "the plugin to come back", func() (bool, string) {
		p, ok := harness.ChildPlugin(a.PID(), "scheduler-sysbatch")
		return ok && p.PID != before.PID, fmt.Sprintf("plugin: %v (killed %d)", p, before.PID)
	})

	for i, evalID := range evalIDs {
		harness.WaitFor(t, waitTimeout, "eval "+evalID+" of "+ids[i]+" to complete", func() (bool, string) {
			var e evaluation
			a.MustGet("/v1/evaluation/"+evalID, &e)
			if e.Status == "failed" || e.Status == "canceled" {
				t.Fatalf("eval %s of %s ended %s: %s", evalID, ids[i], e.Status, e.StatusDescription)
			}
			return e.Status == "complete", fmt.Sprintf("%+v", e)
		})
	}
	for _, id := range ids {
		allocs := a.waitJobDead(id)
		if len(allocs) != 1 {
			t.Errorf("job %s has %d allocations; want exactly one: %+v", id, len(allocs), allocs)
		}
		var evals []evaluation
		a.MustGet("/v1/job/"+id+"/evaluations", &evals)
		for _, e := range evals {
			if e.Status != "complete" {
				t.Errorf("job %s has eval %s %s (%s)", id, e.ID, e.Status, e.StatusDescription)
			}
		}
	}
}

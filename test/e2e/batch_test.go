package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// batchJob is a batch job of three /bin/true allocations, placed by count
// by the batch scheduler plugin. Format it with the job ID (%q).
const batchJob = `job %q {
  type        = "batch"
  datacenters = ["*"]

  group "g" {
    count = 3

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// A user runs a batch job of count 3 on the dev agent: the batch plugin
// places all three on the one node, each runs to completion, none is
// replaced, and the job is dead.
func TestBatchRunsToCompletion(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-batch"

	run := a.MustCLI("job", "run", harness.WriteFile(t, "batch.hcl", fmt.Sprintf(batchJob, id)))
	if !strings.Contains(run.Stdout, `finished with status "complete"`) {
		t.Errorf("job run did not report the evaluation complete:\n%s", run)
	}

	var out string
	harness.WaitFor(t, waitTimeout, "job status to show the job dead with three complete allocs", func() (bool, string) {
		res := a.CLI("job", "status", id)
		if res.Code != 0 {
			return false, res.String()
		}
		out = res.Stdout
		status, _ := kvField(out, "Status")
		allocs := harness.Table(section(out, "Allocations"))
		if status != "dead" || len(allocs) != 3 {
			return false, out
		}
		for _, al := range allocs {
			if al["Status"] != "complete" {
				return false, out
			}
		}
		return true, out
	})
	summary := harness.Table(section(out, "Summary"))
	if len(summary) != 1 || summary[0]["Task Group"] != "g" || summary[0]["Complete"] != "3" || summary[0]["Failed"] != "0" {
		t.Errorf("summary = %v; want group g with 3 complete, 0 failed:\n%s", summary, out)
	}

	var j job
	mustJSON(t, "job status -json", a.MustCLI("job", "status", "-json", id).Stdout, &j)
	if j.ID != id || j.Type != "batch" || j.Status != "dead" {
		t.Errorf("job status -json = %+v; want %s, batch, dead", j, id)
	}
	// A complete alloc of a type that runs to completion is done: it
	// makes no follow-up eval (each one, delayed longer than the last,
	// held the job pending for minutes).
	var evals []struct{ ID, TriggeredBy, Status string }
	a.MustGet("/v1/job/"+id+"/evaluations", &evals)
	for _, e := range evals {
		if e.TriggeredBy == "failed-follow-up" {
			t.Errorf("eval %s (%s) follows up a complete alloc; want none", e.ID, e.Status)
		}
	}
}

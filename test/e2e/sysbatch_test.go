package e2e

import (
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// A user runs the example sysbatch job and follows it with the CLI until it
// is done, then reads its output.
func TestSysbatchRunsToCompletion(t *testing.T) {
	t.Parallel()
	a := startAgent(t)

	run := a.MustCLI("job", "run", exampleJob("sysbatch.hcl"))
	if !strings.Contains(run.Stdout, `finished with status "complete"`) {
		t.Errorf("job run did not report the evaluation complete:\n%s", run)
	}

	var out string
	harness.WaitFor(t, waitTimeout, "job status to show the job dead and its alloc complete", func() (bool, string) {
		res := a.CLI("job", "status", "hello-sysbatch")
		if res.Code != 0 {
			return false, res.String()
		}
		out = res.Stdout
		status, _ := kvField(out, "Status")
		allocs := harness.Table(section(out, "Allocations"))
		return status == "dead" && len(allocs) == 1 && allocs[0]["Status"] == "complete", out
	})
	if !strings.Contains(out, "Status        = dead") {
		t.Errorf("job status does not align Status like Nomad's:\n%s", out)
	}
	summary := harness.Table(section(out, "Summary"))
	if len(summary) != 1 || summary[0]["Task Group"] != "hello" || summary[0]["Complete"] != "1" || summary[0]["Failed"] != "0" {
		t.Errorf("summary = %v; want group hello with 1 complete, 0 failed:\n%s", summary, out)
	}
	allocID := harness.Table(section(out, "Allocations"))[0]["ID"]

	var j job
	mustJSON(t, "job status -json", a.MustCLI("job", "status", "-json", "hello-sysbatch").Stdout, &j)
	if j.ID != "hello-sysbatch" || j.Type != "sysbatch" || j.Status != "dead" {
		t.Errorf("job status -json = %+v; want hello-sysbatch, sysbatch, dead", j)
	}

	logs := a.MustCLI("alloc", "logs", allocID)
	if !strings.Contains(logs.Stdout, "hello from hello-sysbatch.hello[0]") {
		t.Errorf("alloc logs %s:\n%s", allocID, logs)
	}
}

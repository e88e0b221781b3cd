package e2e

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// An agent that is SIGKILLed leaves no plugin processes behind: the kernel
// tells them their parent died.
//
// Plugins start when first needed: a sysbatch job and a collection start
// its scheduler, raw_exec and gc; every plugin process there is then must
// exit.
func TestKilledAgentLeavesNoPlugins(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	var reg registerResponse
	a.MustWrite(http.MethodPut, "/v1/jobs", map[string]any{"Job": a.ParseJob(fmt.Sprintf(trueJob, "e2e-kill-warm"))}, &reg)
	harness.WaitFor(t, waitTimeout, "the job's eval to complete", func() (bool, string) {
		var e evaluation
		a.MustGet("/v1/evaluation/"+reg.EvalID, &e)
		return e.Status == "complete", fmt.Sprintf("%+v", e)
	})
	a.MustWrite(http.MethodPut, "/v1/system/gc", nil, nil)
	var plugins []harness.Proc
	harness.WaitFor(t, waitTimeout, "the needed plugins to run", func() (bool, string) {
		plugins = plugins[:0]
		var missing []string
		for _, name := range []string{"scheduler-sysbatch", "driver-rawexec", "gc"} {
			if p, ok := harness.ChildPlugin(a.proc.PID(), name); ok {
				plugins = append(plugins, p)
			} else {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, fmt.Sprint("missing: ", missing)
	})
	for _, name := range []string{"scheduler-system", "scheduler-batch", "scheduler-service", "driver-docker", "driver-exec", "driver-mock", "csi-bridge"} {
		if p, ok := harness.ChildPlugin(a.proc.PID(), name); ok {
			plugins = append(plugins, p) // started by something else the agent did
		}
	}
	a.leftoversChecked = true
	if err := a.proc.Cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	<-a.proc.Exited()
	harness.WaitFor(t, waitTimeout, "the plugins to exit after their agent was killed", func() (bool, string) {
		left := harness.StillAlive(plugins)
		return len(left) == 0, fmt.Sprint(left)
	})
}

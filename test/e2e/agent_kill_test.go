package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// An agent that is SIGKILLed leaves no plugin processes behind: the kernel
// tells them their parent died.
func TestKilledAgentLeavesNoPlugins(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	var plugins []harness.Proc
	for _, name := range []string{"scheduler-system", "scheduler-sysbatch", "scheduler-batch", "scheduler-service", "driver-rawexec", "driver-docker", "driver-exec", "driver-mock", "csi-bridge", "gc"} {
		p, ok := harness.ChildPlugin(a.proc.PID(), name)
		if !ok {
			t.Fatalf("plugin %s of the agent not found", name)
		}
		plugins = append(plugins, p)
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

package agent

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/internal/proctest"
	"github.com/drover-org/drover/core/structs"
)

// A real scheduler plugin process that hangs (SIGSTOP) costs its job type
// bounded attempts (scheduler_call_timeout); the other type's plugin keeps
// scheduling meanwhile.
func TestStoppedSchedulerPluginDoesNotStallOtherTypes(t *testing.T) {
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	cfg.Server.SchedulerCallTimeout = "1s"
	a := startTestAgent(t, cfg, hclog.Warn)
	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _ := a.Server().State().Nodes(nil)
		return len(nodes) == 1 && nodes[0].Ready(), fmt.Sprint(len(nodes))
	})
	// The plugin starts at its first eval; start it now to stop it.
	if err := a.Plugins().Start(t.Context(), "scheduler-system"); err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, p := range a.Plugins().Status() {
		if p.Name == "scheduler-system" {
			pid = p.Pid
		}
	}
	if pid == 0 {
		t.Fatalf("no scheduler-system plugin in %+v", a.Plugins().Status())
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) // before Shutdown
	proctest.Stop(t, pid)

	job := func(id, typ string) *structs.Job {
		return &structs.Job{ID: id, Type: typ, TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
				Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
		}}}
	}
	var hung []string
	for i := range 4 {
		r, err := a.Server().Jobs().Register(context.Background(), job(fmt.Sprintf("hung-%d", i), "system"), false, 0)
		if err != nil {
			t.Fatal(err)
		}
		hung = append(hung, r.EvalID)
	}
	r, err := a.Server().Jobs().Register(context.Background(), job("moves", "sysbatch"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the sysbatch eval to complete while the system plugin is stopped", func() (bool, string) {
		ev, _ := a.Server().State().EvalByID(nil, r.EvalID)
		if ev == nil {
			return false, "no eval"
		}
		return ev.Status == structs.EvalStatusComplete, ev.Status
	})
	for _, id := range hung {
		ev, _ := a.Server().State().EvalByID(nil, id)
		if ev == nil || ev.Status == structs.EvalStatusComplete {
			t.Fatalf("system eval %s completed with its plugin stopped: %+v; plugins: %+v", id, ev, a.Plugins().Status())
		}
	}
}

package operator

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func testPlugins() []structs.AgentPlugin {
	return []structs.AgentPlugin{
		{Name: "scheduler-sysbatch", Kind: "scheduler", Builtin: true, Version: "0.1.0", PID: 4242,
			StartTime: clitest.TestNow.Add(-time.Minute), Health: structs.AgentPluginHealthy,
			JobTypes: []structs.AgentJobType{{Name: "sysbatch", Behavior: structs.JobTypeBehavior{
				MaxAttempts: 2, PerNode: true, RunsToCompletion: true, AllowPeriodic: true, AllowParameterized: true,
				RefusedBlocks: []string{"update"}, EvalOnNodeJoin: true, PreemptionSwitch: structs.PreemptSwitchSysBatch,
				DefaultRestart: &structs.RestartPolicy{Attempts: 0, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: "fail"},
			}}}},
		{Name: "gpu", Kind: "scheduler", Path: "/opt/drover/plugins/gpu", Restarts: 3,
			LastError: "plugin process 77 exited after 1.2s", Health: structs.AgentPluginFailed},
		// Started when first needed, not yet: no process.
		{Name: "scheduler-batch", Kind: "scheduler", Builtin: true, Version: "0.1.0",
			JobTypes: []structs.AgentJobType{{Name: "batch", Behavior: structs.JobTypeBehavior{MaxAttempts: 2, RunsToCompletion: true}}},
			Health:   structs.AgentPluginIdle, HealthDescription: "not started: starts when first needed"},
	}
}

func TestOperatorPluginList(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/agent/plugins", map[string]any{"Plugins": testPlugins()})
	r := f.Run(t, "", "operator", "plugin", "list")
	clitest.WantCode(t, r, 0)
	want := strings.Join([]string{
		"Name                Kind       Version  Job Types  PID   Restarts  Health",
		"scheduler-sysbatch  scheduler  0.1.0    sysbatch   4242  0         healthy",
		"gpu                 scheduler  <none>   <none>     -     3         failed",
		"scheduler-batch     scheduler  0.1.0    batch      -     0         idle",
	}, "\n") + "\n"
	if r.Out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.Out, want)
	}
	r = f.Run(t, "", "operator", "plugin", "list", "-json")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "-json", r.Out, `"Plugins": [`, `"Name": "gpu"`)
}

func TestOperatorPluginStatus(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/agent/plugins/scheduler-sysbatch", testPlugins()[0])
	f.JSON("GET /v1/agent/plugins/gpu", testPlugins()[1])
	f.JSON("GET /v1/agent/plugins/scheduler-batch", testPlugins()[2])
	f.Fail("GET /v1/agent/plugins/nope", http.StatusNotFound, `unknown plugin "nope": this agent's plugins are gpu`)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"builtin scheduler", []string{"scheduler-sysbatch"}, 0, []string{
			"Name       = scheduler-sysbatch", "Path       = (built into the drover binary)", "PID        = 4242",
			"Started    = 2026-05-01T11:59:00Z", "Last Error = <none>",
			`Job Type "sysbatch"`,
			"  Places each group's count on every eligible node",
			"  Tasks run to completion",
			"  Scheduling attempts per evaluation: 2",
			"  Default restart policy: 0 attempts in 24h0m0s, 15s apart, then fail",
			"  Default reschedule policy: none",
			"  Allows: periodic, parameterized",
			"  Refuses: max_run_duration, update",
			"  Re-evaluates jobs when: a node joins",
			"  May preempt when the scheduler configuration's SysBatchSchedulerEnabled is on",
		}},
		{"failed third-party", []string{"gpu"}, 0, []string{
			"Path       = /opt/drover/plugins/gpu", "Health     = failed", "Last Error = plugin process 77 exited after 1.2s", "PID        = -",
		}},
		{"idle builtin", []string{"scheduler-batch"}, 0, []string{
			"PID        = -", "Started    = -", "Health     = idle (not started: starts when first needed)", `Job Type "batch"`,
		}},
		{"json", []string{"-json", "gpu"}, 0, []string{`"LastError": "plugin process 77 exited after 1.2s"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.Run(t, "", append([]string{"operator", "plugin", "status"}, tc.args...)...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "status", r.Out, tc.want...)
		})
	}
	r := f.Run(t, "", "operator", "plugin", "status", "nope")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, `unknown plugin "nope"`)
	clitest.WantCode(t, f.Run(t, "", "operator", "plugin", "status"), 1)
}

func TestOperatorPluginReload(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	p := testPlugins()[0]
	f.JSON("PUT /v1/agent/plugins/reload", map[string]any{"Reloaded": true, "Plugin": p})
	r := f.Run(t, "", "operator", "plugin", "reload", "scheduler-sysbatch")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, `Plugin "scheduler-sysbatch" reloaded (pid 4242, version 0.1.0)`)
	if q := f.Request("PUT /v1/agent/plugins/reload").Query; q != "name=scheduler-sysbatch" {
		t.Errorf("query = %q", q)
	}
	f.Fail("PUT /v1/agent/plugins/reload", http.StatusNotFound, `unknown plugin "x"`)
	r = f.Run(t, "", "operator", "plugin", "reload", "x")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, `Error reloading plugin "x"`, `unknown plugin "x"`)
	clitest.WantCode(t, f.Run(t, "", "operator", "plugin", "reload", "a", "b"), 1)
}

// Without a name the whole agent reloads, and the command says what was
// added, removed and relaunched.
func TestOperatorPluginReloadAll(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/agent/plugins/reload", map[string]any{"Reloaded": true, "Added": []string{"gpu-batch", "oneshot"}, "Removed": []string{"old"}})
	r := f.Run(t, "", "operator", "plugin", "reload")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "Plugins reloaded", "gpu-batch, oneshot", "old", "Relaunched")
	if !regexp.MustCompile(`Relaunched\s*=\s*<none>`).MatchString(r.Out) {
		t.Errorf("stdout does not say nothing was relaunched:\n%s", r.Out)
	}
	if q := f.Request("PUT /v1/agent/plugins/reload").Query; q != "" {
		t.Errorf("query = %q, want none", q)
	}
	f.Fail("PUT /v1/agent/plugins/reload", http.StatusBadRequest, `reload plugins: plugin "x": no executable file`)
	r = f.Run(t, "", "operator", "plugin", "reload")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Error reloading plugins", `plugin "x": no executable file`)
}

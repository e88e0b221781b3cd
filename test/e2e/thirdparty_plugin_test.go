package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// oneshotBinary is the file name of the example plugin in plugin_dir, and
// so the name of its stanza.
const oneshotBinary = "scheduler-oneshot"

// oneshotJob is a job of the example plugin's type: one `echo hi` that
// exits 0.
const oneshotJob = `job %q {
  type        = "oneshot"
  datacenters = ["*"]

  group "g" {
    task "hi" {
      driver = "raw_exec"

      config {
        command = "/bin/echo"
        args    = ["hi"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// agentPlugin is one row of GET /v1/agent/plugins, reduced to what the
// test reads.
type agentPlugin struct {
	Name, Kind, Version, Health string
	Builtin                     bool
	PID                         int
	JobTypes                    []struct{ Name string }
}

// A plugin built outside the drover module, from examples/plugins/oneshot,
// is dropped into plugin_dir and named in the agent config. Jobs of the type
// it declares run as it declares them: to completion, once, without a
// restart. The plugin is then rebuilt with a new version and reloaded while
// jobs keep coming: every evaluation still completes, no job is placed
// twice, and the agent reports the new version.
func TestThirdPartySchedulerPlugin(t *testing.T) {
	t.Parallel()
	pluginDir := t.TempDir()
	bin, err := harness.BuildExamplePlugin(repoRoot, "oneshot", pluginDir, oneshotBinary, "-X main.version=1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := harness.WriteFile(t, "plugins.hcl", fmt.Sprintf("plugin_dir = %q\n\nplugin %q {}\n", pluginDir, oneshotBinary))
	a := startAgent(t, "-config", cfg)

	t.Run("first run completes without a restart", func(t *testing.T) {
		a := a.with(t)
		a.waitEvalComplete(a.registerOneshot("e2e-oneshot"))
		a.checkRanOnce("e2e-oneshot")
	})

	t.Run("reload under load loses no eval", func(t *testing.T) {
		a := a.with(t)
		before := a.pluginRow(oneshotBinary)
		if before.Version != "1.0.0" || len(before.JobTypes) != 1 || before.JobTypes[0].Name != "oneshot" {
			t.Errorf("/v1/agent/plugins reports %s version %q; want 1.0.0: %+v", oneshotBinary, before.Version, before)
		}
		if _, err := harness.BuildExamplePlugin(repoRoot, "oneshot", pluginDir, oneshotBinary, "-X main.version=2.0.0"); err != nil {
			t.Fatal(err)
		}
		beforePID := pluginPID(a.PID(), bin)

		const n = 12
		ids := make([]string, n)
		evalIDs := make([]string, n)
		for i := range n {
			ids[i] = fmt.Sprintf("e2e-oneshot-load-%02d", i)
		}
		half := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if i == n/2 {
					close(half)
				}
				evalIDs[i] = a.registerOneshot(ids[i])
			}
		}()
		<-half
		a.MustWrite(http.MethodPut, "/v1/agent/plugins/reload?name="+oneshotBinary, nil, nil)
		wg.Wait()
		if t.Failed() {
			return
		}

		for i, id := range evalIDs {
			if id == "" {
				t.Fatalf("registering %s created no evaluation", ids[i])
			}
			a.waitEvalComplete(id)
		}
		for _, id := range ids {
			a.checkRanOnce(id)
		}
		if after := pluginPID(a.PID(), bin); beforePID == 0 || after == 0 || after == beforePID {
			t.Errorf("plugin process %d before the reload, %d after; want a new process", beforePID, after)
		}
		harness.WaitFor(t, waitTimeout, "/v1/agent/plugins to report version 2.0.0", func() (bool, string) {
			p := a.pluginRow(oneshotBinary)
			return p.Version == "2.0.0" && p.Health == "healthy", fmt.Sprintf("%+v", p)
		})
	})
}

// with is the agent bound to subtest t: its Must… helpers fail t. The
// agent's cleanup stays with the test that started it.
func (a *testAgent) with(t *testing.T) *testAgent {
	api := *a.API
	api.T = t
	return &testAgent{API: &api, t: t, DataDir: a.DataDir, proc: a.proc}
}

// registerOneshot registers oneshotJob as id and returns its eval ID. It
// only returns errors through t.Errorf, so a goroutine may call it.
func (a *testAgent) registerOneshot(id string) string {
	var parsed json.RawMessage
	status, err := a.DoRetry(http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": fmt.Sprintf(oneshotJob, id), "Canonicalize": true}, &parsed)
	if err != nil || status != http.StatusOK {
		a.t.Errorf("parse %s: status %d, %v", id, status, err)
		return ""
	}
	var resp registerResponse
	status, err = a.DoRetry(http.MethodPut, "/v1/jobs", map[string]any{"Job": parsed}, &resp)
	if err != nil || status != http.StatusOK {
		a.t.Errorf("register %s: status %d, %v", id, status, err)
	}
	return resp.EvalID
}

// waitEvalComplete waits for the eval to complete and fails at once if it
// fails or is canceled.
func (a *testAgent) waitEvalComplete(evalID string) {
	a.t.Helper()
	harness.WaitFor(a.t, waitTimeout, "eval "+evalID+" to complete", func() (bool, string) {
		var e evaluation
		a.MustGet("/v1/evaluation/"+evalID, &e)
		if e.Status == "failed" || e.Status == "canceled" {
			a.t.Fatalf("eval %s of %s ended %s: %s", evalID, e.JobID, e.Status, e.StatusDescription)
		}
		return e.Status == "complete", fmt.Sprintf("%+v", e)
	})
}

// checkRanOnce waits for the job to be dead and checks that it has exactly
// one allocation, complete, whose task never restarted.
func (a *testAgent) checkRanOnce(jobID string) {
	a.t.Helper()
	allocs := a.waitJobDead(jobID)
	if len(allocs) != 1 {
		a.t.Errorf("job %s has %d allocations; want exactly one: %+v", jobID, len(allocs), allocs)
	}
	for _, al := range allocs {
		ts := al.TaskStates["hi"]
		if al.ClientStatus != "complete" || ts == nil || ts.State != "dead" || ts.Failed || ts.Restarts != 0 {
			a.t.Errorf("job %s alloc %s: client status %s, task state %+v; want complete, dead, not failed, 0 restarts",
				jobID, al.ID, al.ClientStatus, ts)
		}
	}
}

// pluginRow is the plugin's row of GET /v1/agent/plugins.
func (a *testAgent) pluginRow(name string) agentPlugin {
	a.t.Helper()
	var resp struct{ Plugins []agentPlugin }
	status, err := a.DoRetry(http.MethodGet, "/v1/agent/plugins", nil, &resp)
	if err != nil || status != http.StatusOK {
		a.t.Fatalf("GET /v1/agent/plugins: status %d, %v", status, err)
	}
	for _, r := range resp.Plugins {
		if r.Name == name {
			return r
		}
	}
	a.t.Fatalf("GET /v1/agent/plugins does not list %s: %+v", name, resp.Plugins)
	return agentPlugin{}
}

// pluginPID is the pid of the agent's child process running bin, or 0.
func pluginPID(agentPID int, bin string) int {
	for _, p := range harness.ListProcs() {
		if p.PPID == agentPID && p.Alive() && strings.HasPrefix(p.Cmd, bin) {
			return p.PID
		}
	}
	return 0
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// liveBatchJob is a built-in (batch) job of the load: one /bin/true.
const liveBatchJob = `job %q {
  type        = "batch"
  datacenters = ["*"]

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }

      resources {
        cpu    = 20
        memory = %d
      }
    }
  }
}
`

// liveOneshotJob is a job of the example plugin's type, of the given
// memory.
const liveOneshotJob = `job %q {
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
        memory = %d
      }
    }
  }
}
`

// The issue-29 test: a third-party scheduler plugin is added to a running
// agent under load (a stanza and a file, then `drover operator plugin
// reload`), removed while evaluations of its type wait (SIGHUP), and added
// back (PUT /v1/agent/plugins/reload). Jobs of the built-in batch type are
// submitted all along, and jobs of the plugin's type whenever it is served.
// Every evaluation submitted completes: none is failed because its type was
// not served for a while, and the batch jobs are never disturbed.
//
// Which oneshot evals happen to be in the broker when the plugin goes is
// up to timing, so a few are made to wait for certain: they are blocked
// behind a "hog" job that holds most of the node's memory, and the hog is
// stopped only once the plugin is gone, which releases them into the
// broker while their type is not served. They must be held, then complete
// once the plugin is back.
func TestPluginAddRemoveUnderLoad(t *testing.T) {
	t.Parallel()
	pluginDir, stage := t.TempDir(), t.TempDir()
	built, err := harness.BuildExamplePlugin(repoRoot, "oneshot", stage, oneshotBinary, "-X main.version=1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	without := fmt.Sprintf("plugin_dir = %q\n", pluginDir)
	with := without + fmt.Sprintf("\nplugin %q {}\n", oneshotBinary)
	cfg := harness.WriteFile(t, "plugins.hcl", without)
	a := startAgent(t, "-config", cfg)
	install := func() {
		t.Helper()
		b, err := os.ReadFile(built)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(pluginDir, ".next")
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(pluginDir, oneshotBinary)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, []byte(with), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	uninstall := func() {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(without), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(pluginDir, oneshotBinary)); err != nil {
			t.Fatal(err)
		}
	}
	listed := func() bool {
		var resp struct{ Plugins []agentPlugin }
		a.MustGet("/v1/agent/plugins", &resp)
		for _, p := range resp.Plugins {
			if p.Name == oneshotBinary {
				return true
			}
		}
		return false
	}

	if code, body := a.registerHCL(fmt.Sprintf(liveOneshotJob, "refused", 16)); code != http.StatusBadRequest || !strings.Contains(body, "not served") {
		t.Fatalf("a oneshot job before the plugin is added: HTTP %d %s; want 400, not served", code, body)
	}

	// The load: batch jobs all along, oneshot jobs whenever the type is
	// served (a refusal while it is not is expected and not counted).
	var mu sync.Mutex
	var batchEvals, oneshotEvals []string
	var oneshotRefused int
	stop := make(chan struct{})
	var load sync.WaitGroup
	// Each submitter stops when told, and by itself after loadFor or
	// maxJobs jobs: the load is bounded whatever happens.
	const loadFor, maxJobs = 4 * time.Minute, 600
	submit := func(kind string, worker int) {
		defer load.Done()
		deadline := time.Now().Add(loadFor)
		for i := 0; i < maxJobs && time.Now().Before(deadline); i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("live-%s-%d-%03d", kind, worker, i)
			hcl := fmt.Sprintf(liveBatchJob, id, 16)
			if kind == "oneshot" {
				hcl = fmt.Sprintf(liveOneshotJob, id, 16)
			}
			code, body := a.registerHCL(hcl)
			mu.Lock()
			switch {
			case code == http.StatusOK:
				var r registerResponse
				if err := json.Unmarshal([]byte(body), &r); err != nil || r.EvalID == "" {
					t.Errorf("register %s: %s (%v)", id, body, err)
				} else if kind == "oneshot" {
					oneshotEvals = append(oneshotEvals, r.EvalID)
				} else {
					batchEvals = append(batchEvals, r.EvalID)
				}
			case kind == "oneshot" && code == http.StatusBadRequest && strings.Contains(body, "not served"):
				oneshotRefused++
			default:
				t.Errorf("register %s: HTTP %d %s", id, code, body)
			}
			mu.Unlock()
			// Paced so the load lasts the whole test on a slow machine
			// without flooding it.
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	// count waits until kind's submitters have n evals more than from.
	count := func(kind string) int {
		mu.Lock()
		defer mu.Unlock()
		if kind == "oneshot" {
			return len(oneshotEvals)
		}
		return len(batchEvals)
	}
	atLeast := func(kind string, n int) {
		t.Helper()
		harness.WaitFor(t, waitTimeout, fmt.Sprintf("%d %s evals submitted", n, kind), func() (bool, string) {
			return count(kind) >= n, fmt.Sprint(count(kind))
		})
	}
	for w := range 2 {
		load.Add(1)
		go submit("batch", w)
	}
	atLeast("batch", 15)

	// Add: a file and a stanza, then the CLI's whole reload.
	install()
	out := a.MustCLI("operator", "plugin", "reload")
	if v, _ := kvField(out.Stdout, "Added"); v != oneshotBinary {
		t.Fatalf("reload output does not say the plugin was added:\n%s", out)
	}
	for w := range 2 {
		load.Add(1)
		go submit("oneshot", w)
	}
	atLeast("oneshot", 15)

	// Evals that will be in the broker while the plugin is gone: oneshot
	// jobs blocked behind the hog.
	avail := a.nodeMemoryMB()
	big := avail * 6 / 10
	if code, body := a.registerHCL(fmt.Sprintf(hogJob, "live-hog", big)); code != http.StatusOK {
		t.Fatalf("register the hog: HTTP %d %s", code, body)
	}
	harness.WaitFor(t, waitTimeout, "the hog to run", func() (bool, string) {
		allocs := a.AllocsOf("live-hog")
		return len(allocs) == 1 && allocs[0].ClientStatus == "running", fmt.Sprintf("%+v", allocs)
	})
	var blockedJobs, blockedEvals []string
	for i := range 3 {
		id := fmt.Sprintf("live-blocked-%d", i)
		code, body := a.registerHCL(fmt.Sprintf(liveOneshotJob, id, big))
		var r registerResponse
		if err := json.Unmarshal([]byte(body), &r); code != http.StatusOK || err != nil {
			t.Fatalf("register %s: HTTP %d %s", id, code, body)
		}
		blockedJobs, blockedEvals = append(blockedJobs, id), append(blockedEvals, r.EvalID)
	}
	for _, id := range blockedJobs {
		harness.WaitFor(t, waitTimeout, id+" to have a blocked eval", func() (bool, string) {
			evs := a.jobEvals(id)
			for _, e := range evs {
				if e.Status == "blocked" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", evs)
		})
	}

	// Remove: stanza and file gone, then SIGHUP.
	uninstall()
	if err := syscall.Kill(a.PID(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, waitTimeout, "the plugin to be removed", func() (bool, string) { return !listed(), "still listed" })
	// It leaves the listing as it leaves routing, before its in-flight
	// calls drain and it is stopped: its process ends soon after.
	harness.WaitFor(t, waitTimeout, "the removed plugin's process to end", func() (bool, string) {
		pid := pluginPID(a.PID(), filepath.Join(pluginDir, oneshotBinary))
		return pid == 0, fmt.Sprintf("pid %d still runs", pid)
	})
	// The hog goes: the blocked evals enter the broker while no plugin
	// serves their type, and are held.
	a.MustWrite(http.MethodDelete, "/v1/job/live-hog", nil, nil)
	harness.WaitFor(t, waitTimeout, "the released oneshot evals to be held", func() (bool, string) {
		held := map[string]bool{}
		for line := range strings.Lines(a.log()) {
			for _, id := range blockedJobs {
				if strings.Contains(line, "holding the eval until one does") && strings.Contains(line, "job_id="+id+" ") {
					held[id] = true
				}
			}
		}
		return len(held) == len(blockedJobs), fmt.Sprintf("held: %v", held)
	})
	for _, id := range blockedJobs {
		for _, e := range a.jobEvals(id) {
			if e.Status == "failed" || e.Status == "canceled" {
				t.Fatalf("eval %s of %s ended %s while its type was not served: %s", e.ID, id, e.Status, e.StatusDescription)
			}
		}
	}

	// Back: the same plugin again, through the API.
	install()
	var resp struct {
		Reloaded bool
		Added    []string
	}
	a.MustWrite(http.MethodPut, "/v1/agent/plugins/reload", nil, &resp)
	if len(resp.Added) != 1 || resp.Added[0] != oneshotBinary {
		t.Fatalf("re-add answered %+v; want the plugin added", resp)
	}
	// Some more load with the plugin back, then stop it.
	atLeast("oneshot", count("oneshot")+15)
	close(stop)
	load.Wait()
	if t.Failed() {
		return
	}

	// Every eval submitted completes: zero lost.
	all := append(append(append([]string{}, batchEvals...), oneshotEvals...), blockedEvals...)
	for _, id := range all {
		a.waitEvalComplete(id)
	}
	for _, id := range blockedJobs {
		allocs := a.waitJobDead(id)
		if len(allocs) != 1 {
			t.Errorf("%s has %d allocations, want 1", id, len(allocs))
		}
		harness.WaitFor(t, waitTimeout, "every eval of "+id+" to complete", func() (bool, string) {
			for _, e := range a.jobEvals(id) {
				if e.Status == "failed" || e.Status == "canceled" {
					t.Fatalf("eval %s of %s ended %s: %s", e.ID, id, e.Status, e.StatusDescription)
				}
				if e.Status != "complete" {
					return false, fmt.Sprintf("%s %s", e.ID, e.Status)
				}
			}
			return true, ""
		})
	}
	// The built-in type was never disturbed: no batch eval was held.
	heldLoad := 0
	for line := range strings.Lines(a.log()) {
		if !strings.Contains(line, "holding the eval until one does") {
			continue
		}
		if strings.Contains(line, "type=batch") {
			t.Errorf("a batch eval was held: %s", line)
		}
		if strings.Contains(line, "job_id=live-oneshot-") {
			heldLoad++
		}
	}
	t.Logf("evals submitted, all complete (lost: 0): %d batch, %d oneshot, %d released from blocked while not served; "+
		"load evals held while not served: %d; oneshot registrations refused while not served: %d",
		len(batchEvals), len(oneshotEvals), len(blockedEvals), heldLoad, oneshotRefused)
}

// hogJob is a batch job that holds memory MB of the node while it sleeps.
const hogJob = `job %q {
  type        = "batch"
  datacenters = ["*"]

  group "g" {
    task "sleep" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["600"]
      }

      resources {
        cpu    = 20
        memory = %d
      }
    }
  }
}
`

// registerHCL parses and registers a job; it returns the register call's
// status and body, and fails nothing, so a goroutine may call it.
func (a *testAgent) registerHCL(hcl string) (int, string) {
	var parsed json.RawMessage
	status, err := a.DoRetry(http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": hcl, "Canonicalize": true}, &parsed)
	if err != nil || status != http.StatusOK {
		return status, fmt.Sprintf("parse: %v", err)
	}
	status, body, err := a.RawRetry(http.MethodPut, "/v1/jobs", map[string]any{"Job": parsed})
	if err != nil {
		return status, err.Error()
	}
	return status, string(body)
}

// jobEvals is GET /v1/job/:id/evaluations.
func (a *testAgent) jobEvals(jobID string) []evaluation {
	a.t.Helper()
	var evs []evaluation
	a.MustGet("/v1/job/"+harness.Escape(jobID)+"/evaluations", &evs)
	return evs
}

// nodeMemoryMB is the memory the agent's node offers to allocations.
func (a *testAgent) nodeMemoryMB() int64 {
	a.t.Helper()
	var n struct {
		NodeResources     struct{ Memory struct{ MemoryMB int64 } }
		ReservedResources *struct{ Memory struct{ MemoryMB int64 } }
	}
	a.MustGet("/v1/node/"+a.NodeID(), &n)
	mb := n.NodeResources.Memory.MemoryMB
	if n.ReservedResources != nil {
		mb -= n.ReservedResources.Memory.MemoryMB
	}
	if mb <= 0 {
		a.t.Fatalf("the node offers no memory: %+v", n)
	}
	return mb
}

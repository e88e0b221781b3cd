package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// A system job's task is killed behind the agent's back: the client restarts
// it in place (same allocation, new process, a restart counted) under the
// group's restart policy. Stopping the job then stops the process, and a
// purge removes the job.
func TestSystemTaskKilledIsRestarted(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-sleeper"
	a.MustCLI("job", "run", harness.WriteFile(t, "sleeper.hcl", fmt.Sprintf(sleeperJob, id)))

	var al alloc
	harness.WaitFor(t, waitTimeout, "the system alloc to run", func() (bool, string) {
		allocs := a.AllocsOf(id)
		if len(allocs) != 1 || allocs[0].ClientStatus != "running" {
			return false, fmt.Sprintf("%+v", allocs)
		}
		al = allocs[0]
		return true, ""
	})

	// <data-dir>/alloc/<alloc-id>/alloc is the shared dir, NOMAD_ALLOC_DIR.
	pidFile := filepath.Join(a.DataDir, "alloc", al.ID, "alloc", "pid")
	taskPID := func() (int, string) {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return 0, err.Error()
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, fmt.Sprintf("pid file %q: %v", b, err)
		}
		p, ok := harness.ReadProc(pid)
		if !ok || !p.Alive() || p.Cmd != "sleep 3600" {
			return 0, fmt.Sprintf("pid %d is not a running `sleep 3600` (%+v)", pid, p)
		}
		return pid, ""
	}
	var first int
	harness.WaitFor(t, waitTimeout, "the task to record its pid", func() (bool, string) {
		pid, why := taskPID()
		first = pid
		return pid != 0, why
	})

	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatalf("kill task %d: %v", first, err)
	}
	var second int
	harness.WaitFor(t, waitTimeout, "a new task process", func() (bool, string) {
		pid, why := taskPID()
		second = pid
		return pid != 0 && pid != first, fmt.Sprintf("pid %d; %s", pid, why)
	})
	harness.WaitFor(t, waitTimeout, "the restart to show in the task state", func() (bool, string) {
		var got alloc
		a.MustGet("/v1/allocation/"+al.ID, &got)
		ts := got.TaskStates["sleep"]
		if ts == nil {
			return false, fmt.Sprintf("no task state: %+v", got)
		}
		return ts.Restarts >= 1 && ts.State == "running" && got.ClientStatus == "running",
			fmt.Sprintf("client %s, task %+v", got.ClientStatus, *ts)
	})
	// The harness finds tasks by their cwd and shims through their tasks;
	// check that it sees this task and the shim that runs it.
	var sawTask, sawShim bool
	for _, p := range harness.ProcsUnder(a.DataDir, droverBin) {
		sawTask = sawTask || p.PID == second
		sawShim = sawShim || harness.IsShim(p, droverBin)
	}
	if !sawTask || !sawShim {
		t.Errorf("processes under the data dir: task found %v, shim found %v", sawTask, sawShim)
	}
	if allocs := a.AllocsOf(id); len(allocs) != 1 || allocs[0].ID != al.ID {
		t.Errorf("a restart within policy must keep the allocation; allocs = %+v", allocs)
	}

	a.MustCLI("job", "stop", id)
	harness.WaitFor(t, waitTimeout, "the alloc to be stopped and complete", func() (bool, string) {
		var got alloc
		a.MustGet("/v1/allocation/"+al.ID, &got)
		return got.DesiredStatus == "stop" && got.ClientStatus == "complete",
			fmt.Sprintf("desired %s, client %s", got.DesiredStatus, got.ClientStatus)
	})
	harness.WaitFor(t, waitTimeout, "the task process to end", func() (bool, string) {
		return !harness.PIDAlive(second), fmt.Sprintf("pid %d alive", second)
	})

	a.MustCLI("job", "stop", "-purge", id)
	if status, err := a.Do(http.MethodGet, "/v1/job/"+id, nil, nil); err != nil || status != http.StatusNotFound {
		t.Errorf("GET /v1/job/%s after purge: status %d, %v; want 404", id, status, err)
	}
}

// A dev agent keeps its state in memory, so nothing could ever recover its
// tasks: when it shuts down it must stop them, not leave them running.
func TestDevAgentShutdownStopsTasks(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-orphan"
	a.MustCLI("job", "run", harness.WriteFile(t, "sleeper.hcl", fmt.Sprintf(sleeperJob, id)))
	harness.WaitFor(t, waitTimeout, "the task to run", func() (bool, string) {
		allocs := a.AllocsOf(id)
		return len(allocs) == 1 && allocs[0].TaskStates["sleep"] != nil && allocs[0].TaskStates["sleep"].State == "running",
			fmt.Sprintf("%+v", allocs)
	})
	if ps := harness.ProcsUnder(a.DataDir, droverBin); len(ps) == 0 {
		t.Fatal("the running task is not found under the data dir")
	}

	a.leftoversChecked = true
	left, graceful := a.interrupt()
	if !graceful {
		t.Fatal("the agent did not shut down by itself after SIGINT")
	}
	if len(left) > 0 {
		t.Errorf("after the dev agent's shutdown these still run: %v", left)
	}
}

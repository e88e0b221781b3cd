package client

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

// startClient starts a client over the state dir with the given driver
// plugins; crashAt, if set, is installed as the runners' CrashAt hook.
func startClient(t *testing.T, srv *fakeServer, drivers fakeProvider, dir string, crashAt func(string, string, killPoint) bool) *Client {
	t.Helper()
	c, err := New(Config{
		StateDir: dir, Server: srv, Drivers: drivers,
		UpdateBatchInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond,
		MaxRetryInterval: 20 * time.Millisecond, FingerprintInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.rcfg.CrashAt = crashAt
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// crashOnce returns a CrashAt hook that crashes at the first time task
// reaches p, and a channel closed when it did.
func crashOnce(task string, p killPoint) (func(string, string, killPoint) bool, <-chan struct{}) {
	var once sync.Once
	crashed := make(chan struct{})
	return func(_, name string, at killPoint) bool {
		fire := false
		if name == task && at == p {
			once.Do(func() { fire = true; close(crashed) })
		}
		return fire
	}, crashed
}

// crashAndRecover runs alloc on a client that crashes at p in the exit
// path of the alloc's "main" task, then starts a new client on the same
// state dir and waits until its runner of the alloc is done. With
// pluginSurvives the new client talks to the same driver plugin process;
// otherwise to a new one over the same host.
func crashAndRecover(t *testing.T, alloc *structs.Allocation, p killPoint, pluginSurvives bool) (*fakeServer, *fakeWorld, *Client) {
	t.Helper()
	srv, world, dir := newFakeServer(), newFakeWorld(), t.TempDir()
	drv1 := newFakeDriver(world)
	hook, crashed := crashOnce("main", p)
	alloc.NodeID = ""
	c1 := startClient(t, srv, fakeProvider{"fake": drv1}, dir, hook)
	alloc.NodeID = c1.NodeID()
	srv.upsert(alloc)
	select {
	case <-crashed:
	case <-time.After(testTimeout):
		t.Fatalf("task never reached kill point %s", p)
	}
	c1.Shutdown()

	drv2 := newFakeDriver(world)
	if pluginSurvives {
		drv2 = drv1
	}
	c2 := startClient(t, srv, fakeProvider{"fake": drv2}, dir, nil)
	r := c2.runner(alloc.ID)
	if r == nil {
		t.Fatal("alloc not restored")
	}
	select {
	case <-r.done():
	case <-time.After(testTimeout):
		st, _ := r.task("main").snapshot()
		t.Fatalf("restored alloc runner did not finish; main = %+v", st)
	}
	return srv, world, c2
}

func terminatedCodes(ts *structs.TaskState) []int {
	var out []int
	for _, e := range ts.Events {
		if e.Type == structs.TaskTerminated {
			out = append(out, e.ExitCode)
		}
	}
	return out
}

// TestCrashInExitPathNeverRerunsFinishedTask kills the client at every
// step of a finished batch task's exit path: the next client must not
// start the task again, and must report it complete with its exit code.
func TestCrashInExitPathNeverRerunsFinishedTask(t *testing.T) {
	for _, p := range exitKillPoints {
		for _, survives := range []bool{false, true} {
			name := string(p) + "/plugin-restarted"
			if survives {
				name = string(p) + "/plugin-survived"
			}
			t.Run(name, func(t *testing.T) {
				job := testJob("batch", fakeTaskSpec("main", `{"exit_code": 0}`))
				alloc := testAlloc("batch-1", "", job)
				srv, world, c2 := crashAndRecover(t, alloc, p, survives)

				if n := world.startCount("main"); n != 1 {
					t.Fatalf("task started %d times; a finished task must never rerun", n)
				}
				waitFor(t, "alloc complete", func() bool {
					return srv.clientStatus(alloc.ID) == structs.AllocClientStatusComplete
				})
				ts := srv.alloc(alloc.ID).TaskStates["main"]
				if ts.State != structs.TaskStateDead || ts.Failed {
					t.Fatalf("task state = %+v; want dead, not failed", ts)
				}
				if codes := terminatedCodes(ts); !slices.Equal(codes, []int{0}) {
					t.Fatalf("Terminated exit codes = %v (events %v); want exactly one, 0", codes, eventTypes(ts))
				}
				// The exited driver task is cleaned up, whoever did it.
				waitFor(t, "driver task destroyed", func() bool {
					world.mu.Lock()
					defer world.mu.Unlock()
					_, ok := world.tasks[alloc.ID+"/main"]
					return !ok
				})
				if st, h := c2.runner(alloc.ID).task("main").snapshot(); h != nil || st.State != structs.TaskStateDead {
					t.Fatalf("restored runner: state %q, handle %v; want dead without handle", st.State, h)
				}
			})
		}
	}
}

// TestCrashInExitPathKeepsPendingRestart kills the client at every step
// of the exit path of a run the restart policy restarts: the restart
// still happens, once, after recovery.
func TestCrashInExitPathKeepsPendingRestart(t *testing.T) {
	for _, p := range exitKillPoints {
		t.Run(string(p), func(t *testing.T) {
			task := fakeTaskSpec("main", `{"fail_first": 1, "exit_code": 0}`)
			task.RestartPolicy = &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail}
			alloc := testAlloc("batch-1", "", testJob("batch", task))
			srv, world, _ := crashAndRecover(t, alloc, p, false)

			if n := world.startCount("main"); n != 2 {
				t.Fatalf("task started %d times; want 2 (the failed run and its one restart)", n)
			}
			waitFor(t, "alloc complete", func() bool {
				return srv.clientStatus(alloc.ID) == structs.AllocClientStatusComplete
			})
			ts := srv.alloc(alloc.ID).TaskStates["main"]
			if ts.State != structs.TaskStateDead || ts.Failed || ts.Restarts != 1 {
				t.Fatalf("task state = %+v; want dead, not failed, after 1 restart", ts)
			}
			if codes := terminatedCodes(ts); !slices.Equal(codes, []int{1, 0}) {
				t.Fatalf("Terminated exit codes = %v (events %v); want [1 0]", codes, eventTypes(ts))
			}
		})
	}
}

// TestRawExecCrashInExitPathNeverRerunsFinishedTask is the kill-point
// table with real processes: the raw_exec driver (a new plugin instance
// after the crash) and a command that counts its runs in a file.
func TestRawExecCrashInExitPathNeverRerunsFinishedTask(t *testing.T) {
	for _, p := range exitKillPoints {
		t.Run(string(p), func(t *testing.T) {
			srv, dir := newFakeServer(), t.TempDir()
			hook, crashed := crashOnce("main", p)
			c1 := startClient(t, srv, fakeProvider{rawexec.Name: newRawExec(t)}, dir, hook)
			task := rawTask("main", "/bin/sh", "-c", "echo run >> ${NOMAD_ALLOC_DIR}/runs")
			srv.upsert(testAlloc("raw-crash", c1.NodeID(), testJob("batch", task)))
			select {
			case <-crashed:
			case <-time.After(testTimeout):
				t.Fatalf("task never reached kill point %s", p)
			}
			c1.Shutdown()

			c2 := startClient(t, srv, fakeProvider{rawexec.Name: newRawExec(t)}, dir, nil)
			r := c2.runner("raw-crash")
			if r == nil {
				t.Fatal("alloc not restored")
			}
			select {
			case <-r.done():
			case <-time.After(testTimeout):
				t.Fatal("restored alloc runner did not finish")
			}
			b, err := os.ReadFile(filepath.Join(c2.cfg.AllocDir, "raw-crash/alloc/runs"))
			if err != nil || strings.Count(string(b), "run") != 1 {
				t.Fatalf("runs file = %q, %v; want exactly one run", b, err)
			}
			waitFor(t, "alloc complete", func() bool {
				return srv.clientStatus("raw-crash") == structs.AllocClientStatusComplete
			})
			if codes := terminatedCodes(srv.alloc("raw-crash").TaskStates["main"]); !slices.Equal(codes, []int{0}) {
				t.Fatalf("Terminated exit codes = %v; want [0]", codes)
			}
			// The exit file is the driver task's; destroying it removes it.
			exitFile := filepath.Join(c2.cfg.AllocDir, "raw-crash/main/.drover-exit.json")
			waitFor(t, "driver task destroyed", func() bool {
				_, err := os.Stat(exitFile)
				return os.IsNotExist(err)
			})
		})
	}
}

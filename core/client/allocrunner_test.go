package client

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// arHarness runs one alloc runner over the fake driver and records every
// update it reports.
type arHarness struct {
	t      *testing.T
	world  *fakeWorld
	ar     *allocRunner
	cancel context.CancelFunc

	mu      sync.Mutex
	updates []*structs.Allocation
}

func newARHarness(t *testing.T, alloc *structs.Allocation) *arHarness {
	t.Helper()
	h := &arHarness{t: t, world: newFakeWorld()}
	node := &structs.Node{ID: "node-1", Name: "n1", Datacenter: "dc1", Attributes: map[string]string{"cpu.arch": "amd64"}}
	cfg := &runnerConfig{
		Logger:    hclog.NewNullLogger(),
		Drivers:   fakeProvider{"fake": newFakeDriver(h.world)},
		Node:      func() *structs.Node { return node },
		Region:    "global",
		Path:      "/usr/bin:/bin",
		AllocRoot: t.TempDir(),
		Update: func(a *structs.Allocation) {
			h.mu.Lock()
			h.updates = append(h.updates, a)
			h.mu.Unlock()
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.ar = newAllocRunner(ctx, cfg, alloc, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ar.run()
	}()
	t.Cleanup(func() {
		h.ar.destroy()
		select {
		case <-done:
		case <-time.After(testTimeout):
			t.Error("alloc runner did not finish")
		}
		cancel()
	})
	return h
}

func (h *arHarness) last() *structs.Allocation {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.updates) == 0 {
		return nil
	}
	return h.updates[len(h.updates)-1]
}

func (h *arHarness) waitStatus(status string) *structs.Allocation {
	h.t.Helper()
	waitFor(h.t, "client status "+status, func() bool {
		a := h.last()
		return a != nil && a.ClientStatus == status
	})
	return h.last()
}

func (h *arHarness) waitDone() {
	h.t.Helper()
	select {
	case <-h.ar.done():
	case <-time.After(testTimeout):
		h.t.Fatal("alloc runner did not finish")
	}
}

func (h *arHarness) waitTaskState(task, state string) {
	h.t.Helper()
	waitFor(h.t, task+" "+state, func() bool {
		st, _ := h.ar.task(task).snapshot()
		return st.State == state
	})
}

func eventTypes(ts *structs.TaskState) []string {
	var out []string
	for _, e := range ts.Events {
		out = append(out, e.Type)
	}
	return out
}

func TestAllocRunnerTaskExitsZeroCompletes(t *testing.T) {
	job := testJob("batch", fakeTaskSpec("main", `{"exit_code": 0}`))
	h := newARHarness(t, testAlloc("a1", "node-1", job))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusComplete)
	ts := a.TaskStates["main"]
	if ts.State != structs.TaskStateDead || ts.Failed || ts.StartedAt.IsZero() || ts.FinishedAt.IsZero() {
		t.Fatalf("task state = %+v; want dead, not failed, with start and finish times", ts)
	}
	want := []string{structs.TaskReceived, structs.TaskSetup, structs.TaskStarted, structs.TaskTerminated}
	if got := eventTypes(ts); !slices.Equal(got, want) {
		t.Fatalf("events = %v; want %v", got, want)
	}
	if a.ClientDescription != descComplete {
		t.Errorf("description = %q", a.ClientDescription)
	}
	// Reports carry only client-side fields.
	if a.Job != nil || a.DesiredStatus != "" {
		t.Errorf("update carries server fields: job=%v desired=%q", a.Job != nil, a.DesiredStatus)
	}
}

func TestAllocRunnerRestartsThenFails(t *testing.T) {
	task := fakeTaskSpec("main", `{"exit_code": 1}`)
	task.RestartPolicy = &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail}
	h := newARHarness(t, testAlloc("a1", "node-1", testJob("batch", task)))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusFailed)
	ts := a.TaskStates["main"]
	if !ts.Failed || ts.State != structs.TaskStateDead || ts.Restarts != 1 || ts.LastRestart.IsZero() {
		t.Fatalf("task state = %+v; want dead failed after 1 restart", ts)
	}
	if n := h.world.startCount("main"); n != 2 {
		t.Fatalf("task started %d times; want 2", n)
	}
	want := []string{
		structs.TaskReceived, structs.TaskSetup, structs.TaskStarted, structs.TaskTerminated,
		structs.TaskRestarting, structs.TaskStarted, structs.TaskTerminated, structs.TaskNotRestarting,
	}
	if got := eventTypes(ts); !slices.Equal(got, want) {
		t.Fatalf("events = %v; want %v", got, want)
	}
	if ev := ts.Events[3]; ev.ExitCode != 1 || ev.Details["exit_code"] != "1" {
		t.Errorf("Terminated event = %+v; want exit code 1", ev)
	}
	if ev := ts.Events[4]; ev.RestartReason != reasonWithinPolicy || ev.StartDelay < int64(time.Millisecond) {
		t.Errorf("Restarting event = %+v", ev)
	}
	if ev := ts.Events[7]; !ev.FailsTask || !strings.Contains(ev.RestartReason, "Exceeded allowed attempts 1") {
		t.Errorf("Not Restarting event = %+v", ev)
	}
}

func TestAllocRunnerRecoversAfterFailures(t *testing.T) {
	// A task that fails once, then succeeds, ends complete.
	task := fakeTaskSpec("main", `{"fail_first": 1, "exit_code": 0}`)
	task.RestartPolicy = &structs.RestartPolicy{Attempts: 2, Interval: time.Hour, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail}
	h := newARHarness(t, testAlloc("a1", "node-1", testJob("batch", task)))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusComplete)
	if ts := a.TaskStates["main"]; ts.Restarts != 1 || ts.Failed {
		t.Fatalf("task state = %+v; want one restart, not failed", ts)
	}
}

func TestAllocRunnerSiblingKilledOnFailure(t *testing.T) {
	job := testJob("service",
		fakeTaskSpec("bad", `{"exit_code": 2}`),
		fakeTaskSpec("good", `{}`),
	)
	h := newARHarness(t, testAlloc("a1", "node-1", job))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusFailed)
	bad, good := a.TaskStates["bad"], a.TaskStates["good"]
	if !bad.Failed || bad.State != structs.TaskStateDead {
		t.Fatalf("bad = %+v; want dead failed", bad)
	}
	if good.Failed || good.State != structs.TaskStateDead {
		t.Fatalf("good = %+v; want dead, not failed", good)
	}
	types := eventTypes(good)
	if !slices.Contains(types, structs.TaskSiblingFailed) {
		t.Fatalf("good events = %v; want %s", types, structs.TaskSiblingFailed)
	}
	// Good may have been killed before or after it started; if it ran,
	// it was stopped through the driver.
	if slices.Contains(types, structs.TaskStarted) {
		if !slices.Contains(types, structs.TaskKilling) || !slices.Contains(types, structs.TaskKilled) {
			t.Fatalf("good events = %v; want Killing and Killed", types)
		}
	}
	for _, e := range good.Events {
		if e.Type == structs.TaskSiblingFailed && e.Details["failed_sibling"] != "bad" {
			t.Errorf("sibling event names %q; want bad", e.Details["failed_sibling"])
		}
	}
}

func TestAllocRunnerStopKillsTasksAndCompletes(t *testing.T) {
	one := fakeTaskSpec("one", `{}`)
	one.KillTimeout = 7 * time.Second
	one.KillSignal = "SIGINT"
	job := testJob("service", one, fakeTaskSpec("two", `{}`))
	alloc := testAlloc("a1", "node-1", job)
	h := newARHarness(t, alloc)
	h.waitStatus(structs.AllocClientStatusRunning)
	h.waitTaskState("one", structs.TaskStateRunning)
	h.waitTaskState("two", structs.TaskStateRunning)

	stopped := alloc.Copy()
	stopped.DesiredStatus = structs.AllocDesiredStatusStop
	h.ar.update(stopped)
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusComplete)
	for _, name := range []string{"one", "two"} {
		ts := a.TaskStates[name]
		if ts.State != structs.TaskStateDead || ts.Failed {
			t.Fatalf("%s = %+v; want dead, not failed", name, ts)
		}
		types := eventTypes(ts)
		if !slices.Contains(types, structs.TaskKilling) || types[len(types)-1] != structs.TaskKilled {
			t.Fatalf("%s events = %v; want Killing ... Killed", name, types)
		}
	}
	calls := h.world.stopCalls()
	if !slices.ContainsFunc(calls, func(c stopCall) bool {
		return c.ID == "a1/one" && c.Timeout == 7*time.Second && c.Signal == "SIGINT"
	}) {
		t.Fatalf("stop calls = %+v; want a1/one with its kill timeout and signal", calls)
	}
}

func TestAllocRunnerLifecycleOrder(t *testing.T) {
	pre := fakeTaskSpec("init", `{}`)
	pre.Lifecycle = &structs.TaskLifecycleConfig{Hook: hookPrestart}
	side := fakeTaskSpec("sidecar", `{}`)
	side.Lifecycle = &structs.TaskLifecycleConfig{Hook: hookPrestart, Sidecar: true}
	post := fakeTaskSpec("cleanup", `{"exit_code": 0}`)
	post.Lifecycle = &structs.TaskLifecycleConfig{Hook: hookPoststop}
	job := testJob("batch", fakeTaskSpec("main", `{}`), pre, side, post)
	h := newARHarness(t, testAlloc("a1", "node-1", job))

	h.waitTaskState("init", structs.TaskStateRunning)
	h.waitTaskState("sidecar", structs.TaskStateRunning)
	// The prestart task still runs: main must wait for it.
	if n := h.world.startCount("main"); n != 0 {
		t.Fatalf("main started %d times while its prestart task ran", n)
	}
	h.world.finish("a1/init", 0)
	h.waitTaskState("main", structs.TaskStateRunning)
	if n := h.world.startCount("cleanup"); n != 0 {
		t.Fatal("poststop task started while main runs")
	}
	h.world.finish("a1/main", 0)
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusComplete)

	order := h.world.startOrder()
	idx := func(name string) int { return slices.Index(order, name) }
	if !(idx("init") < idx("main") && idx("sidecar") < idx("main") && idx("main") < idx("cleanup")) {
		t.Fatalf("start order = %v; want prestart tasks, then main, then poststop", order)
	}
	if types := eventTypes(a.TaskStates["sidecar"]); !slices.Contains(types, structs.TaskMainDead) {
		t.Fatalf("sidecar events = %v; want %s", types, structs.TaskMainDead)
	}
	if a.TaskStates["cleanup"].State != structs.TaskStateDead || a.TaskStates["cleanup"].Failed {
		t.Fatalf("cleanup = %+v; want it run to completion", a.TaskStates["cleanup"])
	}
}

func TestAllocRunnerFailedPrestartSkipsMain(t *testing.T) {
	pre := fakeTaskSpec("init", `{"exit_code": 3}`)
	pre.Lifecycle = &structs.TaskLifecycleConfig{Hook: hookPrestart}
	job := testJob("batch", fakeTaskSpec("main", `{}`), pre)
	h := newARHarness(t, testAlloc("a1", "node-1", job))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusFailed)
	if n := h.world.startCount("main"); n != 0 {
		t.Fatalf("main started %d times after its prestart task failed", n)
	}
	if ts := a.TaskStates["main"]; ts.State != structs.TaskStateDead || ts.Failed {
		t.Fatalf("main = %+v; want dead without having run", ts)
	}
}

func TestAllocRunnerLeaderDeathKillsOthers(t *testing.T) {
	leader := fakeTaskSpec("leader", `{"exit_code": 0}`)
	leader.Leader = true
	job := testJob("batch", leader, fakeTaskSpec("follower", `{}`))
	h := newARHarness(t, testAlloc("a1", "node-1", job))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusComplete)
	if types := eventTypes(a.TaskStates["follower"]); !slices.Contains(types, structs.TaskLeaderDead) {
		t.Fatalf("follower events = %v; want %s", types, structs.TaskLeaderDead)
	}
}

func TestAllocRunnerUnrecoverableStartError(t *testing.T) {
	task := fakeTaskSpec("main", `{"invalid": true, "start_error": "no such command"}`)
	task.RestartPolicy = &structs.RestartPolicy{Attempts: 5, Interval: time.Hour, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail}
	h := newARHarness(t, testAlloc("a1", "node-1", testJob("service", task)))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusFailed)
	ts := a.TaskStates["main"]
	if ts.Restarts != 0 {
		t.Fatalf("restarts = %d; an invalid config must not be retried", ts.Restarts)
	}
	types := eventTypes(ts)
	if !slices.Contains(types, structs.TaskDriverFailure) || types[len(types)-1] != structs.TaskNotRestarting {
		t.Fatalf("events = %v; want Driver Failure then Not Restarting", types)
	}
}

func TestAllocRunnerRecoverableStartErrorCountsAsFailure(t *testing.T) {
	task := fakeTaskSpec("main", `{"start_error": "plugin busy"}`)
	task.RestartPolicy = &structs.RestartPolicy{Attempts: 2, Interval: time.Hour, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail}
	h := newARHarness(t, testAlloc("a1", "node-1", testJob("service", task)))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusFailed)
	if ts := a.TaskStates["main"]; ts.Restarts != 2 || !ts.StartedAt.IsZero() {
		t.Fatalf("task = %+v; want 2 restarts and never started", ts)
	}
}

func TestAllocRunnerUnknownDriver(t *testing.T) {
	task := fakeTaskSpec("main", `{}`)
	task.Driver = "docker"
	h := newARHarness(t, testAlloc("a1", "node-1", testJob("batch", task)))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusFailed)
	if types := eventTypes(a.TaskStates["main"]); !slices.Contains(types, structs.TaskDriverFailure) {
		t.Fatalf("events = %v; want Driver Failure", types)
	}
}

func TestAllocRunnerMissingGroupFails(t *testing.T) {
	alloc := testAlloc("a1", "node-1", testJob("batch", fakeTaskSpec("main", `{}`)))
	alloc.TaskGroup = "nope"
	h := newARHarness(t, alloc)
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusFailed)
	if !strings.Contains(a.ClientDescription, `"nope"`) {
		t.Fatalf("description = %q; want it to name the group", a.ClientDescription)
	}
}

func TestAllocRunnerTaskConfig(t *testing.T) {
	task := fakeTaskSpec("main", `{"echo": "${NOMAD_ALLOC_ID}:${attr.cpu.arch}:${NOMAD_META_color}"}`)
	task.DispatchPayload = &structs.DispatchPayloadConfig{File: "in/payload.txt"}
	task.Env = map[string]string{"WHERE": "${NOMAD_TASK_DIR}"}
	task.Meta = map[string]string{"color": "blue"}
	job := testJob("batch", task)
	job.Payload = snappy.Encode(nil, []byte("dispatched!"))
	alloc := testAlloc("a1", "node-1", job)
	h := newARHarness(t, alloc)
	h.waitTaskState("main", structs.TaskStateRunning)

	cfg := h.world.config("a1/main")
	root := filepath.Join(h.ar.cfg.AllocRoot, "a1")
	if string(cfg.GetConfigJson()) != `{"echo":"a1:amd64:blue"}` {
		t.Errorf("config = %s; want interpolated", cfg.GetConfigJson())
	}
	env := cfg.GetEnv()
	for k, v := range map[string]string{
		"WHERE": filepath.Join(root, "main/local"), "NOMAD_TASK_DIR": filepath.Join(root, "main/local"),
		"NOMAD_ALLOC_DIR": filepath.Join(root, "alloc"), "NOMAD_NODE_ID": "node-1", "PATH": "/usr/bin:/bin",
	} {
		if env[k] != v {
			t.Errorf("env %s = %q; want %q", k, env[k], v)
		}
	}
	if cfg.GetTaskDir() != filepath.Join(root, "main") ||
		cfg.GetStdoutPath() != filepath.Join(root, "alloc/logs/main.stdout") ||
		cfg.GetStderrPath() != filepath.Join(root, "alloc/logs/main.stderr") {
		t.Errorf("dirs: task=%s stdout=%s stderr=%s", cfg.GetTaskDir(), cfg.GetStdoutPath(), cfg.GetStderrPath())
	}
	if r := cfg.GetLogRotation(); r.GetMaxFiles() != 10 || r.GetMaxFileSizeBytes() != 10<<20 {
		t.Errorf("log rotation = %v; want Nomad's default 10 files of 10 MB", r)
	}
	if cfg.GetResources().GetCpu() != 100 || cfg.GetResources().GetMemoryMb() != 300 {
		t.Errorf("resources = %v", cfg.GetResources())
	}
	b, err := os.ReadFile(filepath.Join(root, "main/local/in/payload.txt"))
	if err != nil || string(b) != "dispatched!" {
		t.Fatalf("payload = %q, %v", b, err)
	}
	h.world.finish("a1/main", 0)
	h.waitStatus(structs.AllocClientStatusComplete)
}

func TestAllocRunnerPayloadEscapeFailsSetup(t *testing.T) {
	task := fakeTaskSpec("main", `{}`)
	task.DispatchPayload = &structs.DispatchPayloadConfig{File: "../../x"}
	job := testJob("batch", task)
	job.Payload = snappy.Encode(nil, []byte("x"))
	h := newARHarness(t, testAlloc("a1", "node-1", job))
	h.waitDone()
	a := h.waitStatus(structs.AllocClientStatusFailed)
	if types := eventTypes(a.TaskStates["main"]); !slices.Contains(types, structs.TaskSetupFailure) {
		t.Fatalf("events = %v; want Setup Failure", types)
	}
	if h.world.startCount("main") != 0 {
		t.Fatal("task started despite its setup failure")
	}
}

func TestAllocRunnerStopBeforeRestoreStopsRecoveredTask(t *testing.T) {
	world := newFakeWorld()
	drv := newFakeDriver(world)
	job := testJob("service", fakeTaskSpec("main", `{}`))
	alloc := testAlloc("a1", "node-1", job)
	// An earlier client process started the task.
	h, err := drv.StartTask(context.Background(), &driverpb.TaskConfig{Id: "a1/main", TaskName: "main", ConfigJson: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	prior := &persistedAlloc{Alloc: alloc, Tasks: map[string]*persistedTask{
		"main": newPersistedTask(&structs.TaskState{State: structs.TaskStateRunning, StartedAt: time.Now()}, h),
	}}

	var mu sync.Mutex
	var last *structs.Allocation
	cfg := &runnerConfig{
		Logger: hclog.NewNullLogger(), Drivers: fakeProvider{"fake": newFakeDriver(world)},
		Node: func() *structs.Node { return &structs.Node{ID: "node-1"} }, AllocRoot: t.TempDir(),
		Update: func(a *structs.Allocation) { mu.Lock(); last = a; mu.Unlock() },
	}
	ar := newAllocRunner(context.Background(), cfg, alloc, prior)
	// The kill arrives before the runner even runs.
	ar.task("main").kill(nil)
	ar.stop()
	go ar.run()
	select {
	case <-ar.done():
	case <-time.After(testTimeout):
		t.Fatal("alloc runner did not finish")
	}
	if world.running("a1/main") {
		t.Fatal("the recovered task was left running")
	}
	mu.Lock()
	defer mu.Unlock()
	if last.ClientStatus != structs.AllocClientStatusComplete {
		t.Fatalf("status = %q; want complete", last.ClientStatus)
	}
	if types := eventTypes(last.TaskStates["main"]); types[len(types)-1] != structs.TaskKilled {
		t.Fatalf("events = %v; want the task killed through its driver", types)
	}
}

// TestAllocRunnerExitZeroFollowsTypeDeclaration: whether a task that exits
// 0 is done or restarted is what the job's type declares, whatever its name.
func TestAllocRunnerExitZeroFollowsTypeDeclaration(t *testing.T) {
	cases := []struct {
		name     string
		behavior *structs.JobTypeBehavior
		status   string
		starts   int
		restarts uint64
	}{
		{"runs to completion: complete at once", &structs.JobTypeBehavior{RunsToCompletion: true}, structs.AllocClientStatusComplete, 1, 0},
		{"keeps running: restarted until the policy fails it", &structs.JobTypeBehavior{}, structs.AllocClientStatusFailed, 3, 2},
		{"no declaration: restarted until the policy fails it", nil, structs.AllocClientStatusFailed, 3, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			task := fakeTaskSpec("main", `{"exit_code": 0}`)
			task.RestartPolicy = &structs.RestartPolicy{Attempts: 2, Interval: time.Hour, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail}
			h := newARHarness(t, testAlloc("a1", "node-1", testJobWith("gpu-batch", tc.behavior, task)))
			h.waitDone()
			a := h.waitStatus(tc.status)
			if n := h.world.startCount("main"); n != tc.starts {
				t.Errorf("task started %d times; want %d", n, tc.starts)
			}
			if ts := a.TaskStates["main"]; ts.Restarts != tc.restarts {
				t.Errorf("restarts = %d; want %d", ts.Restarts, tc.restarts)
			}
		})
	}
}

// A prestart task of a job that keeps running (a service) is an init step:
// its exit 0 ends it, and the main task starts.
func TestAllocRunnerServicePrestartRunsToCompletion(t *testing.T) {
	pre := fakeTaskSpec("init", `{"exit_code": 0}`)
	pre.Lifecycle = &structs.TaskLifecycleConfig{Hook: hookPrestart}
	job := testJob("service", fakeTaskSpec("main", `{}`), pre)
	h := newARHarness(t, testAlloc("a1", "node-1", job))
	h.waitTaskState("main", structs.TaskStateRunning)
	a := h.waitStatus(structs.AllocClientStatusRunning)
	if ts := a.TaskStates["init"]; ts.State != structs.TaskStateDead || ts.Failed {
		t.Fatalf("init = %+v; want dead, not failed", ts)
	}
	h.world.finish("a1/main", 0)
	h.waitDone()
}

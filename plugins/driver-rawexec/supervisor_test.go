package rawexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// taskState decodes a handle's state.
func taskState(t *testing.T, h *driverpb.TaskHandle) handleState {
	t.Helper()
	st, err := decodeState(h.GetState())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// procPPID returns pid's parent pid, 0 if pid is gone.
func procPPID(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	var ppid int
	var state byte
	// Field 2 may hold spaces; the fields after its closing ')' do not.
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == ')' {
			_, _ = fmt.Sscanf(string(data[i+1:]), " %c %d", &state, &ppid)
			break
		}
	}
	return ppid
}

// Tasks started at once share one supervisor, which is the parent of each,
// and each is born in its own cgroup although the supervisor joins every
// one of them to fork the task. Once the last task has exited the
// supervisor goes, and the next task gets a new one.
func TestOneSupervisorForConcurrentTasks(t *testing.T) {
	d := newTestDriver()
	const n = 4
	handles := make([]*driverpb.TaskHandle, n)
	gates := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		cfg, gate := gatedTask(t, fmt.Sprintf("alloc-%d/concurrent", i))
		gates[i] = gate
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := d.StartTask(testCtx(t), cfg)
			if err != nil {
				t.Errorf("StartTask %d: %v", i, err)
				return
			}
			handles[i] = h
		}()
		t.Cleanup(func() { _ = d.DestroyTask(context.Background(), cfg.GetId(), true) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	sup := taskState(t, handles[0])
	for i, h := range handles {
		st := taskState(t, h)
		if st.ShimPID != sup.ShimPID || st.ShimStartTicks != sup.ShimStartTicks {
			t.Errorf("task %d has supervisor %d, task 0 has %d", i, st.ShimPID, sup.ShimPID)
		}
		if ppid := procPPID(st.TaskPID); ppid != st.ShimPID {
			t.Errorf("task %d (pid %d) has parent %d, want its supervisor %d", i, st.TaskPID, ppid, st.ShimPID)
		}
		if st.Cgroup == nil {
			continue // no cgroup hierarchy here
		}
		pids, err := st.Cgroup.pids()
		if err != nil || len(pids) != 1 || pids[0] != st.TaskPID {
			t.Errorf("task %d's cgroup %s holds %v (%v), want only the task's pid %d", i, st.Cgroup.procsDir(), pids, err, st.TaskPID)
		}
	}
	if sup.Cgroup != nil {
		own := readFile(t, fmt.Sprintf("/proc/%d/cgroup", sup.ShimPID))
		for _, h := range handles {
			if name := filepath.Base(taskState(t, h).Cgroup.procsDir()); strings.Contains(own, name) {
				t.Errorf("the supervisor stayed in task cgroup %s:\n%s", name, own)
			}
		}
	}
	for i := range n {
		openGate(t, gates[i])
	}
	for i, h := range handles {
		if res := awaitExit(t, d, h.GetId()); res.GetExitCode() != 42 || res.GetErr() != "" {
			t.Errorf("task %d exit = %v", i, res)
		}
	}
	eventually(t, "the idle supervisor to exit", func() bool { return !procAlive(sup.ShimPID, sup.ShimStartTicks) })

	cfg := newTaskConfig(t, "alloc-next/task", "true")
	h := start(t, d, cfg)
	if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit after the supervisor went = %v", res)
	}
	if st := taskState(t, h); st.ShimPID == sup.ShimPID && st.ShimStartTicks == sup.ShimStartTicks {
		t.Fatalf("a task went to the supervisor that was let go (pid %d)", st.ShimPID)
	}
}

// A supervisor kept for its idle delay serves the next task too: a task's
// start does not pay for a new process.
func TestIdleSupervisorIsReused(t *testing.T) {
	d := newTestDriver()
	d.supIdle = time.Hour
	t.Cleanup(d.letSupervisorGo)
	var pids []int
	for i := range 3 {
		cfg := newTaskConfig(t, fmt.Sprintf("alloc-%d/seq", i), "true")
		h := start(t, d, cfg)
		if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 0 {
			t.Fatalf("exit = %v", res)
		}
		pids = append(pids, taskState(t, h).ShimPID)
	}
	if pids[0] != pids[1] || pids[1] != pids[2] {
		t.Fatalf("sequential tasks ran under supervisors %v, want one", pids)
	}
}

// An exit file left in the task directory by an earlier run (an older
// record without a pid, which matches any run) is removed before the task
// is reported started: the new run is running, for the driver that
// started it and for one that recovers it, until its own exit.
func TestStaleExitFileRemovedBeforeStart(t *testing.T) {
	d := newTestDriver()
	cfg, gate := gatedTask(t, "alloc-1/stale-exit")
	exitFile := filepath.Join(cfg.GetTaskDir(), exitFileName)
	stale, _ := json.Marshal(exitRecord{ExitCode: 9})
	if err := os.WriteFile(exitFile, stale, 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, d, cfg)
	if _, err := os.Stat(exitFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the earlier run's exit file after the start: %v; want it gone", err)
	}
	second := newTestDriver()
	if err := second.RecoverTask(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.DestroyTask(context.Background(), cfg.GetId(), true) })
	for _, dr := range []*Driver{d, second} {
		if st, err := dr.InspectTask(context.Background(), cfg.GetId()); err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
			t.Fatalf("the task is %v, %v; want running", st, err)
		}
	}
	openGate(t, gate)
	for _, dr := range []*Driver{d, second} {
		if res := awaitExit(t, dr, cfg.GetId()); res.GetExitCode() != 42 {
			t.Fatalf("exit = %v, want this run's 42", res)
		}
	}
}

// The exit file cannot be written (here a directory is in its way): the
// driver that started the task still reports the task's real exit, which
// the supervisor sends it along with the failure.
func TestExitReportedWhenExitFileUnwritable(t *testing.T) {
	d := newTestDriver()
	cfg, gate := gatedTask(t, "alloc-1/no-exit-file")
	start(t, d, cfg)
	blocker := filepath.Join(cfg.GetTaskDir(), exitFileName)
	if err := os.MkdirAll(filepath.Join(blocker, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	openGate(t, gate)
	if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 42 {
		t.Fatalf("exit = %v, want the task's 42", res)
	}
	if fi, err := os.Stat(blocker); err != nil || !fi.IsDir() {
		t.Fatalf("what is in the exit file's place: %v, %v", fi, err)
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
}

// cgroup2Mount returns where a cgroup v2 hierarchy is mounted (the unified
// one, or the v2 mount of a hybrid layout), "" if none is.
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(raw), "\n") {
		// "… <mount point> <options> - <fstype> <source> …"
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return f[4]
		}
	}
	return ""
}

// In a v2 cgroup the kernel forks the task into it (CLONE_INTO_CGROUP):
// the supervisor never joins a task's cgroup, so it takes no lock for it
// either (the lock is held here throughout).
func TestTaskForkedIntoV2Cgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	mount := cgroup2Mount(t)
	if mount == "" {
		t.Skip("no cgroup v2 hierarchy mounted")
	}
	dir, err := os.MkdirTemp(mount, "drover-test-")
	if err != nil {
		t.Skipf("cgroup v2 hierarchy at %s is not writable: %v", mount, err)
	}
	t.Cleanup(func() { _ = syscall.Rmdir(dir) })
	cg := &taskCgroup{V2: true, Dirs: map[string]string{unifiedKey: dir}}
	got := cgroupOfTaskStarted(t, cg, "the supervisor joined the v2 cgroup instead of forking the task into it")
	want := "0::/" + strings.TrimPrefix(dir, mount+"/") + "\n"
	if !strings.Contains(got, want) {
		t.Fatalf("the task's /proc/self/cgroup:\n%s\nwant the line %q", got, want)
	}
}

// In cgroup v1 one thread of the supervisor joins the task's cgroup for the
// fork: the task is born there, the start takes no lock (it is held here
// throughout), and no thread of the process is left in the cgroup.
func TestTaskForkedFromThreadIntoV1Cgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	const hier = "/sys/fs/cgroup/freezer"
	var st syscall.Statfs_t
	if err := syscall.Statfs(hier, &st); err != nil || st.Type != 0x27e0eb { // CGROUP_SUPER_MAGIC
		t.Skip("no cgroup v1 freezer hierarchy mounted")
	}
	dir, err := os.MkdirTemp(hier, "drover-test-")
	if err != nil {
		t.Skipf("cgroup v1 hierarchy at %s is not writable: %v", hier, err)
	}
	t.Cleanup(func() { _ = syscall.Rmdir(dir) })
	cg := &taskCgroup{Dirs: map[string]string{"freezer": dir}}
	got := cgroupOfTaskStarted(t, cg, "the whole supervisor joined the v1 cgroup")
	want := ":freezer:/" + strings.TrimPrefix(dir, hier+"/") + "\n"
	if !strings.Contains(got, want) {
		t.Fatalf("the task's /proc/self/cgroup:\n%s\nwant a line ending %q", got, want)
	}
	// The task has exited: whatever the cgroup still holds is a thread of
	// this process that did not go home.
	if left := strings.TrimSpace(readFile(t, filepath.Join(dir, "tasks"))); left != "" {
		t.Fatalf("threads left in the task's cgroup: %s", left)
	}
}

// A StartTask whose caller gave up (its context ended) before the
// supervisor reported the start leaves nothing running: the task that
// starts anyway is killed, and the supervisor records that and removes its
// cgroup.
func TestAbandonedStartIsUndone(t *testing.T) {
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/abandoned", "/bin/sh", "-c", "echo started; exec sleep 300")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h, err := d.StartTask(ctx, cfg)
	if err == nil {
		// The report raced the cancellation and won: a tracked task.
		t.Cleanup(func() { _ = d.DestroyTask(context.Background(), cfg.GetId(), true) })
		t.Skipf("the start was reported before the cancellation was seen (handle %v)", h.GetId())
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("StartTask = %v, want the cancellation", err)
	}
	if _, err := d.InspectTask(context.Background(), cfg.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("abandoned task is tracked: %v", err)
	}
	exitFile := filepath.Join(cfg.GetTaskDir(), exitFileName)
	eventually(t, "the abandoned task's exit to be recorded", func() bool {
		_, err := os.Stat(exitFile)
		return err == nil
	})
	rec, err := readExitFile(exitFile)
	if err != nil || rec == nil || rec.Signal != int32(syscall.SIGKILL) {
		t.Fatalf("abandoned task's exit = %+v, %v; want killed", rec, err)
	}
	if out := readFile(t, cfg.GetStdoutPath()); out != "" && out != "started\n" {
		t.Fatalf("stdout = %q", out)
	}
	name := cgroupName(cfg.GetId())
	for _, pattern := range []string{
		filepath.Join(cgroupRoot, "*", cgroupParent, name+".*"),
		filepath.Join(cgroupRoot, cgroupV2Parent, name+".*"),
	} {
		if left, _ := filepath.Glob(pattern); len(left) > 0 {
			t.Fatalf("the abandoned task's cgroup is left: %v", left)
		}
	}

	// A new run of the task in the same directory does not take the
	// abandoned run's record for its own.
	if _, err := os.Stat(exitFile); err != nil {
		t.Fatal(err)
	}
	gate := mkfifo(t, cfg.GetTaskDir(), "gate")
	setConfig(cfg, `{"command":"/bin/sh","args":["-c","read x < gate; exit 3"]}`)
	h = start(t, d, cfg)
	stale, _ := json.Marshal(exitRecord{ExitCode: 137, Signal: 9, PID: int(h.GetPid()) + 1})
	if err := os.WriteFile(exitFile, stale, 0o644); err != nil {
		t.Fatal(err)
	}
	second := newTestDriver()
	if err := second.RecoverTask(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.DestroyTask(context.Background(), cfg.GetId(), true) })
	for _, dr := range []*Driver{d, second} {
		if st, err := dr.InspectTask(context.Background(), cfg.GetId()); err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
			t.Fatalf("with another run's exit file, the task is %v, %v; want running", st, err)
		}
	}
	openGate(t, gate)
	for _, dr := range []*Driver{d, second} {
		if res := awaitExit(t, dr, cfg.GetId()); res.GetExitCode() != 3 {
			t.Fatalf("exit = %v, want this run's 3", res)
		}
	}
}

// A recovering driver tells by the task directory's lock whether the
// supervisor still works on a task, not by the supervisor being alive: it
// lives on for the node's other tasks. A task that exited and whose
// result is gone is not found at once, while its supervisor runs another.
func TestRecoverUsesTaskLockNotSupervisorLife(t *testing.T) {
	d := newTestDriver()
	long, gate := gatedTask(t, "alloc-1/long")
	hl := start(t, d, long)
	short := newTaskConfig(t, "alloc-2/short", "true")
	hs := start(t, d, short)
	if res := awaitExit(t, d, short.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v", res)
	}
	if !taskDirLocked(long.GetTaskDir()) {
		t.Error("the running task's directory is not locked")
	}
	if taskDirLocked(short.GetTaskDir()) {
		t.Error("the exited task's directory is still locked")
	}
	if err := os.Remove(filepath.Join(short.GetTaskDir(), exitFileName)); err != nil {
		t.Fatal(err)
	}
	sup := taskState(t, hs)
	if sup.ShimPID != taskState(t, hl).ShimPID || !procAlive(sup.ShimPID, sup.ShimStartTicks) {
		t.Fatal("the two tasks do not share a live supervisor")
	}
	second := newTestDriver()
	if err := second.RecoverTask(testCtx(t), hs); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("RecoverTask of an exited task without a result = %v, want not found", err)
	}
	openGate(t, gate)
	awaitExit(t, d, long.GetId())
	if taskDirLocked(long.GetTaskDir()) {
		t.Error("the task's directory is still locked after its exit was reported")
	}
}

// cgroupOfTaskStarted starts `cat /proc/self/cgroup` in cg with the join
// lock held throughout, so a start that needs the lock fails the test
// (naming why: whyLocked), and returns what the task printed.
func cgroupOfTaskStarted(t *testing.T, cg *taskCgroup, whyLocked string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "cgroup")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := &exec.Cmd{
		Path: "/bin/cat", Args: []string{"cat", "/proc/self/cgroup"}, Env: []string{},
		Stdout: f, SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	var forkMu sync.Mutex
	forkMu.Lock()
	defer forkMu.Unlock()
	type result struct {
		cmd *exec.Cmd
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := startInCgroup(cmd, cg, &forkMu)
		done <- result{c, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(testTimeout):
		t.Fatal("the start waited for the join lock: " + whyLocked)
	}
	if r.err != nil {
		t.Fatalf("start: %v", r.err)
	}
	if err := r.cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, out)
}

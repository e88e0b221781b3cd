package client

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/core/internal/proctest"
	"github.com/drover-org/drover/core/structs"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

// These tests run real processes through the real raw_exec driver, in
// process; TestMain turns the test binary into the driver's task shim.

func rawTask(name, command string, args ...string) *structs.Task {
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	return &structs.Task{Name: name, Driver: rawexec.Name, KillTimeout: 5 * time.Second,
		Config: map[string]any{"command": command, "args": a}}
}

// newRawExec returns an in-process raw_exec driver whose task supervisor
// is let go and reaped when the test ends: after the tasks under the
// directories given to proctest.KillUnder before it are killed, and the
// clients started after it are shut down.
func newRawExec(t *testing.T) *rawexec.Driver {
	d := rawexec.New(nil)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return d
}

func newRawExecClient(t *testing.T, srv *fakeServer, stateDir string) *Client {
	t.Helper()
	return newRawExecClientOn(t, srv, stateDir, newRawExec(t))
}

// newRawExecClientOn is newRawExecClient over the raw_exec driver d.
func newRawExecClientOn(t *testing.T, srv *fakeServer, stateDir string, d *rawexec.Driver) *Client {
	t.Helper()
	// Tasks outlive their client by design; not the test.
	proctest.KillUnder(t, stateDir)
	c, err := New(Config{
		StateDir:            stateDir,
		Server:              srv,
		Drivers:             fakeProvider{rawexec.Name: d},
		UpdateBatchInterval: 5 * time.Millisecond,
		RetryInterval:       5 * time.Millisecond,
		LogPollInterval:     5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRawExecBatchEchoAndLogs(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	select {
	case <-c.Registered():
	case <-time.After(testTimeout):
		t.Fatal("client did not register")
	}
	if d := srv.node(c.NodeID()).Drivers[rawexec.Name]; d == nil || !d.Healthy {
		t.Fatalf("raw_exec fingerprint = %+v; want healthy", d)
	}
	if srv.node(c.NodeID()).Attributes[rawexec.AttrDriver] != "1" {
		t.Fatal("driver.raw_exec attribute missing")
	}

	task := rawTask("echo", "/bin/sh", "-c", "echo hi; echo err >&2; echo $NOMAD_TASK_NAME > $NOMAD_TASK_DIR/out")
	srv.upsert(testAlloc("raw-1", c.NodeID(), testJob("batch", task)))
	waitFor(t, "alloc complete", func() bool { return srv.clientStatus("raw-1") == structs.AllocClientStatusComplete })

	ts := srv.alloc("raw-1").TaskStates["echo"]
	if ts.State != structs.TaskStateDead || ts.Failed {
		t.Fatalf("task = %+v", ts)
	}
	root := filepath.Join(c.cfg.AllocDir, "raw-1")
	b, err := os.ReadFile(filepath.Join(root, "alloc/logs/echo.stdout.0"))
	if err != nil || !strings.Contains(string(b), "hi") {
		t.Fatalf("stdout log = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "echo/local/out")); string(b) != "echo\n" {
		t.Fatalf("task env: NOMAD_TASK_DIR/out = %q", b)
	}
	for _, tc := range []struct{ typ, want string }{{"stdout", "hi\n"}, {"stderr", "err\n"}} {
		var out bytes.Buffer
		if err := c.AllocLogs(context.Background(), "raw-1", "echo", tc.typ, "start", 0, false, &out); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Fatalf("AllocLogs %s = %q; want %q", tc.typ, out.String(), tc.want)
		}
	}
	// Following a dead task's log returns once it is drained.
	var out bytes.Buffer
	if err := c.AllocLogs(context.Background(), "raw-1", "echo", "stdout", "end", 3, true, &out); err != nil || out.String() != "hi\n" {
		t.Fatalf("follow = %q, %v", out.String(), err)
	}
}

func TestRawExecFailingCommandRestartsThenFails(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	task := rawTask("fail", "/bin/sh", "-c", "echo attempt >> ${NOMAD_ALLOC_DIR}/attempts; exit 3")
	task.RestartPolicy = &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail}
	srv.upsert(testAlloc("raw-2", c.NodeID(), testJob("batch", task)))
	waitFor(t, "alloc failed", func() bool { return srv.clientStatus("raw-2") == structs.AllocClientStatusFailed })
	ts := srv.alloc("raw-2").TaskStates["fail"]
	if ts.Restarts != 1 {
		t.Fatalf("restarts = %d; want 1", ts.Restarts)
	}
	b, _ := os.ReadFile(filepath.Join(c.cfg.AllocDir, "raw-2/alloc/attempts"))
	if strings.Count(string(b), "attempt") != 2 {
		t.Fatalf("attempts file = %q; want 2 runs", b)
	}
	var codes []int
	for _, e := range ts.Events {
		if e.Type == structs.TaskTerminated {
			codes = append(codes, e.ExitCode)
		}
	}
	if len(codes) != 2 || codes[0] != 3 || codes[1] != 3 {
		t.Fatalf("exit codes = %v; want [3 3]", codes)
	}
}

// TestRawExecStopSurvivesClientRestart starts a long-running process,
// restarts the client (and the driver) under it, then stops the alloc
// from the server: the new client must reattach and kill it.
func TestRawExecStopSurvivesClientRestart(t *testing.T) {
	srv := newFakeServer()
	dir := t.TempDir()
	// The first driver's supervisor exits once its task is gone, not 5 s
	// (the default idle time) later.
	d1 := newRawExec(t)
	d1.SetSupervisorIdle(0)
	c1 := newRawExecClientOn(t, srv, dir, d1)
	srv.upsert(testAlloc("raw-3", c1.NodeID(), testJob("service", rawTask("sleep", "/bin/sleep", "600"))))
	waitFor(t, "running", func() bool { return srv.clientStatus("raw-3") == structs.AllocClientStatusRunning })
	_, handle := c1.runner("raw-3").task("sleep").snapshot()
	pid := int(handle.GetPid())
	shim := parentPID(t, pid)
	c1.Shutdown()
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("task process %d died with its client: %v", pid, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	c2 := newRawExecClient(t, srv, dir)
	defer c2.Shutdown()
	waitFor(t, "task recovered", func() bool {
		st, h := c2.runner("raw-3").task("sleep").snapshot()
		return st.State == structs.TaskStateRunning && h != nil
	})
	srv.setDesired("raw-3", structs.AllocDesiredStatusStop)
	waitFor(t, "stopped alloc complete", func() bool { return srv.clientStatus("raw-3") == structs.AllocClientStatusComplete })
	ts := srv.alloc("raw-3").TaskStates["sleep"]
	if ts.State != structs.TaskStateDead || ts.Failed || ts.Events[len(ts.Events)-1].Type != structs.TaskKilled {
		t.Fatalf("task = %+v, events %v; want dead, killed", ts, eventTypes(ts))
	}
	waitFor(t, "process gone", func() bool { return syscall.Kill(pid, 0) != nil })
	// The first driver instance still waits on the shim it started; the
	// shim exits (and is reaped) once it has recorded the task's exit.
	waitFor(t, "shim gone", func() bool { return syscall.Kill(shim, 0) != nil })
}

// parentPID reads a process's parent from /proc.
func parentPID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command: state, ppid, ...
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// TestRawExecLogRotation runs a task whose stdout is larger than its logs
// block allows (max_files × max_file_size): the log ends as exactly
// max_files files, none over max_file_size, holding the newest output in
// order, and AllocLogs reads them as one stream.
func TestRawExecLogRotation(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	const lines = 400000 // about 2.7 MB of output, for 2 files of 1 MB
	task := rawTask("seq", "/bin/sh", "-c", "seq 1 "+strconv.Itoa(lines))
	task.LogConfig = &structs.LogConfig{MaxFiles: 2, MaxFileSizeMB: 1}
	srv.upsert(testAlloc("raw-logs", c.NodeID(), testJob("batch", task)))
	waitFor(t, "alloc complete", func() bool { return srv.clientStatus("raw-logs") == structs.AllocClientStatusComplete })

	var want bytes.Buffer
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	logDir := filepath.Join(c.cfg.AllocDir, "raw-logs/alloc/logs")
	matches, err := filepath.Glob(filepath.Join(logDir, "seq.stdout.*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(matches) != 2 {
		t.Fatalf("log files %v; want exactly 2 (max_files)", matches)
	}
	ls := &logStream{root: openRoot(t, logDir), dir: ".", prefix: "seq.stdout."}
	files, err := ls.files()
	if err != nil {
		t.Fatal(err)
	}
	var kept []byte
	for i, f := range files {
		if f.size > 1<<20 {
			t.Fatalf("%s%d has %d bytes; max_file_size is 1 MB", ls.prefix, f.index, f.size)
		}
		if i > 0 && f.index != files[i-1].index+1 {
			t.Fatalf("log files %v are not consecutive", files)
		}
		b, err := os.ReadFile(filepath.Join(logDir, ls.rel(f.index)))
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, b...)
	}
	if !bytes.HasSuffix(want.Bytes(), kept) || len(kept) <= 1<<20 {
		t.Fatalf("kept %d bytes, not the newest output in order", len(kept))
	}

	var out bytes.Buffer
	if err := c.AllocLogs(context.Background(), "raw-logs", "seq", "stdout", "start", 0, false, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), kept) {
		t.Fatalf("AllocLogs from the start: %d bytes; want the %d kept", out.Len(), len(kept))
	}
	// An offset from the end reaches back across the files.
	out.Reset()
	back := int64(files[len(files)-1].size + 10)
	if err := c.AllocLogs(context.Background(), "raw-logs", "seq", "stdout", "end", back, true, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), kept[int64(len(kept))-back:]) {
		t.Fatalf("AllocLogs from the end: %q…; want the last %d bytes", out.Bytes()[:min(20, out.Len())], back)
	}
}

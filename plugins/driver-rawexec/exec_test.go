package rawexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testwait"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// execRun is one exec through the plugin's gRPC glue: stdin is written
// then closed, unless keepOpen.
type execRun struct {
	start          *driverpb.ExecTaskStart
	stdin          string
	resize         []*driverpb.TerminalSize
	stdout, stderr syncBuffer
}

func (e *execRun) do(ctx context.Context, d driver.Client) (*driverpb.ExitResult, error) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() {
		if e.stdin != "" {
			_, _ = pw.Write([]byte(e.stdin))
		}
		_ = pw.Close()
	}()
	var resize chan *driverpb.TerminalSize
	if len(e.resize) > 0 {
		resize = make(chan *driverpb.TerminalSize, len(e.resize))
		for _, r := range e.resize {
			resize <- r
		}
	}
	return d.ExecTask(ctx, e.start, driver.ExecIO{Stdin: pr, Stdout: &e.stdout, Stderr: &e.stderr, Resize: resize})
}

// TestExecTask runs commands inside a running task over gRPC: stdin,
// stdout, stderr, exit code, the task's env and directory, a tty with its
// size and resizes, and the refusals.
func TestExecTask(t *testing.T) {
	ctx := testCtx(t)
	raw := newTestDriver()
	d := drivertest.Connect(t, raw)
	cfg := newTaskConfig(t, "alloc-1/web", "sleep", "600")
	cfg.Env["GREETING"] = "hello from the task"
	start(t, d, cfg)
	exited := newTaskConfig(t, "alloc-1/done", "/bin/true")
	start(t, d, exited)
	awaitExit(t, d, exited.GetId())

	info, err := d.Info(ctx)
	if err != nil || info.GetFsIsolation() != driver.FSIsolationNone {
		t.Fatalf("Info = %v, %v; want fs_isolation none", info, err)
	}

	for _, tc := range []struct {
		name             string
		id               string
		cmd              []string
		tty              bool
		size             *driverpb.TerminalSize
		resize           []*driverpb.TerminalSize
		stdin            string
		wantCode         int32
		wantOut, wantErr string
		wantErrKind      error
		outContains      []string
	}{
		{name: "stdin echo", cmd: []string{"cat"}, stdin: "ping\npong\n", wantOut: "ping\npong\n"},
		{name: "exit code and stderr", cmd: []string{"/bin/sh", "-c", "echo oops >&2; exit 7"}, wantCode: 7, wantErr: "oops\n"},
		{name: "task env and dir", cmd: []string{"/bin/sh", "-c", `echo "$GREETING"; pwd`}, wantOut: "hello from the task\n" + cfg.GetTaskDir() + "\n"},
		{name: "killed by signal", cmd: []string{"/bin/sh", "-c", "kill -9 $$"}, wantCode: 137},
		{name: "tty with size", cmd: []string{"/bin/sh", "-c", "test -t 0 && test -t 1 && echo is-a-tty; stty size"}, tty: true,
			size: &driverpb.TerminalSize{Height: 33, Width: 101}, outContains: []string{"is-a-tty", "33 101"}},
		{name: "tty resize", cmd: []string{"/bin/sh", "-c", `i=0; while [ "$(stty size)" != "40 120" ]; do i=$((i+1)); [ $i -gt 600 ] && exit 9; sleep 0.05; done; echo resized`},
			tty: true, size: &driverpb.TerminalSize{Height: 10, Width: 10}, resize: []*driverpb.TerminalSize{{Height: 40, Width: 120}}, outContains: []string{"resized"}},
		{name: "tty stdin", cmd: []string{"/bin/sh", "-c", "read line; echo got:$line"}, tty: true, stdin: "abc\n", outContains: []string{"got:abc"}},
		{name: "unknown command", cmd: []string{"no-such-command-xyz"}, wantErrKind: driver.ErrInvalidConfig},
		{name: "empty command", cmd: []string{}, wantErrKind: driver.ErrInvalidConfig},
		{name: "too many words", cmd: append([]string{"echo"}, make([]string, driver.MaxExecArgs)...), wantErrKind: driver.ErrInvalidConfig},
		{name: "unknown task", id: "alloc-1/nope", cmd: []string{"true"}, wantErrKind: driver.ErrTaskNotFound},
		{name: "exited task", id: exited.GetId(), cmd: []string{"true"}, wantErrKind: driver.ErrTaskNotRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id
			if id == "" {
				id = cfg.GetId()
			}
			run := &execRun{start: &driverpb.ExecTaskStart{Id: id, Command: tc.cmd, Tty: tc.tty, TtySize: tc.size, Task: cfg},
				stdin: tc.stdin, resize: tc.resize}
			res, err := run.do(ctx, d)
			if tc.wantErrKind != nil {
				if !errors.Is(err, tc.wantErrKind) {
					t.Fatalf("ExecTask = %v, %v; want %v", res, err, tc.wantErrKind)
				}
				return
			}
			if err != nil {
				t.Fatalf("ExecTask: %v", err)
			}
			if res.GetExitCode() != tc.wantCode {
				t.Errorf("exit code %d, want %d (stdout %q, stderr %q)", res.GetExitCode(), tc.wantCode, run.stdout.String(), run.stderr.String())
			}
			if tc.outContains != nil {
				for _, w := range tc.outContains {
					if !strings.Contains(run.stdout.String(), w) {
						t.Errorf("stdout %q lacks %q", run.stdout.String(), w)
					}
				}
				return
			}
			if run.stdout.String() != tc.wantOut || run.stderr.String() != tc.wantErr {
				t.Errorf("stdout %q stderr %q; want %q, %q", run.stdout.String(), run.stderr.String(), tc.wantOut, tc.wantErr)
			}
		})
	}
}

// TestExecCancelKills: ending the session (the caller's context) kills
// the exec'd command and what it started, and leaves the task running.
func TestExecCancelKills(t *testing.T) {
	ctx := testCtx(t)
	d := drivertest.Connect(t, newTestDriver())
	cfg := newTaskConfig(t, "alloc-1/web", "sleep", "600")
	start(t, d, cfg)
	pidFile := cfg.GetTaskDir() + "/exec.pid"

	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		res *driverpb.ExitResult
		err error
	}
	done := make(chan result, 1)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		res, err := d.ExecTask(ectx, &driverpb.ExecTaskStart{Id: cfg.GetId(), Task: cfg,
			Command: []string{"/bin/sh", "-c", "sleep 600 & echo $! > exec.pid; wait"}},
			driver.ExecIO{Stdin: pr, Stdout: io.Discard, Stderr: io.Discard})
		done <- result{res, err}
	}()
	var pid int
	testwait.For(t, testTimeout, "the exec'd command's child to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pid = atoiOrZero(strings.TrimSpace(string(b)))
		return pid > 0
	})
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("ExecTask after cancel = %v, %v", r.res, r.err)
		}
	case <-time.After(testTimeout):
		t.Fatal("ExecTask did not return after its context ended")
	}
	testwait.For(t, testTimeout, "the exec'd command's child to die", func() bool { return !processAlive(pid) })
	st, err := d.InspectTask(ctx, cfg.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("task after exec = %v, %v; want running", st, err)
	}
}

// TestExecInTaskCgroup: the exec'd command runs in the task's cgroup.
func TestExecInTaskCgroup(t *testing.T) {
	needCgroups(t)
	ctx := testCtx(t)
	raw := newTestDriver()
	d := drivertest.Connect(t, raw)
	cfg := newTaskConfig(t, "alloc-1/cg", "sleep", "600")
	start(t, d, cfg)
	tk, err := raw.lookup(cfg.GetId())
	if err != nil || tk.state.Cgroup == nil {
		t.Fatalf("task has no cgroup: %v", err)
	}
	run := &execRun{start: &driverpb.ExecTaskStart{Id: cfg.GetId(), Task: cfg, Command: []string{"cat", "/proc/self/cgroup"}}}
	if res, err := run.do(ctx, d); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("ExecTask = %v, %v", res, err)
	}
	if name := cgroupName(cfg.GetId()); !strings.Contains(run.stdout.String(), name) {
		t.Fatalf("exec'd command's cgroups %q do not name the task's %q", run.stdout.String(), name)
	}
}

func atoiOrZero(s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// processAlive reports whether pid is a live process (a zombie is dead).
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

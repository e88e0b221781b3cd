package docker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEngineExec runs commands in a task's container over the plugin's
// gRPC glue: stdin, stdout, stderr, the exit code, the container's file
// system and environment, a tty with its size and a resize, and the
// refusals.
func TestEngineExec(t *testing.T) {
	needEngine(t)
	raw := newEngineDriver(t, "")
	d := drivertest.Connect(t, raw)
	cfg := shTask(t, "web", `echo started; exec sleep 600`)
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if info, err := d.Info(ctx); err != nil || info.GetFsIsolation() != driver.FSIsolationImage {
		t.Fatalf("Info = %v, %v", info, err)
	}

	for _, tc := range []struct {
		name        string
		id          string
		cmd         []string
		tty         bool
		size        *driverpb.TerminalSize
		resize      []*driverpb.TerminalSize
		stdin       string
		wantCode    int32
		wantOut     string
		wantErr     string
		outContains []string
		wantKind    error
	}{
		{name: "stdin echo", cmd: []string{"cat"}, stdin: "in the container\n", wantOut: "in the container\n"},
		{name: "exit code and stderr", cmd: []string{"/bin/sh", "-c", "echo oops >&2; exit 7"}, wantCode: 7, wantErr: "oops\n"},
		{name: "container's view", cmd: []string{"/bin/sh", "-c", `ls -d /local /secrets; echo "$NOMAD_TASK_NAME"`}, wantOut: "/local\n/secrets\nweb\n"},
		{name: "tty with size", cmd: []string{"/bin/sh", "-c", `test -t 0 && echo is-a-tty; i=0; while [ "$(stty size 2>/dev/null)" != "33 101" ]; do i=$((i+1)); [ $i -gt 600 ] && exit 9; sleep 0.05; done; echo sized`}, tty: true,
			size: &driverpb.TerminalSize{Height: 33, Width: 101}, outContains: []string{"is-a-tty", "sized"}},
		{name: "tty resize", cmd: []string{"/bin/sh", "-c", `i=0; while [ "$(stty size)" != "40 120" ]; do i=$((i+1)); [ $i -gt 600 ] && exit 9; sleep 0.05; done 2>/dev/null; echo resized`},
			tty: true, size: &driverpb.TerminalSize{Height: 10, Width: 10}, resize: []*driverpb.TerminalSize{{Height: 40, Width: 120}}, outContains: []string{"resized"}},
		// The engine reports a command it cannot start as exit 126, with
		// its reason as output.
		{name: "unknown command", cmd: []string{"no-such-command-xyz"}, wantCode: 126, outContains: []string{"executable file not found"}},
		{name: "unknown task", id: "alloc-1/nope", cmd: []string{"true"}, wantKind: driver.ErrTaskNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id
			if id == "" {
				id = cfg.GetId()
			}
			pr, pw := io.Pipe()
			defer pr.Close()
			go func() {
				_, _ = pw.Write([]byte(tc.stdin))
				_ = pw.Close()
			}()
			var resize chan *driverpb.TerminalSize
			if len(tc.resize) > 0 {
				resize = make(chan *driverpb.TerminalSize, len(tc.resize))
				for _, r := range tc.resize {
					resize <- r
				}
			}
			var stdout, stderr lockedBuffer
			res, err := d.ExecTask(ctx, &driverpb.ExecTaskStart{Id: id, Command: tc.cmd, Tty: tc.tty, TtySize: tc.size, Task: cfg},
				driver.ExecIO{Stdin: pr, Stdout: &stdout, Stderr: &stderr, Resize: resize})
			if tc.wantKind != nil {
				if !errors.Is(err, tc.wantKind) {
					t.Fatalf("ExecTask = %v, %v; want %v", res, err, tc.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatalf("ExecTask: %v", err)
			}
			if res.GetExitCode() != tc.wantCode {
				t.Errorf("exit code %d, want %d (stdout %q stderr %q)", res.GetExitCode(), tc.wantCode, stdout.String(), stderr.String())
			}
			if tc.outContains != nil {
				for _, w := range tc.outContains {
					if !strings.Contains(stdout.String(), w) {
						t.Errorf("stdout %q lacks %q", stdout.String(), w)
					}
				}
				return
			}
			if stdout.String() != tc.wantOut || stderr.String() != tc.wantErr {
				t.Errorf("stdout %q stderr %q; want %q, %q", stdout.String(), stderr.String(), tc.wantOut, tc.wantErr)
			}
		})
	}

	// Ending the session kills the command; the task runs on.
	ectx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		_, err := d.ExecTask(ectx, &driverpb.ExecTaskStart{Id: cfg.GetId(), Task: cfg,
			Command: []string{"/bin/sh", "-c", "echo ready; exec sleep 600"}}, driver.ExecIO{Stdin: pr, Stdout: &out, Stderr: io.Discard})
		done <- err
	}()
	waitFor(t, time.Minute, "the exec'd command to start", func() bool { return strings.Contains(out.String(), "ready") })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ExecTask after cancel = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ExecTask did not return after its context ended")
	}
	var ps lockedBuffer
	res, err := d.ExecTask(ctx, &driverpb.ExecTaskStart{Id: cfg.GetId(), Task: cfg, Command: []string{"ps"}}, driver.ExecIO{Stdout: &ps, Stderr: io.Discard})
	if err != nil || res.GetExitCode() != 0 {
		t.Fatalf("ps: %v, %v", res, err)
	}
	if strings.Count(ps.String(), "sleep 600") != 1 {
		t.Fatalf("the killed exec's sleep is still there, or the task's is gone:\n%s", ps.String())
	}
	st, err := d.InspectTask(ctx, cfg.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("task after exec = %v, %v", st, err)
	}
}

package execdriver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestExecIntoTask: a command exec'd into a running exec task sees what
// the task sees (its root, /local, its PID namespace, its user, the
// task's env), not the host; stdin, exit codes and a tty work; the task
// runs on; ending the session kills the command.
func TestExecIntoTask(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	c := drivertest.Connect(t, d)
	ctx := testCtx(t)
	cfg := taskConfig(t, "a1/execinto", `echo task-marker > /local/marker; exec sleep 600`)
	cfg.Env["HOST_PID"] = strconv.Itoa(os.Getpid())
	if _, err := c.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DestroyTask(context.Background(), cfg.GetId(), true) })
	eventually(t, "the task to write its marker", func() bool {
		return read(t, filepath.Join(cfg.GetTaskDir(), "local", "marker")) == "task-marker\n"
	})
	if info, err := c.Info(ctx); err != nil || info.GetFsIsolation() != driver.FSIsolationChroot {
		t.Fatalf("Info = %v, %v", info, err)
	}

	run := func(cmd []string, tty bool, stdin string) (*driverpb.ExitResult, string, string, error) {
		pr, pw := io.Pipe()
		defer pr.Close()
		go func() {
			_, _ = pw.Write([]byte(stdin))
			_ = pw.Close()
		}()
		var out, errOut syncBuf
		res, err := c.ExecTask(ctx, &driverpb.ExecTaskStart{Id: cfg.GetId(), Command: cmd, Tty: tty, Task: cfg},
			driver.ExecIO{Stdin: pr, Stdout: &out, Stderr: &errOut})
		return res, out.String(), errOut.String(), err
	}

	script := `cat /local/marker
test -e /proc/$HOST_PID && echo sees-host-pid
test -e /work && echo sees-/work
echo "uid=$(id -u) taskdir=$NOMAD_TASK_DIR"
echo "procs=$(ls /proc | grep -c '^[0-9]')"
exit 4`
	res, out, errOut, err := run([]string{"/bin/sh", "-c", script}, false, "")
	if err != nil || res.GetExitCode() != 4 {
		t.Fatalf("exec = %v, %v (stdout %q stderr %q)", res, err, out, errOut)
	}
	for _, want := range []string{"task-marker\n", "uid=65534 taskdir=/local\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout %q lacks %q", out, want)
		}
	}
	for _, bad := range []string{"sees-host-pid", "sees-/work"} {
		if strings.Contains(out, bad) {
			t.Errorf("the exec'd command is not isolated: %q", out)
		}
	}
	if res, out, _, err := run([]string{"cat"}, false, "through stdin\n"); err != nil || res.GetExitCode() != 0 || out != "through stdin\n" {
		t.Errorf("cat = %v, %v, %q", res, err, out)
	}
	if res, out, _, err := run([]string{"/bin/sh", "-c", "test -t 0 && echo on-a-tty"}, true, ""); err != nil || res.GetExitCode() != 0 || !strings.Contains(out, "on-a-tty") {
		t.Errorf("tty = %v, %v, %q", res, err, out)
	}
	if _, _, _, err := run([]string{"no-such-command-xyz"}, false, ""); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Errorf("unknown command = %v", err)
	}

	// Ending the session kills the command; the task runs on.
	ectx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	defer pw.Close()
	var out2 syncBuf
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecTask(ectx, &driverpb.ExecTaskStart{Id: cfg.GetId(), Task: cfg,
			Command: []string{"/bin/sh", "-c", "echo ready; exec sleep 700"}}, driver.ExecIO{Stdin: pr, Stdout: &out2, Stderr: io.Discard})
		done <- err
	}()
	eventually(t, "the exec'd command to start", func() bool { return strings.Contains(out2.String(), "ready") })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("exec after cancel = %v", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("exec did not end with its context")
	}
	eventually(t, "the exec'd sleep to die", func() bool { return len(pidsWith("sleep 700")) == 0 })
	st, err := c.InspectTask(ctx, cfg.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("task after exec = %v, %v", st, err)
	}
}

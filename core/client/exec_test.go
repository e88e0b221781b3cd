package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/structs"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

type execBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (e *execBuf) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.b.Write(p)
}

func (e *execBuf) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.b.String()
}

// TestAllocExecRawExec: the client runs a command inside a running
// raw_exec task through the real driver: the task's env and directory,
// stdin, stdout, stderr, the exit code, a tty resized by the caller; and
// refuses unknown allocations, tasks and empty commands with their kinds.
func TestAllocExecRawExec(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	task := rawTask("web", "/bin/sh", "-c", "while true; do sleep 1; done")
	task.Env = map[string]string{"EXEC_MARK": "from-the-task"}
	srv.upsert(testAlloc("exec-1", c.NodeID(), testJob("service", task)))
	waitFor(t, "the task runs", func() bool {
		a := srv.alloc("exec-1")
		return a != nil && a.TaskStates["web"] != nil && a.TaskStates["web"].State == structs.TaskStateRunning
	})
	ctx := context.Background()

	target, err := c.AllocExecTarget(ctx, "exec-1", "web")
	if err != nil || !target.NoFSIsolation || target.Driver != rawexec.Name || target.Namespace != "default" {
		t.Fatalf("AllocExecTarget = %+v, %v", target, err)
	}

	run := func(req *clientapi.ExecRequest, stdin string) (int, string, string, error) {
		pr, pw := io.Pipe()
		defer pr.Close()
		go func() {
			_, _ = pw.Write([]byte(stdin))
			_ = pw.Close()
		}()
		var out, errOut execBuf
		req.Stdin, req.Stdout, req.Stderr = pr, &out, &errOut
		code, err := c.AllocExec(ctx, req)
		return code, out.String(), errOut.String(), err
	}
	code, out, errOut, err := run(&clientapi.ExecRequest{AllocID: "exec-1", Task: "web",
		Command: []string{"/bin/sh", "-c", `cat; echo "$EXEC_MARK" >&2; pwd; exit 3`}}, "hello\n")
	taskDir := filepath.Join(c.cfg.AllocDir, "exec-1", "web")
	if err != nil || code != 3 || out != "hello\n"+taskDir+"\n" || errOut != "from-the-task\n" {
		t.Fatalf("AllocExec = %d, %v; stdout %q stderr %q", code, err, out, errOut)
	}

	resize := make(chan clientapi.TerminalSize, 1)
	resize <- clientapi.TerminalSize{Height: 20, Width: 70}
	code, out, _, err = run(&clientapi.ExecRequest{AllocID: "exec-1", Task: "web", TTY: true, Resize: resize,
		Command: []string{"/bin/sh", "-c", `i=0; while [ "$(stty size)" != "20 70" ]; do i=$((i+1)); [ $i -gt 600 ] && exit 9; sleep 0.05; done; echo sized`}}, "")
	if err != nil || code != 0 || !strings.Contains(out, "sized") {
		t.Fatalf("AllocExec(tty) = %d, %v; stdout %q", code, err, out)
	}

	for _, tc := range []struct {
		name string
		req  clientapi.ExecRequest
		kind error
	}{
		{"unknown alloc", clientapi.ExecRequest{AllocID: "nope", Task: "web", Command: []string{"true"}}, structs.ErrNotFound},
		{"unknown task", clientapi.ExecRequest{AllocID: "exec-1", Task: "nope", Command: []string{"true"}}, structs.ErrNotFound},
		{"empty command", clientapi.ExecRequest{AllocID: "exec-1", Task: "web"}, structs.ErrInvalid},
		{"command not found", clientapi.ExecRequest{AllocID: "exec-1", Task: "web", Command: []string{"no-such-command-xyz"}}, structs.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, _, err := run(&tc.req, ""); !errors.Is(err, tc.kind) {
				t.Fatalf("AllocExec = %v; want %v", err, tc.kind)
			}
		})
	}
}

// TestAllocExecUnsupportedDriver: a driver without exec is refused with
// the kind ErrInvalid and a message that names it; a task that does not
// run yet is refused too.
func TestAllocExecUnsupportedDriver(t *testing.T) {
	srv := newFakeServer()
	c := newTestClient(t, srv, newFakeWorld(), t.TempDir())
	srv.upsert(testAlloc("svc-1", c.NodeID(), testJob("service", fakeTaskSpec("main", `{}`))))
	waitFor(t, "service alloc running", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusRunning })
	_, err := c.AllocExec(context.Background(), &clientapi.ExecRequest{AllocID: "svc-1", Task: "main", Command: []string{"sh"}})
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), `driver "fake" of task "main" does not support exec`) {
		t.Fatalf("AllocExec = %v", err)
	}
	target, err := c.AllocExecTarget(context.Background(), "svc-1", "main")
	if err != nil || !target.NoFSIsolation {
		t.Fatalf("AllocExecTarget = %+v, %v; a driver that does not say isolates nothing", target, err)
	}
}

package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// execDrainTimeout bounds how long RunExecCmd waits, after the command's
// process group is gone, for output still buffered in its pipes or
// terminal; a process that escaped the group and holds them open is not
// waited for.
const execDrainTimeout = 5 * time.Second

// eot is the terminal's end-of-file character (^D), sent when the stdin
// of a command on a tty ends.
const eot = 0x04

// StartFunc starts cmd and returns the command that started (a driver
// that retries a failed start with a copy returns the copy).
type StartFunc func(cmd *exec.Cmd) (*exec.Cmd, error)

// RunExecCmd runs cmd for an exec session and returns its exit result;
// drivers that run a command as a host process (raw_exec, exec) share it.
// The driver prepares cmd (Path, Args, Env, Dir, credential, namespaces)
// and leaves its streams unset; RunExecCmd wires them to stdio, through a
// pseudo-terminal when tty is set (size: its initial size, may be nil),
// puts the command in a session of its own and starts it with start (nil:
// cmd.Start), so that a driver can start it in the task's cgroup.
//
// When the command exits, what is left of its process group is killed
// and the output drained (bounded by execDrainTimeout). When ctx ends
// first, the process group is killed and ctx.Err() returned. A Read of
// stdio.Stdin in progress is not waited for: the caller ends it by
// closing the reader (the SDK's gRPC server does).
func RunExecCmd(ctx context.Context, cmd *exec.Cmd, tty bool, size *driverpb.TerminalSize, stdio ExecIO, start StartFunc) (*driverpb.ExitResult, error) {
	if start == nil {
		start = func(c *exec.Cmd) (*exec.Cmd, error) { return c, c.Start() }
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	// The command dies with the driver rather than outlive its session.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would inherit the driver's environment
	}

	var (
		childFiles []*os.File // the command's ends, closed once it started
		stdinW     *os.File   // where stdin goes: a pipe, or the terminal
		outputs    []*os.File // read ends of stdout and stderr (or the terminal)
		master     *os.File
	)
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	if tty {
		m, slave, err := pty.Open()
		if err != nil {
			return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
		}
		master = m
		if size.GetHeight() > 0 && size.GetWidth() > 0 {
			_ = pty.Setsize(master, winsize(size))
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0 // the child's stdin
		childFiles = []*os.File{slave}
		stdinW = master
		outputs = []*os.File{master}
	} else {
		var pipes [3][2]*os.File
		for i := range pipes {
			r, w, err := os.Pipe()
			if err != nil {
				for j := 0; j < i; j++ {
					closeAll(pipes[j][:])
				}
				return nil, fmt.Errorf("exec pipes: %w", err)
			}
			pipes[i] = [2]*os.File{r, w}
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes[0][0], pipes[1][1], pipes[2][1]
		childFiles = []*os.File{pipes[0][0], pipes[1][1], pipes[2][1]}
		stdinW = pipes[0][1]
		outputs = []*os.File{pipes[1][0], pipes[2][0]}
	}

	started, err := start(cmd)
	closeAll(childFiles)
	if err != nil {
		closeAll(outputs)
		if !tty {
			_ = stdinW.Close()
		}
		return nil, fmt.Errorf("%w: start %q: %v", ErrInvalidConfig, cmd.Args[0], err)
	}
	pid := started.Process.Pid
	killGroup := func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
	stopKill := context.AfterFunc(ctx, killGroup)

	// Output pumps: owned here, drained below.
	var outWG sync.WaitGroup
	writers := []io.Writer{stdio.Stdout, stdio.Stderr}
	for i, f := range outputs {
		w := writers[i]
		if w == nil {
			w = io.Discard
		}
		outWG.Add(1)
		go func() {
			defer outWG.Done()
			// A terminal's read ends in EIO once its last slave closes.
			_, _ = io.Copy(w, f)
		}()
	}

	// The stdin pump may block in the caller's Read past the session (see
	// above); it stops at its next write once stdinW is closed. A write
	// blocked on a full pipe ends when stdinW is closed.
	if stdio.Stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, rerr := stdio.Stdin.Read(buf)
				if n > 0 {
					if _, err := stdinW.Write(buf[:n]); err != nil {
						return
					}
				}
				if rerr != nil {
					if tty {
						_, _ = stdinW.Write([]byte{eot})
					} else {
						_ = stdinW.Close()
					}
					return
				}
			}
		}()
	} else if !tty {
		_ = stdinW.Close()
	}

	done := make(chan struct{})
	var resizeWG sync.WaitGroup
	if tty && stdio.Resize != nil {
		resizeWG.Add(1)
		go func() {
			defer resizeWG.Done()
			for {
				select {
				case <-done:
					return
				case sz, ok := <-stdio.Resize:
					if !ok {
						return
					}
					if sz.GetHeight() > 0 && sz.GetWidth() > 0 {
						_ = pty.Setsize(master, winsize(sz))
					}
				}
			}
		}()
	}

	res := waitResult(started)
	stopKill()
	// Background processes the command left in its group go with it.
	killGroup()
	drained := make(chan struct{})
	go func() {
		outWG.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(execDrainTimeout):
	}
	close(done)
	resizeWG.Wait()
	_ = stdinW.Close()
	closeAll(outputs) // ends pumps still held open by an escaped process
	select {
	case <-drained:
	case <-time.After(execDrainTimeout):
		// A read that a close cannot interrupt: leave it to end with
		// the escaped process rather than hold the session.
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res, nil
}

func winsize(sz *driverpb.TerminalSize) *pty.Winsize {
	h, w := sz.GetHeight(), sz.GetWidth()
	if h > 0xffff {
		h = 0xffff
	}
	if w > 0xffff {
		w = 0xffff
	}
	return &pty.Winsize{Rows: uint16(h), Cols: uint16(w)}
}

// waitResult waits for cmd and reports its exit as a shell does: killed
// by signal N is 128+N.
func waitResult(cmd *exec.Cmd) *driverpb.ExitResult {
	err := cmd.Wait()
	res := &driverpb.ExitResult{}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		res.ExitCode = int32(cmd.ProcessState.ExitCode())
	case ws.Signaled():
		res.Signal = int32(ws.Signal())
		res.ExitCode = 128 + res.Signal
	default:
		res.ExitCode = int32(ws.ExitStatus())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		res.Err = err.Error()
	}
	return res
}

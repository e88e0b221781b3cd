package docker

import (
	"context"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

var _ driver.Execer = (*Driver)(nil)

// execExitTimeout bounds how long the driver waits, once an exec'd
// command's output has ended, for the engine to report it exited.
const execExitTimeout = 10 * time.Second

// eot is the terminal's end-of-file character (^D), sent when the stdin
// of a command on a tty ends.
const eot = 0x04

// ExecTask implements driver.Execer with the engine's exec API: the
// command runs in the task's container (its namespaces, image file system,
// user and environment) through a hijacked attach stream, resized with
// the exec resize call. The engine cannot kill an exec'd process, so a
// session that ends first has the driver kill it by its host pid (the
// engine must be on this host, as it is for the driver's bind mounts).
func (d *Driver) ExecTask(ctx context.Context, start *driverpb.ExecTaskStart, stdio driver.ExecIO) (*driverpb.ExitResult, error) {
	if err := driver.CheckExecCommand(start.GetCommand()); err != nil {
		return nil, err
	}
	t, err := d.lookup(start.GetId())
	if err != nil {
		return nil, err
	}
	if t.exited() {
		return nil, fmt.Errorf("%w: %q", driver.ErrTaskNotRunning, start.GetId())
	}
	tty := start.GetTty()
	var size client.ConsoleSize
	if sz := start.GetTtySize(); tty && sz.GetHeight() > 0 && sz.GetWidth() > 0 {
		size = client.ConsoleSize{Height: uint(sz.GetHeight()), Width: uint(sz.GetWidth())}
	}
	created, err := d.engine.ExecCreate(ctx, t.st.ContainerID, client.ExecCreateOptions{
		TTY: tty, ConsoleSize: size,
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: start.GetCommand(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: exec in container %s: %v", driver.ErrInvalidConfig, shortID(t.st.ContainerID), err)
	}
	att, err := d.engine.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: tty, ConsoleSize: size})
	if err != nil {
		return nil, fmt.Errorf("attach to exec in container %s: %w", shortID(t.st.ContainerID), err)
	}
	defer att.Close()
	if size.Height > 0 {
		// The engine sizes the terminal as the command starts, which may
		// be after the command asked; size it again now.
		_, _ = d.engine.ExecResize(ctx, created.ID, client.ExecResizeOptions(size))
	}
	d.logger.Info("exec started", "task_id", t.id, "container_id", shortID(t.st.ContainerID), "exec_id", shortID(created.ID),
		"command", start.GetCommand()[0], "tty", tty)

	// The session's end (the caller's ctx) kills the command: the engine
	// has no call for it.
	stopKill := context.AfterFunc(ctx, func() {
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if insp, err := d.engine.ExecInspect(kctx, created.ID, client.ExecInspectOptions{}); err == nil && insp.Running && insp.PID > 0 {
			_ = syscall.Kill(insp.PID, syscall.SIGKILL)
		}
		att.Close()
	})
	defer stopKill()

	// Stdin: not waited for (see driver.ExecIO); it stops at its next
	// write once the stream is closed.
	if stdio.Stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, rerr := stdio.Stdin.Read(buf)
				if n > 0 {
					if _, err := att.Conn.Write(buf[:n]); err != nil {
						return
					}
				}
				if rerr != nil {
					if tty {
						_, _ = att.Conn.Write([]byte{eot})
					} else {
						_ = att.CloseWrite()
					}
					return
				}
			}
		}()
	} else if !tty {
		_ = att.CloseWrite()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	if tty && stdio.Resize != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case sz, ok := <-stdio.Resize:
					if !ok {
						return
					}
					if sz.GetHeight() > 0 && sz.GetWidth() > 0 {
						_, _ = d.engine.ExecResize(ctx, created.ID, client.ExecResizeOptions{Height: uint(sz.GetHeight()), Width: uint(sz.GetWidth())})
					}
				}
			}
		}()
	}
	stdout, stderr := stdio.Stdout, stdio.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if tty {
		_, err = io.Copy(stdout, att.Reader)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, att.Reader)
	}
	close(done)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("exec stream of container %s: %w", shortID(t.st.ContainerID), err)
	}
	// The stream ends as the command exits; the engine may take a moment
	// to record the exit.
	deadline := time.Now().Add(execExitTimeout)
	for {
		insp, err := d.engine.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("inspect exec in container %s: %w", shortID(t.st.ContainerID), err)
		}
		if !insp.Running {
			d.logger.Info("exec ended", "task_id", t.id, "exec_id", shortID(created.ID), "exit_code", insp.ExitCode)
			return &driverpb.ExitResult{ExitCode: int32(insp.ExitCode)}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("exec in container %s: output ended but the engine still reports the command running", shortID(t.st.ContainerID))
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

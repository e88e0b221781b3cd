package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// Bounds of an exec session, checked on both sides of the plugin
// boundary so that a caller learns them before a driver runs anything.
const (
	// MaxExecArgs bounds the number of words of an exec'd command.
	MaxExecArgs = 1024
	// MaxExecCommandBytes bounds the total size of an exec'd command's
	// words.
	MaxExecCommandBytes = 64 << 10
	// ExecChunkBytes is the largest stdin, stdout or stderr chunk one
	// message carries; longer writes are split.
	ExecChunkBytes = 32 << 10
)

// ErrExecUnsupported: the driver cannot run commands inside its tasks.
var ErrExecUnsupported = errors.New("driver does not support exec")

// File system isolation of a driver's tasks (InfoResponse.fs_isolation).
const (
	FSIsolationNone   = "none"
	FSIsolationChroot = "chroot"
	FSIsolationImage  = "image"
)

// ExecIO is the I/O of one exec session. Stdin (nil: none, EOF at once)
// is read until EOF or the session ends; Stdout and Stderr are written
// from one goroutine each (with a tty only Stdout); Resize (nil: none)
// carries terminal size changes until it is closed or the session ends.
type ExecIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Resize         <-chan *driverpb.TerminalSize
}

// Execer is implemented by a driver that can run commands inside its
// running tasks. ExecTask returns when the command has exited, with its
// exit result, after every byte of its output was written; when ctx ends
// first the command is killed and ctx.Err() returned.
// ErrExecUnsupported: the driver cannot exec (the gRPC client returns it
// for a plugin that does not implement the call). ErrTaskNotFound,
// ErrTaskNotRunning: as the other calls. ErrInvalidConfig: an empty or
// oversized command, or one that cannot be found.
type Execer interface {
	ExecTask(ctx context.Context, start *driverpb.ExecTaskStart, stdio ExecIO) (*driverpb.ExitResult, error)
}

// CheckExecCommand checks an exec'd command against the bounds.
func CheckExecCommand(cmd []string) error {
	if len(cmd) == 0 || cmd[0] == "" {
		return fmt.Errorf("%w: command: must name a program", ErrInvalidConfig)
	}
	if len(cmd) > MaxExecArgs {
		return fmt.Errorf("%w: command: at most %d words, got %d", ErrInvalidConfig, MaxExecArgs, len(cmd))
	}
	n := 0
	for i, w := range cmd {
		n += len(w)
		for j := 0; j < len(w); j++ {
			if w[j] == 0 {
				return fmt.Errorf("%w: command[%d]: contains a NUL byte", ErrInvalidConfig, i)
			}
		}
	}
	if n > MaxExecCommandBytes {
		return fmt.Errorf("%w: command: at most %d bytes in all, got %d", ErrInvalidConfig, MaxExecCommandBytes, n)
	}
	return nil
}

// chunkWriter sends each write as messages of at most ExecChunkBytes.
type chunkWriter struct {
	send func([]byte) error
}

func (w chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := p
		if len(c) > ExecChunkBytes {
			c = c[:ExecChunkBytes]
		}
		if err := w.send(append([]byte(nil), c...)); err != nil {
			return n, err
		}
		n += len(c)
		p = p[len(c):]
	}
	return n, nil
}

// ExecTask implements Execer over the plugin's ExecTask stream.
func (c *grpcClient) ExecTask(ctx context.Context, start *driverpb.ExecTaskStart, stdio ExecIO) (*driverpb.ExitResult, error) {
	if err := CheckExecCommand(start.GetCommand()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.client.ExecTask(ctx)
	if err != nil {
		return nil, execStreamErr(ctx, err)
	}
	var sendMu sync.Mutex
	send := func(req *driverpb.ExecTaskRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(req)
	}
	if err := send(&driverpb.ExecTaskRequest{Msg: &driverpb.ExecTaskRequest_Start{Start: start}}); err != nil {
		return nil, execStreamErr(ctx, recvErr(stream, err))
	}

	// The pumps end with ctx, which ends when this call returns. A stdin
	// Read in progress is not waited for: the caller ends it by closing
	// its reader, and the pump then finds the stream closed.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if stdio.Stdin != nil {
		go func() {
			buf := make([]byte, ExecChunkBytes)
			for ctx.Err() == nil {
				n, err := stdio.Stdin.Read(buf)
				if n > 0 {
					if send(&driverpb.ExecTaskRequest{Msg: &driverpb.ExecTaskRequest_Stdin{Stdin: append([]byte(nil), buf[:n]...)}}) != nil {
						return
					}
				}
				if err != nil {
					_ = send(&driverpb.ExecTaskRequest{Msg: &driverpb.ExecTaskRequest_StdinClose{StdinClose: true}})
					return
				}
			}
		}()
	} else {
		_ = send(&driverpb.ExecTaskRequest{Msg: &driverpb.ExecTaskRequest_StdinClose{StdinClose: true}})
	}
	if stdio.Resize != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-stdio.Resize:
					if !ok {
						return
					}
					if send(&driverpb.ExecTaskRequest{Msg: &driverpb.ExecTaskRequest_Resize{Resize: sz}}) != nil {
						return
					}
				}
			}
		}()
	}

	for {
		resp, err := stream.Recv()
		if err != nil {
			if err == io.EOF {
				err = errors.New("driver ended the exec stream without an exit result")
			}
			return nil, execStreamErr(ctx, err)
		}
		switch m := resp.GetMsg().(type) {
		case *driverpb.ExecTaskResponse_Stdout:
			if stdio.Stdout != nil {
				if _, err := stdio.Stdout.Write(m.Stdout); err != nil {
					return nil, fmt.Errorf("write exec stdout: %w", err)
				}
			}
		case *driverpb.ExecTaskResponse_Stderr:
			if stdio.Stderr != nil {
				if _, err := stdio.Stderr.Write(m.Stderr); err != nil {
					return nil, fmt.Errorf("write exec stderr: %w", err)
				}
			}
		case *driverpb.ExecTaskResponse_Exited:
			return m.Exited, nil
		}
	}
}

// recvErr is the stream's own error after a failed Send: Send reports
// only io.EOF when the server has ended the stream.
func recvErr(stream interface {
	Recv() (*driverpb.ExecTaskResponse, error)
}, sendErr error) error {
	if sendErr != io.EOF {
		return sendErr
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// execStreamErr maps a stream error to the kinds; a plugin that predates
// the call is ErrExecUnsupported.
func execStreamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && status.Code(err) == codes.Canceled {
		return ctx.Err()
	}
	if err := fromStatus(err); !errors.Is(err, ErrExecUnsupported) && status.Code(err) == codes.Unimplemented {
		// A plugin that predates the call.
		return fmt.Errorf("%w: %v", ErrExecUnsupported, err)
	}
	return fromStatus(err)
}

// ExecTask serves the ExecTask stream with the implementation's Execer.
func (s *grpcServer) ExecTask(stream driverpb.Driver_ExecTaskServer) error {
	ex, ok := s.impl.(Execer)
	if !ok {
		return toStatus(fmt.Errorf("%w: it cannot run commands inside its tasks", ErrExecUnsupported))
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return toStatus(errMissing(ErrInvalidConfig, "exec start message"))
	}
	if err := CheckExecCommand(start.GetCommand()); err != nil {
		return toStatus(err)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()

	stdinR, stdinW := io.Pipe()
	resize := make(chan *driverpb.TerminalSize, 4)
	var sendMu sync.Mutex
	send := func(resp *driverpb.ExecTaskResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(resp)
	}

	// Read the caller's messages until it closes its side or the session
	// ends: the stream's Recv returns once this handler has returned.
	go func() {
		defer close(resize)
		stdinOpen := true
		for {
			req, err := stream.Recv()
			if err != nil {
				if err != io.EOF {
					// The caller went away: end the command.
					cancel()
				}
				_ = stdinW.Close()
				return
			}
			switch m := req.GetMsg().(type) {
			case *driverpb.ExecTaskRequest_Stdin:
				if stdinOpen {
					if _, err := stdinW.Write(m.Stdin); err != nil {
						stdinOpen = false
					}
				}
			case *driverpb.ExecTaskRequest_StdinClose:
				stdinOpen = false
				_ = stdinW.Close()
			case *driverpb.ExecTaskRequest_Resize:
				select {
				case resize <- m.Resize:
				case <-ctx.Done():
					return
				default: // a burst of resizes: the latest that fits wins
				}
			}
		}
	}()

	stdout := chunkWriter{send: func(b []byte) error {
		return send(&driverpb.ExecTaskResponse{Msg: &driverpb.ExecTaskResponse_Stdout{Stdout: b}})
	}}
	stderr := chunkWriter{send: func(b []byte) error {
		return send(&driverpb.ExecTaskResponse{Msg: &driverpb.ExecTaskResponse_Stderr{Stderr: b}})
	}}
	res, err := ex.ExecTask(ctx, start, ExecIO{Stdin: stdinR, Stdout: stdout, Stderr: stderr, Resize: resize})
	// Unblock a stdin write the command no longer reads.
	_ = stdinR.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return toStatus(err)
	}
	return send(&driverpb.ExecTaskResponse{Msg: &driverpb.ExecTaskResponse_Exited{Exited: res}})
}

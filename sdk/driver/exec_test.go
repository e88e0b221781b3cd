package driver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// execFake is a driver that implements Execer: it copies stdin to stdout
// (its first bytes uppercased on stderr), reports two resizes with a tty, and exits
// with len(command).
type execFake struct {
	fake
	err error
}

func (f *execFake) ExecTask(ctx context.Context, start *driverpb.ExecTaskStart, stdio driver.ExecIO) (*driverpb.ExitResult, error) {
	if f.err != nil {
		return nil, f.err
	}
	if start.GetCommand()[0] == "hang" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b, err := io.ReadAll(stdio.Stdin)
	if err != nil {
		return nil, err
	}
	if _, err := stdio.Stdout.Write(b); err != nil {
		return nil, err
	}
	if _, err := stdio.Stderr.Write([]byte(strings.ToUpper(string(b[:min(len(b), 5)])))); err != nil {
		return nil, err
	}
	if start.GetTty() {
		for range 2 {
			select {
			case sz := <-stdio.Resize:
				fmt.Fprintf(stdio.Stdout, "|%dx%d", sz.GetHeight(), sz.GetWidth())
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return &driverpb.ExitResult{ExitCode: int32(len(start.GetCommand()))}, nil
}

// TestExecOverGRPC: stdin, stdout and stderr (over the chunk size),
// resizes and the exit result cross the plugin boundary; a driver without
// Execer is ErrExecUnsupported; error kinds and cancellation cross too.
func TestExecOverGRPC(t *testing.T) {
	ctx := context.Background()
	d := drivertest.Connect(t, &execFake{})
	big := strings.Repeat("0123456789", 3*driver.ExecChunkBytes/10+7)
	var out, errOut bytes.Buffer
	res, err := d.ExecTask(ctx, &driverpb.ExecTaskStart{Id: "a/t", Command: []string{"x", "y", "z"}},
		driver.ExecIO{Stdin: strings.NewReader(big), Stdout: &out, Stderr: &errOut})
	if err != nil || res.GetExitCode() != 3 || out.String() != big || errOut.String() != "01234" {
		t.Fatalf("ExecTask = %v, %v; stdout %d bytes, stderr %q", res, err, out.Len(), errOut.String())
	}

	// Resizes reach the driver.
	resize := make(chan *driverpb.TerminalSize, 2)
	resize <- &driverpb.TerminalSize{Height: 24, Width: 80}
	resize <- &driverpb.TerminalSize{Height: 50, Width: 132}
	close(resize)
	out.Reset()
	res, err = d.ExecTask(ctx, &driverpb.ExecTaskStart{Id: "a/t", Command: []string{"sh"}, Tty: true},
		driver.ExecIO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: io.Discard, Resize: resize})
	if err != nil || res.GetExitCode() != 1 || out.String() != "|24x80|50x132" {
		t.Fatalf("ExecTask(tty) = %v, %v; stdout %q", res, err, out.String())
	}

	// Cancellation ends the session on both sides.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		_, err := d.ExecTask(cctx, &driverpb.ExecTaskStart{Id: "a/t", Command: []string{"hang"}}, driver.ExecIO{Stdin: pr, Stdout: io.Discard, Stderr: io.Discard})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("ExecTask(cancelled) = %v", err)
	}

	for _, tc := range []struct {
		name string
		impl driver.Driver
		cmd  []string
		want error
	}{
		{"no Execer", &fake{}, []string{"sh"}, driver.ErrExecUnsupported},
		{"not found", &execFake{err: fmt.Errorf("%w: a/t", driver.ErrTaskNotFound)}, []string{"sh"}, driver.ErrTaskNotFound},
		{"not running", &execFake{err: fmt.Errorf("%w: a/t", driver.ErrTaskNotRunning)}, []string{"sh"}, driver.ErrTaskNotRunning},
		{"empty command", &execFake{}, nil, driver.ErrInvalidConfig},
		{"NUL in command", &execFake{}, []string{"sh", "a\x00b"}, driver.ErrInvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := drivertest.Connect(t, tc.impl)
			_, err := c.ExecTask(ctx, &driverpb.ExecTaskStart{Id: "a/t", Command: tc.cmd}, driver.ExecIO{Stdout: io.Discard, Stderr: io.Discard})
			if !errors.Is(err, tc.want) {
				t.Fatalf("ExecTask = %v; want %v", err, tc.want)
			}
		})
	}
}

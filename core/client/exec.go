package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// execTask finds the running task an exec session goes into, and its
// driver.
func (c *Client) execTask(allocID, task string) (*allocRunner, *taskRunner, driver.Driver, error) {
	ar := c.runner(allocID)
	if ar == nil {
		return nil, nil, nil, structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
	}
	tr := ar.task(task)
	if tr == nil {
		return nil, nil, nil, structs.NewError(structs.ErrNotFound, "Unknown task %q in allocation %q", task, allocID)
	}
	if !tr.running() {
		return nil, nil, nil, errTaskNotRunning(task)
	}
	drv, err := ar.driver(tr.task.Driver)
	if err != nil {
		return nil, nil, nil, structs.NewError(structs.ErrUnavailable, "task %q: %v", task, err)
	}
	return ar, tr, drv, nil
}

// AllocExecTarget reports what authorizing an exec into the task needs:
// its namespace and whether its driver isolates its file system (asked of
// the driver: a driver that does not say is taken to isolate nothing).
func (c *Client) AllocExecTarget(ctx context.Context, allocID, task string) (*clientapi.ExecTarget, error) {
	ar, tr, drv, err := c.execTask(allocID, task)
	if err != nil {
		return nil, err
	}
	info, err := drv.Info(ctx)
	if err != nil {
		return nil, structs.NewError(structs.ErrUnavailable, "driver %q of task %q: %v", tr.task.Driver, task, err)
	}
	ar.mu.Lock()
	ns := ar.alloc.Namespace
	ar.mu.Unlock()
	iso := info.GetFsIsolation()
	return &clientapi.ExecTarget{
		Namespace:     ns,
		Driver:        tr.task.Driver,
		NoFSIsolation: iso == "" || iso == driver.FSIsolationNone,
	}, nil
}

// AllocExec runs req.Command inside the running task through its driver
// and returns the command's exit code once it has exited and its output
// was written. When ctx ends first the command is killed. The errors
// carry the structs kinds: an unknown allocation or task is ErrNotFound,
// a task that does not run or a driver that cannot exec ErrInvalid.
func (c *Client) AllocExec(ctx context.Context, req *clientapi.ExecRequest) (int, error) {
	ar, tr, drv, err := c.execTask(req.AllocID, req.Task)
	if err != nil {
		return 0, err
	}
	ex, ok := drv.(driver.Execer)
	if !ok {
		return 0, structs.NewError(structs.ErrInvalid, "driver %q of task %q does not support exec", tr.task.Driver, req.Task)
	}
	if err := driver.CheckExecCommand(req.Command); err != nil {
		return 0, structs.NewError(structs.ErrInvalid, "%v", err)
	}
	env, dir := tr.execContext()
	start := &driverpb.ExecTaskStart{
		Id:      tr.id,
		Command: req.Command,
		Tty:     req.TTY,
		Task: &driverpb.TaskConfig{
			Id: tr.id, AllocId: ar.id, TaskName: tr.task.Name,
			Env: env, User: tr.task.User, AllocDir: ar.dir.root, TaskDir: dir,
		},
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdio := driver.ExecIO{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr}
	if req.Resize != nil {
		resize := make(chan *driverpb.TerminalSize)
		stdio.Resize = resize
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			defer close(resize)
			for {
				select {
				case <-ctx.Done():
					return
				case sz, ok := <-req.Resize:
					if !ok {
						return
					}
					select {
					case resize <- &driverpb.TerminalSize{Height: clampSize(sz.Height), Width: clampSize(sz.Width)}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	res, err := ex.ExecTask(ctx, start, stdio)
	cancel()
	if err != nil {
		return 0, execError(tr.task.Driver, req.Task, err)
	}
	if res.GetErr() != "" {
		return int(res.GetExitCode()), structs.NewError(structs.ErrUnavailable, "exec in task %q: %s", req.Task, res.GetErr())
	}
	return int(res.GetExitCode()), nil
}

func clampSize(n int) uint32 {
	switch {
	case n < 0:
		return 0
	case n > 0xffff:
		return 0xffff
	}
	return uint32(n)
}

// execError maps the driver's error kinds to the API's.
func execError(drv, task string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, driver.ErrExecUnsupported):
		return structs.NewError(structs.ErrInvalid, "driver %q of task %q does not support exec", drv, task)
	case errors.Is(err, driver.ErrTaskNotFound), errors.Is(err, driver.ErrTaskNotRunning):
		return errTaskNotRunning(task)
	case errors.Is(err, driver.ErrInvalidConfig):
		return structs.NewError(structs.ErrInvalid, "%v", err)
	}
	return structs.NewError(structs.ErrUnavailable, "exec in task %q: %v", task, fmt.Sprint(err))
}

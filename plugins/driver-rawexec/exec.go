package rawexec

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"syscall"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

var _ driver.Execer = (*Driver)(nil)

// execForkMu serializes exec'd commands that start by moving the driver
// into a task's cgroup for the fork (see startInCgroup).
var execForkMu sync.Mutex

// ExecTask implements driver.Execer: the command runs as the task does,
// in its cgroup, with its environment, directory and user, as a child of
// the driver (it ends with the driver: an exec session does not survive a
// plugin restart).
func (d *Driver) ExecTask(ctx context.Context, start *driverpb.ExecTaskStart, stdio driver.ExecIO) (*driverpb.ExitResult, error) {
	if err := driver.CheckExecCommand(start.GetCommand()); err != nil {
		return nil, err
	}
	t, err := d.lookup(start.GetId())
	if err != nil {
		return nil, err
	}
	if t.gone() {
		return nil, fmt.Errorf("%w: %q", driver.ErrTaskNotRunning, start.GetId())
	}
	cfg := start.GetTask()
	taskDir := cfg.GetTaskDir()
	if taskDir == "" {
		return nil, fmt.Errorf("%w: exec: the task's config (task_dir) is missing", driver.ErrInvalidConfig)
	}
	argv := start.GetCommand()
	path, err := resolveCommand(argv[0], taskDir, cfg.GetEnv())
	if err != nil {
		return nil, err
	}
	cred, err := d.resolveUser(cfg.GetUser())
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string(nil), argv...),
		Env:         envList(cfg.GetEnv()),
		Dir:         taskDir,
		SysProcAttr: &syscall.SysProcAttr{},
	}
	if cred != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: cred.UID, Gid: cred.GID, Groups: cred.Groups}
	}
	_, startFn, err := d.TaskProcess(t.id)
	if err != nil {
		return nil, err
	}
	d.logger.Info("exec started", "task_id", t.id, "command", argv[0], "tty", start.GetTty())
	res, err := driver.RunExecCmd(ctx, cmd, start.GetTty(), start.GetTtySize(), stdio, startFn)
	if err != nil {
		d.logger.Info("exec ended", "task_id", t.id, "command", argv[0], "error", err)
		return nil, err
	}
	d.logger.Info("exec ended", "task_id", t.id, "command", argv[0], "exit_code", res.GetExitCode())
	return res, nil
}

// TaskProcess reports the pid of a running task's main process, and how
// to start a command in the task's cgroup (nil: the task has none), for a
// driver built on this one (exec) to run commands inside its tasks.
// ErrTaskNotFound: unknown id; ErrTaskNotRunning: the task has exited.
func (d *Driver) TaskProcess(id string) (pid int, start driver.StartFunc, err error) {
	t, err := d.lookup(id)
	if err != nil {
		return 0, nil, err
	}
	if t.gone() {
		return 0, nil, fmt.Errorf("%w: %q", driver.ErrTaskNotRunning, id)
	}
	if cg := t.state.Cgroup; cg != nil {
		start = func(c *exec.Cmd) (*exec.Cmd, error) { return startInCgroup(c, cg, &execForkMu) }
	}
	return t.state.TaskPID, start, nil
}

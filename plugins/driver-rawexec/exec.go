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
	var startFn driver.StartFunc
	if cg := t.state.Cgroup; cg != nil {
		startFn = func(c *exec.Cmd) (*exec.Cmd, error) { return startInCgroup(c, cg, &execForkMu) }
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

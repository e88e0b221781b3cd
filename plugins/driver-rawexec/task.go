package rawexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// task is one started or recovered task.
type task struct {
	id        string
	state     handleState
	startedAt time.Time

	// done is closed once the task has exited; result and completedAt are
	// written before and never after, so readers need no lock after <-done.
	done        chan struct{}
	result      *driverpb.ExitResult
	completedAt time.Time
}

func newTask(id string, st handleState, startedAt time.Time) *task {
	return &task{id: id, state: st, startedAt: startedAt, done: make(chan struct{})}
}

func (t *task) handle() (*driverpb.TaskHandle, error) {
	raw, err := encodeState(t.state)
	if err != nil {
		return nil, err
	}
	return &driverpb.TaskHandle{
		Id:                t.id,
		Pid:               int64(t.state.TaskPID),
		StartedAtUnixNano: t.startedAt.UnixNano(),
		State:             raw,
	}, nil
}

func (t *task) exited() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// finish records the exit; only the task's single watcher calls it.
func (t *task) finish(rec *exitRecord) {
	t.result = rec.result()
	t.completedAt = time.Unix(0, rec.CompletedAt)
	if rec.CompletedAt == 0 {
		t.completedAt = time.Now()
	}
	close(t.done)
}

// gone reports whether the task has exited, whether or not its watcher has
// noticed yet, or its pid has been given to another process. Signalling a
// pid that is gone could hit an unrelated process group.
func (t *task) gone() bool {
	if t.exited() {
		return true
	}
	if _, err := os.Stat(t.state.ExitFile); err == nil {
		return true
	}
	return pidReused(t.state.TaskPID, t.state.TaskStartTicks)
}

// signalGroup sends sig to the task's whole process group: the task runs in
// a session of its own, so the group is its pid, and a shell's children
// are stopped with it.
func (t *task) signalGroup(sig syscall.Signal) error {
	return t.kill(-t.state.TaskPID, sig)
}

// killTree SIGKILLs the task's process group and, with a cgroup, every
// process in it, including those that left the group (setsid). While the
// supervisor lives, the cgroup is its business: it empties it once the
// main process dies, and a second party freezing and thawing the same
// cgroup would only get in its way.
func (t *task) killTree() error {
	err := t.signalGroup(syscall.SIGKILL)
	if cg := t.state.Cgroup; cg != nil && !t.supervised() {
		if cerr := cg.killAll(); cerr != nil && err == nil {
			err = fmt.Errorf("kill task %q: %w", t.id, cerr)
		}
	}
	return err
}

func (t *task) kill(pid int, sig syscall.Signal) error {
	if t.gone() {
		return nil
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal task %q with %v: %w", t.id, sig, err)
	}
	return nil
}

// waitDone waits for the task to exit or ctx to end.
func (t *task) waitDone(ctx context.Context) error {
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finishFromExitFile finishes t from its exit file, if the supervisor
// wrote it.
func (d *Driver) finishFromExitFile(t *task) bool {
	rec, err := readExitFile(t.state.ExitFile)
	if err != nil {
		d.logger.Error("unreadable exit result", "task_id", t.id, "error", err)
		rec = &exitRecord{ExitCode: -1, Err: fmt.Sprintf("read exit result: %v", err)}
	}
	if rec == nil {
		return false
	}
	if rec.PID != 0 && t.state.TaskPID != 0 && rec.PID != t.state.TaskPID {
		d.logger.Debug("exit file of another run of the task; waiting for this run's", "task_id", t.id,
			"pid", t.state.TaskPID, "recorded_pid", rec.PID)
		return false
	}
	t.finish(rec)
	d.logger.Info("task exited", "task_id", t.id, "exit_code", rec.ExitCode, "signal", rec.Signal)
	return true
}

// WaitTask implements driver.Driver.
func (d *Driver) WaitTask(ctx context.Context, id string) (*driverpb.ExitResult, error) {
	t, err := d.lookup(id)
	if err != nil {
		return nil, err
	}
	if err := t.waitDone(ctx); err != nil {
		return nil, err
	}
	return proto.Clone(t.result).(*driverpb.ExitResult), nil
}

// StopTask implements driver.Driver. This is jobspec kill_signal and
// kill_timeout: the signal goes to the whole process group, and the group
// is SIGKILLed if the task outlives the timeout.
func (d *Driver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	t, err := d.lookup(id)
	if err != nil {
		return err
	}
	if signal == "" {
		signal = t.state.KillSignal
	}
	if signal == "" {
		signal = driver.DefaultKillSignal
	}
	sig, err := driver.ParseSignal(signal)
	if err != nil {
		return err
	}
	if t.exited() {
		return nil
	}
	d.logger.Debug("stopping task", "task_id", id, "signal", sig.String(), "timeout", timeout)
	if err := t.signalGroup(sig); err != nil {
		return err
	}
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-t.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
	if !t.exited() {
		d.logger.Info("task outlived its kill timeout; killing it", "task_id", id, "timeout", timeout)
		if err := t.killTree(); err != nil {
			return err
		}
	}
	return t.waitDone(ctx)
}

// DestroyTask implements driver.Driver.
func (d *Driver) DestroyTask(ctx context.Context, id string, force bool) error {
	t, err := d.lookup(id)
	if err != nil {
		return err
	}
	if !t.exited() {
		if !force {
			return fmt.Errorf("%w: destroy %q without force", driver.ErrTaskRunning, id)
		}
		if err := t.killTree(); err != nil {
			return err
		}
		if err := t.waitDone(ctx); err != nil {
			return err
		}
	}
	d.tasks.Remove(id, t)
	if err := os.Remove(t.state.ExitFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		d.logger.Warn("could not remove exit file", "task_id", id, "error", err)
	}
	d.logger.Debug("task destroyed", "task_id", id)
	return nil
}

// InspectTask implements driver.Driver.
func (d *Driver) InspectTask(_ context.Context, id string) (*driverpb.TaskStatus, error) {
	t, err := d.lookup(id)
	if err != nil {
		return nil, err
	}
	st := &driverpb.TaskStatus{
		Id:                t.id,
		State:             driverpb.TaskState_TASK_STATE_RUNNING,
		Pid:               int64(t.state.TaskPID),
		StartedAtUnixNano: t.startedAt.UnixNano(),
	}
	if t.exited() {
		st.State = driverpb.TaskState_TASK_STATE_EXITED
		st.CompletedAtUnixNano = t.completedAt.UnixNano()
		st.ExitResult = proto.Clone(t.result).(*driverpb.ExitResult)
	}
	return st, nil
}

// SignalTask implements driver.Driver. Unlike StopTask it signals only the
// main process, as `alloc signal` means the task itself (a reload signal
// should not hit every helper a wrapper script started).
func (d *Driver) SignalTask(_ context.Context, id string, signal string) error {
	t, err := d.lookup(id)
	if err != nil {
		return err
	}
	sig, err := driver.ParseSignal(signal)
	if err != nil {
		return err
	}
	if t.gone() {
		return fmt.Errorf("%w: %q has exited", driver.ErrTaskNotRunning, id)
	}
	return t.kill(t.state.TaskPID, sig)
}

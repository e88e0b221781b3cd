package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
)

// Task event texts of user-requested restarts and signals, as Nomad's.
const (
	userRestartReason = "User requested restart"
	userRestartMsg    = "User requested task to restart"
	userSignalReason  = "User requested signal"
	// DefaultUserSignal is sent when a signal request names none, as in
	// Nomad.
	DefaultUserSignal = "SIGKILL"
	maxSignalName     = 32
)

// errTaskNotRunning refuses to restart or signal a task that does not run.
func errTaskNotRunning(task string) error {
	return structs.NewError(structs.ErrInvalid, "Task %q not running", task)
}

// running reports whether the task's run is up (started, not stopping).
func (tr *taskRunner) running() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.handle != nil && tr.state.State == structs.TaskStateRunning && !tr.killed
}

// RestartAlloc restarts tasks of an allocation in place (PUT
// /v1/client/allocation/<id>/restart): the named task, or with no name
// every running task. allTasks restarts every running task as well; a
// task that has finished for good (a prestart hook, say) is not run
// again. A restart stops the task with its kill signal and timeout and
// starts it at once; it does not count against the restart policy.
//
// An unknown allocation or task is structs.ErrNotFound; a named task
// that does not run, or an allocation with no running task, is
// structs.ErrInvalid.
func (c *Client) RestartAlloc(ctx context.Context, allocID, task string, allTasks bool) error {
	if task != "" && allTasks {
		return structs.NewError(structs.ErrInvalid, "task name cannot be set when restarting all tasks (AllTasks)")
	}
	ar := c.runner(allocID)
	if ar == nil {
		return structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
	}
	trs, err := ar.lifecycleTargets(task)
	if err != nil {
		return err
	}
	var errs []error
	for _, tr := range trs {
		if err := tr.userRestart(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lifecycleTargets are the tasks a restart or signal reaches: the named
// one (which must run), or every running task.
func (ar *allocRunner) lifecycleTargets(task string) ([]*taskRunner, error) {
	if task != "" {
		tr := ar.task(task)
		if tr == nil {
			return nil, structs.NewError(structs.ErrNotFound, "Unknown task %q in allocation %q", task, ar.id)
		}
		if !tr.running() {
			return nil, errTaskNotRunning(task)
		}
		return []*taskRunner{tr}, nil
	}
	var out []*taskRunner
	for _, tr := range ar.tasks {
		if tr.running() {
			out = append(out, tr)
		}
	}
	if len(out) == 0 {
		return nil, structs.NewError(structs.ErrInvalid, "allocation %q has no running task", ar.id)
	}
	return out, nil
}

// userRestart stops the task's run for a restart that the restart policy
// does not count (the template restart's path, with its own reason). It
// returns once the driver has stopped the run.
func (tr *taskRunner) userRestart(ctx context.Context) error {
	drv, err := tr.ar.driver(tr.task.Driver)
	if err != nil {
		return err
	}
	tr.mu.Lock()
	tr.userRestartReq = true
	tr.mu.Unlock()
	tr.emit(restartSignaled())
	if !tr.claimTemplateStop(true) {
		// Stopped meanwhile, or a restart is under way already.
		tr.mu.Lock()
		tr.userRestartReq = false
		tr.mu.Unlock()
		return nil
	}
	tr.stopForTemplate(ctx, drv)
	return nil
}

func restartSignaled() *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskRestartSignal, userRestartMsg)
	ev.RestartReason = userRestartReason
	return ev
}

// restartReason is the reason recorded for a restart that the policy
// does not count: a user's, or a template's. It clears the user's
// request (run goroutine, from judge).
func (tr *taskRunner) restartReason() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.userRestartReq {
		tr.userRestartReq = false
		return userRestartReason
	}
	return "Template with change_mode restart re-rendered"
}

// SignalAlloc sends signal (a name such as "SIGUSR1"; empty is SIGKILL)
// to the named task of an allocation, or with no name to every running
// task (PUT /v1/client/allocation/<id>/signal). An unknown signal name
// is structs.ErrInvalid, before anything is sent.
func (c *Client) SignalAlloc(ctx context.Context, allocID, task, signal string) error {
	sig, err := CheckSignal(signal)
	if err != nil {
		return err
	}
	ar := c.runner(allocID)
	if ar == nil {
		return structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
	}
	trs, err := ar.lifecycleTargets(task)
	if err != nil {
		return err
	}
	var errs []error
	for _, tr := range trs {
		drv, err := ar.driver(tr.task.Driver)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ev := structs.NewTaskEvent(structs.TaskSignaling, "Task being sent signal "+sig)
		ev.Details["signal"] = sig
		ev.Details["reason"] = userSignalReason
		tr.emit(ev)
		if err := drv.SignalTask(ctx, tr.id, sig); err != nil {
			switch {
			case errors.Is(err, driver.ErrTaskNotRunning), errors.Is(err, driver.ErrTaskNotFound):
				err = errTaskNotRunning(tr.task.Name)
			case errors.Is(err, driver.ErrInvalidSignal):
				err = structs.NewError(structs.ErrInvalid, "signal %q: %v", sig, err)
			default:
				err = fmt.Errorf("signal task %q: %w", tr.task.Name, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckSignal validates a signal name ("SIGHUP", "hup" and "HUP" are the
// same), empty being SIGKILL, and returns its canonical name.
func CheckSignal(name string) (string, error) {
	if name == "" {
		return DefaultUserSignal, nil
	}
	if len(name) > maxSignalName {
		return "", structs.NewError(structs.ErrInvalid, "Signal: longer than %d bytes", maxSignalName)
	}
	canon := strings.ToUpper(name)
	if !strings.HasPrefix(canon, "SIG") {
		canon = "SIG" + canon
	}
	if _, err := driver.ParseSignal(canon); err != nil {
		return "", structs.NewError(structs.ErrInvalid, "Signal: unknown signal %q", name)
	}
	return canon, nil
}

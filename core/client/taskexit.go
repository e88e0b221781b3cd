package client

import (
	"context"
	"errors"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// The exit path of a run, crash-safe: the run's verdict (dead, or pending
// a restart) is persisted first, in the same write as the events that say
// how the run ended and while the state still holds the driver handle;
// only then is the driver task destroyed, and the handle dropped last.
//
// So the persisted state is always one of:
//   - running with a handle: the run may have ended; the next client
//     recovers the task and reads its exit from the driver, which keeps it
//     until the task is destroyed;
//   - dead, or pending a restart, with a handle: the verdict is final and
//     only the driver task's cleanup is left (a "leftover");
//   - dead, or pending, without a handle.
//
// No crash can therefore lose a recorded verdict: a finished task never
// runs again, and a restart decided before the crash still happens.

// verdict is what follows one run of the task.
type verdict struct {
	dead   bool
	failed bool
	events []*structs.TaskEvent
	delay  time.Duration // before the restart, when not dead
	reason string
}

// judge applies the kill request and the restart policy to a run's end.
// It records the attempt in the restart tracker; call it once per run.
func (tr *taskRunner) judge(res attemptResult) verdict {
	v := verdict{events: res.events}
	if res.killed || tr.killRequested() {
		v.dead = true
		if res.exit != nil {
			v.events = append(v.events, evKilled())
		}
		return v
	}
	if tr.takeCheckRestart() {
		out := taskOutcome{}
		return tr.policyVerdict(v, out)
	}
	if tr.takeTemplateRestart() && res.err == nil {
		// A template's change_mode restart, or a user's: at once, not counted
		// by the restart policy.
		v.reason = tr.restartReason()
		v.events = append(v.events, evRestarting(0, v.reason))
		return v
	}
	out := taskOutcome{Unrecoverable: res.unrecoverable}
	if res.err == nil {
		out.Success = res.exit.GetExitCode() == 0 && res.exit.GetSignal() == 0 && res.exit.GetErr() == ""
	}
	return tr.policyVerdict(v, out)
}

// policyVerdict completes v with the restart policy's decision on out.
func (tr *taskRunner) policyVerdict(v verdict, out taskOutcome) verdict {
	d := tr.restarts.next(out)
	switch d.Action {
	case actionDone:
		v.dead = true
	case actionFail:
		v.dead, v.failed = true, true
		v.events = append(v.events, evNotRestarting(d.Reason, true))
	default:
		v.delay, v.reason = d.Delay, d.Reason
		v.events = append(v.events, evRestarting(d.Delay, d.Reason))
	}
	return v
}

// settle persists v, then removes the run's driver task. It reports false
// when the runner must return at once (a shutdown or a simulated crash).
func (tr *taskRunner) settle(ctx context.Context, v verdict) bool {
	tr.update(func(ts *structs.TaskState) {
		for _, ev := range v.events {
			tr.appendEvent(ev)
		}
		if v.dead {
			tr.markDeadLocked(v.failed)
			return
		}
		ts.State = structs.TaskStatePending
		ts.Restarts++
		ts.LastRestart = time.Now()
	})
	if tr.crashAt(kpResultRecorded) {
		return false
	}
	return tr.forget(ctx, false)
}

// forget destroys the exited driver task behind the handle, so that the id
// can start anew, then drops the handle. recover first reattaches the
// task, for a driver process that may never have known it. It reports
// false when the runner must return at once; the persisted handle then
// tells the next client process to finish the cleanup.
func (tr *taskRunner) forget(ctx context.Context, recover bool) bool {
	tr.mu.Lock()
	h := tr.handle
	tr.mu.Unlock()
	if h == nil {
		return true
	}
	tr.destroyDriverTask(ctx, h, recover)
	if ctx.Err() != nil || tr.crashAt(kpDriverDestroyed) {
		return false
	}
	tr.update(func(*structs.TaskState) { tr.handle = nil })
	return !tr.crashAt(kpHandleCleared)
}

func (tr *taskRunner) destroyDriverTask(ctx context.Context, h *driverpb.TaskHandle, recover bool) {
	drv, err := tr.ar.driver(tr.task.Driver)
	if err != nil {
		tr.logger.Warn("cannot destroy driver task", "error", err)
		return
	}
	if recover {
		// A task the driver cannot find is already gone; destroying it
		// then fails with not found, which is the wanted end.
		_ = drv.RecoverTask(ctx, h)
	}
	if err := drv.DestroyTask(ctx, tr.id, true); err != nil && !errors.Is(err, driver.ErrTaskNotFound) && ctx.Err() == nil {
		tr.logger.Warn("failed to destroy driver task", "error", err)
	}
}

// leftover reports whether the handle is that of a run whose verdict is
// already persisted: only a running task's handle is live.
func (tr *taskRunner) leftover() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.handle != nil && tr.state.State != structs.TaskStateRunning
}

// dropLeftover cleans up a restored leftover driver task; it reports
// false when the runner must return at once.
func (tr *taskRunner) dropLeftover(ctx context.Context) bool {
	if !tr.leftover() {
		return true
	}
	tr.logger.Info("destroying the driver task of a run that ended before the client restarted")
	return tr.forget(ctx, true)
}

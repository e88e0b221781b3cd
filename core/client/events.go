package client

import (
	"fmt"
	"strconv"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// maxTaskEvents is how many events a task state keeps, oldest dropped
// first, as Nomad does: a crash-looping service must not grow its alloc
// without bound.
const maxTaskEvents = 10

// Task event constructors. Messages are Nomad's wording so that Nomad's
// tooling and users' habits carry over.

func evReceived() *structs.TaskEvent {
	return structs.NewTaskEvent(structs.TaskReceived, "Task received by client")
}

func evSetup() *structs.TaskEvent {
	return structs.NewTaskEvent(structs.TaskSetup, "Building Task Directory")
}

func evSetupFailure(err error) *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskSetupFailure, err.Error())
	ev.SetupError = err.Error()
	ev.FailsTask = true
	return ev
}

func evStarted() *structs.TaskEvent {
	return structs.NewTaskEvent(structs.TaskStarted, "Task started by client")
}

func evTerminated(res *driverpb.ExitResult) *structs.TaskEvent {
	msg := fmt.Sprintf("Exit Code: %d", res.GetExitCode())
	if res.GetSignal() != 0 {
		msg += fmt.Sprintf(", Signal: %d", res.GetSignal())
	}
	if res.GetOomKilled() {
		msg += ", OOM Killed"
	}
	if res.GetErr() != "" {
		msg += ", Exit Message: " + strconv.Quote(res.GetErr())
	}
	ev := structs.NewTaskEvent(structs.TaskTerminated, msg)
	ev.ExitCode = int(res.GetExitCode())
	ev.Signal = int(res.GetSignal())
	ev.Details["exit_code"] = strconv.Itoa(ev.ExitCode)
	ev.Details["signal"] = strconv.Itoa(ev.Signal)
	ev.Details["oom_killed"] = strconv.FormatBool(res.GetOomKilled())
	if res.GetErr() != "" {
		ev.Details["exit_message"] = res.GetErr()
	}
	return ev
}

func evRestarting(delay time.Duration, reason string) *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskRestarting, fmt.Sprintf("Task restarting in %v", delay))
	ev.StartDelay = int64(delay)
	ev.RestartReason = reason
	ev.Details["start_delay"] = strconv.FormatInt(int64(delay), 10)
	ev.Details["restart_reason"] = reason
	return ev
}

func evNotRestarting(reason string, failsTask bool) *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskNotRestarting, reason)
	ev.RestartReason = reason
	ev.FailsTask = failsTask
	ev.Details["restart_reason"] = reason
	return ev
}

func evKilling(timeout time.Duration) *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskKilling, fmt.Sprintf("Sent interrupt. Waiting %v before force killing", timeout))
	ev.KillTimeout = timeout
	ev.Details["kill_timeout"] = timeout.String()
	return ev
}

func evKilled() *structs.TaskEvent {
	return structs.NewTaskEvent(structs.TaskKilled, "Task successfully killed")
}

func evDriverFailure(err error) *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskDriverFailure, err.Error())
	ev.DriverError = err.Error()
	ev.Details["driver_error"] = err.Error()
	return ev
}

func evRestoreFailed(err error) *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskRestoreFailed, err.Error())
	ev.DriverError = err.Error()
	return ev
}

func evSiblingFailed(sibling string) *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskSiblingFailed, fmt.Sprintf("Task's sibling %q failed", sibling))
	ev.Details["failed_sibling"] = sibling
	ev.KillReason = ev.Message
	return ev
}

func evLeaderDead() *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskLeaderDead, "Leader Task in Group dead")
	ev.KillReason = ev.Message
	return ev
}

func evMainDead() *structs.TaskEvent {
	ev := structs.NewTaskEvent(structs.TaskMainDead, "Main tasks in the group died")
	ev.KillReason = ev.Message
	return ev
}

// copyTaskState deep-copies a task state for a report or a snapshot;
// events are immutable once appended, so they are shared.
func copyTaskState(ts *structs.TaskState) *structs.TaskState {
	if ts == nil {
		return nil
	}
	c := *ts
	c.Events = append([]*structs.TaskEvent(nil), ts.Events...)
	return &c
}

// taskWaitingShutdownDelay is Nomad's event of a task that waits out its
// shutdown_delay before it is killed.
const taskWaitingShutdownDelay = "Waiting for shutdown delay"

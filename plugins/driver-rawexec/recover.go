package rawexec

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"time"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// stateVersion is the format of handleState; bump it on incompatible change.
const stateVersion = 1

// handleState is TaskHandle.state for raw_exec: what a new driver process
// needs to find the task again. Start ticks (the kernel's process start
// time) and the boot id tell a live process from a recycled pid.
type handleState struct {
	Version        int    `json:"version"`
	ShimPID        int    `json:"shim_pid"`
	ShimStartTicks uint64 `json:"shim_start_ticks,omitempty"`
	TaskPID        int    `json:"task_pid"`
	TaskStartTicks uint64 `json:"task_start_ticks,omitempty"`
	BootID         string `json:"boot_id,omitempty"`
	ExitFile       string `json:"exit_file"`
	KillSignal     string `json:"kill_signal,omitempty"`
	// Cgroup is the task's cgroup; nil for a task run without one (and
	// for tasks of drivers before cgroups).
	Cgroup *taskCgroup `json:"cgroup,omitempty"`
}

func encodeState(st handleState) ([]byte, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode task handle state: %w", err)
	}
	return raw, nil
}

func decodeState(raw []byte) (handleState, error) {
	var st handleState
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("%w: task handle state: %v", driver.ErrInvalidConfig, err)
	}
	if st.Version != stateVersion {
		return st, fmt.Errorf("%w: task handle state version %d, want %d", driver.ErrInvalidConfig, st.Version, stateVersion)
	}
	if st.TaskPID <= 0 || st.ShimPID <= 0 || st.ExitFile == "" {
		return st, fmt.Errorf("%w: task handle state lacks pids or exit file", driver.ErrInvalidConfig)
	}
	return st, nil
}

// RecoverTask implements driver.Driver. The task supervisor wrote or will
// write the exit file; the task's exit is read from there. The supervisor
// is not this process's child, so the driver polls for that file and for
// the supervisor's liveness. (ShimPID in the handle is the supervisor's
// pid; a handle from a driver that ran a shim per task recovers the same
// way.)
func (d *Driver) RecoverTask(_ context.Context, h *driverpb.TaskHandle) error {
	if h == nil || h.GetId() == "" {
		return fmt.Errorf("%w: task handle without id", driver.ErrInvalidConfig)
	}
	tracked, release, err := d.reserve(h.GetId())
	if err != nil {
		return err
	}
	if tracked {
		return nil
	}
	defer release()
	st, err := decodeState(h.GetState())
	if err != nil {
		return err
	}
	t := newTask(h.GetId(), st, time.Unix(0, h.GetStartedAtUnixNano()))

	if d.finishFromExitFile(t) {
		d.track(t, nil)
		return nil
	}
	if st.BootID != "" && st.BootID != bootID() {
		return fmt.Errorf("%w: %q: the node rebooted since the task started and it left no exit result",
			driver.ErrTaskNotFound, t.id)
	}
	if procAlive(st.ShimPID, st.ShimStartTicks) {
		d.track(t, func() { d.watchRecovered(t) })
		d.logger.Info("task recovered", "task_id", t.id, "pid", st.TaskPID, "shim_pid", st.ShimPID)
		return nil
	}
	// The supervisor may have written its result after the first look.
	if d.finishFromExitFile(t) {
		d.track(t, nil)
		return nil
	}
	if procAlive(st.TaskPID, st.TaskStartTicks) {
		d.logger.Warn("task recovered without its supervisor; its exit status will be lost",
			"task_id", t.id, "pid", st.TaskPID)
		d.track(t, func() { d.watchOrphan(t) })
		return nil
	}
	// Nobody is left to remove its cgroup (both were killed at once).
	d.destroyCgroup(t.id, st.Cgroup)
	return fmt.Errorf("%w: %q: neither its supervisor (pid %d) nor its process (pid %d) runs, and it left no exit result",
		driver.ErrTaskNotFound, t.id, st.ShimPID, st.TaskPID)
}

// exitFileGrace is how long a supervisor that lives on (for other tasks)
// gets to record a task's exit after the task's process is gone: its
// cleanup (the process group, the cgroup, draining the logs) is bounded
// well below it.
const exitFileGrace = time.Minute

// watchRecovered polls for the exit file while the supervisor lives. This
// is the one place that polls: a process that is not our child cannot be
// waited on.
func (d *Driver) watchRecovered(t *task) {
	ticker := time.NewTicker(d.pollInterval)
	defer ticker.Stop()
	var taskGone time.Time
	for {
		// Liveness first: a supervisor seen dead after a missing file
		// could have written the file in between.
		supAlive := procAlive(t.state.ShimPID, t.state.ShimStartTicks)
		taskAlive := procAlive(t.state.TaskPID, t.state.TaskStartTicks)
		if d.finishFromExitFile(t) {
			return
		}
		if !supAlive {
			break
		}
		// The supervisor serves other tasks too: its living on does not
		// mean it will still record this one's exit.
		if !taskAlive && taskGone.IsZero() {
			taskGone = time.Now()
		}
		if !taskGone.IsZero() && time.Since(taskGone) > exitFileGrace {
			break
		}
		<-ticker.C
	}
	d.logger.Warn("task supervisor recorded no exit result; watching the task directly", "task_id", t.id)
	d.watchOrphan(t)
}

// watchOrphan watches a task whose supervisor died before it (or did not
// record its exit): the task may keep running, but nobody can collect its
// exit status any more.
func (d *Driver) watchOrphan(t *task) {
	ticker := time.NewTicker(d.pollInterval)
	defer ticker.Stop()
	for procAlive(t.state.TaskPID, t.state.TaskStartTicks) {
		<-ticker.C
	}
	// Do what the supervisor would have: end the rest of the task's group and
	// of its cgroup.
	_ = t.signalGroup(syscall.SIGKILL)
	d.destroyCgroup(t.id, t.state.Cgroup)
	t.finish(&exitRecord{
		ExitCode:    -1,
		Err:         "exit status lost: the task's raw_exec supervisor died before the task",
		CompletedAt: time.Now().UnixNano(),
	})
	d.logger.Warn("task exited; exit status lost", "task_id", t.id)
}

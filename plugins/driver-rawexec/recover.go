package rawexec

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
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
	// TaskLock: the supervisor (ShimPID) serves many tasks and holds the
	// task directory's lock while it works on this one (tasklock.go).
	// Unset in handles of drivers that ran a shim per task, whose life
	// was the task's.
	TaskLock bool `json:"task_lock,omitempty"`
}

// supervised reports whether the task's supervisor still works on it: it
// has yet to record the task's exit.
func (t *task) supervised() bool {
	if t.state.TaskLock {
		return taskDirLocked(filepath.Dir(t.state.ExitFile))
	}
	return procAlive(t.state.ShimPID, t.state.ShimStartTicks)
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
	if t.supervised() {
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

// watchRecovered polls for the exit file while the supervisor works on
// the task. This is the one place that polls: a process that is not our
// child cannot be waited on.
func (d *Driver) watchRecovered(t *task) {
	ticker := time.NewTicker(d.pollInterval)
	defer ticker.Stop()
	for {
		// The supervisor first: one seen done after a missing file could
		// have written the file in between.
		supervised := t.supervised()
		if d.finishFromExitFile(t) {
			return
		}
		if !supervised {
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

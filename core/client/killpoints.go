package client

// killPoint names a step boundary of a task runner's exit path, between
// two writes to the persisted state (or the driver). A crash can happen at
// any of them; tests inject one through runnerConfig.CrashAt to prove
// that recovery from each boundary neither reruns a finished task nor
// loses a pending restart.
type killPoint string

const (
	// kpExited: the driver reported the exit; nothing of it is recorded.
	kpExited killPoint = "exited"
	// kpResultRecorded: the run's result is persisted.
	kpResultRecorded killPoint = "result-recorded"
	// kpDriverDestroyed: the driver task is destroyed; the persisted
	// state still holds its handle.
	kpDriverDestroyed killPoint = "driver-task-destroyed"
	// kpHandleCleared: the persisted state no longer holds the handle.
	kpHandleCleared killPoint = "handle-cleared"
)

// exitKillPoints lists every kill point of the exit path, in order.
var exitKillPoints = []killPoint{kpExited, kpResultRecorded, kpDriverDestroyed, kpHandleCleared}

// crashAt reports whether the runner must crash at p. A crash abandons
// the whole alloc runner as a killed client process would: from then on
// nothing is reported or persisted, and every task runner returns as at
// a shutdown, leaving tasks and state to the next client process.
func (tr *taskRunner) crashAt(p killPoint) bool {
	ar := tr.ar
	if ar.cfg.CrashAt == nil || !ar.cfg.CrashAt(ar.id, tr.task.Name, p) {
		return false
	}
	ar.mu.Lock()
	ar.crashed = true
	ar.mu.Unlock()
	ar.cancel()
	return true
}

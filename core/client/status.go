package client

import "github.com/drover-org/drover/core/structs"

// Client descriptions, as Nomad words them.
const (
	descFailed    = "Failed tasks"
	descRunning   = "Tasks are running"
	descPending   = "No tasks have started"
	descComplete  = "All tasks have completed"
	descSetupFail = "Failed to build the allocation directory"
)

// clientStatus derives an allocation's client status from its task states
// (NOMAD-BEHAVIOR §1.4): any failed task fails the alloc; else any running
// task makes it running; else any pending task keeps it pending; else every
// task is dead and fine, and the alloc is complete. An alloc without tasks
// is pending: nothing has run yet.
func clientStatus(states map[string]*structs.TaskState) (status, description string) {
	if len(states) == 0 {
		return structs.AllocClientStatusPending, descPending
	}
	var running, pending bool
	for _, ts := range states {
		switch {
		case ts.Failed:
			return structs.AllocClientStatusFailed, descFailed
		case ts.State == structs.TaskStateRunning:
			running = true
		case ts.State == structs.TaskStatePending, ts.State == "":
			pending = true
		}
	}
	switch {
	case running:
		return structs.AllocClientStatusRunning, descRunning
	case pending:
		return structs.AllocClientStatusPending, descPending
	}
	return structs.AllocClientStatusComplete, descComplete
}

// isTerminalClientStatus reports whether the server must learn of this
// status without delay: it frees the alloc's resources and can unblock
// scheduling, so it is never held back by batching.
func isTerminalClientStatus(s string) bool {
	switch s {
	case structs.AllocClientStatusComplete, structs.AllocClientStatusFailed, structs.AllocClientStatusLost:
		return true
	}
	return false
}

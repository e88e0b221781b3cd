package server

import "github.com/drover-org/drover/core/structs"

// allocRunningEval returns the eval of the job of an alloc that starts to
// run with this update (pending to running, still desired), when its job
// type declares EvalOnAllocRunning; nil otherwise, or when the job already
// has one in this update (seen). A scheduler that paces destructive
// updates or drain migrations (max_parallel) learns from it that a
// replacement runs and the next one may go.
func (ep Nodes) allocRunningEval(stored, update *structs.Allocation, seen map[string]bool) (*structs.Evaluation, error) {
	s := ep.srv
	if update.ClientStatus != structs.AllocClientStatusRunning || stored.ClientStatus != structs.AllocClientStatusPending ||
		stored.ServerTerminalStatus() || !allocBehavior(stored).EvalOnAllocRunning {
		return nil, nil
	}
	key := "running/" + stored.Namespace + "/" + stored.JobID
	if seen[key] {
		return nil, nil
	}
	seen[key] = true
	cur, err := s.State().JobByID(nil, stored.Namespace, stored.JobID)
	if err != nil || cur == nil || cur.Stop {
		return nil, err
	}
	ev := s.newEval(cur, structs.EvalTriggerRollingUpdate)
	ev.JobModifyIndex = cur.JobModifyIndex
	ev.NodeID = stored.NodeID
	return ev, nil
}

// migrationHealthyEval returns the eval of the job of an alloc whose client
// reports it healthy with this update, in a deployment or not, when it
// replaces an alloc a drain migrated and its job type declares
// EvalOnAllocRunning; nil otherwise, or when the job already has one in
// this update (seen). With a migrate block a scheduler holds a drain
// migration in flight until its replacement is healthy (health judged by
// the client per the block): this tells it the next one may go.
func (ep Nodes) migrationHealthyEval(stored, update *structs.Allocation, seen map[string]bool) (*structs.Evaluation, error) {
	s := ep.srv
	if stored.PreviousAllocation == "" || stored.DeploymentStatus.HasHealth() ||
		!update.DeploymentStatus.IsHealthy() || stored.ServerTerminalStatus() || !allocBehavior(stored).EvalOnAllocRunning {
		return nil, nil
	}
	// In a deployment too: its watcher evaluates the job on health changes
	// only while the deployment is active, and a deployment that completes
	// with this very update (the replacement was its last healthy alloc)
	// would leave the drain's next migration waiting for ever.
	key := "running/" + stored.Namespace + "/" + stored.JobID
	if seen[key] {
		return nil, nil
	}
	prev, err := s.State().AllocByID(nil, stored.PreviousAllocation)
	if err != nil || prev == nil || !prev.DesiredTransition.ShouldMigrate() {
		return nil, err
	}
	seen[key] = true
	cur, err := s.State().JobByID(nil, stored.Namespace, stored.JobID)
	if err != nil || cur == nil || cur.Stop {
		return nil, err
	}
	ev := s.newEval(cur, structs.EvalTriggerNodeDrain)
	ev.JobModifyIndex = cur.JobModifyIndex
	ev.NodeID = prev.NodeID
	return ev, nil
}

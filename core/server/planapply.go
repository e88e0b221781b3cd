package server

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// planApplier is the leader's single plan-applying loop (§9.3): each plan
// is checked node by node against the latest state and what fits is
// committed through Raft; a rejected node makes the commit partial.
func (s *Server) planApplier(ctx context.Context) {
	for {
		pending, err := s.planQueue.Dequeue(ctx)
		if err != nil {
			return
		}
		start := time.Now()
		result, err := s.applyPlan(ctx, pending.Plan)
		rejected := 0
		if result != nil {
			rejected = len(result.RejectedNodes)
		}
		s.cfg.Metrics.PlanApplied(time.Since(start), rejected)
		pending.Respond(result, err)
	}
}

func (s *Server) applyPlan(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, error) {
	snap, err := s.snapshotMinIndex(ctx, plan.SnapshotIndex)
	if err != nil {
		return nil, err
	}
	// A purged job's deregister eval plans only stops, which need no job;
	// placements do, as the allocs they create carry it.
	if plan.Job == nil && len(plan.NodeAllocation) > 0 {
		return nil, fmt.Errorf("plan for eval %s has no job", plan.EvalID)
	}
	result, reasons := evaluatePlanReasons(snap, plan)
	for node, why := range reasons {
		s.logger.Debug("plan rejected on node", "eval_id", plan.EvalID, "node_id", node, "reason", why)
	}
	// The deployment part commits with whatever of the plan commits,
	// unless an all-at-once plan was refused.
	deploy := (plan.Deployment != nil || len(plan.DeploymentUpdates) > 0) && !(plan.AllAtOnce && len(result.RejectedNodes) > 0)
	if result.IsNoOp() && !deploy {
		return result, nil
	}
	req := &structs.ApplyPlanResultsRequest{
		Job: plan.Job, EvalID: plan.EvalID, UpdatedAt: s.cfg.Now().UnixNano(),
		FollowupEvals: result.FollowupEvals, AllocFollowups: result.AllocFollowups,
	}
	if deploy {
		req.Deployment, req.DeploymentUpdates = plan.Deployment, plan.DeploymentUpdates
	}
	for _, allocs := range result.NodeUpdate {
		req.AllocsStopped = append(req.AllocsStopped, allocs...)
	}
	for _, allocs := range result.NodeAllocation {
		for _, a := range allocs {
			if a.Metrics != nil && a.CreateIndex == 0 {
				if req.PlacementMetric == nil {
					req.PlacementMetric = a.Metrics
				}
				if a.Metrics == req.PlacementMetric {
					c := *a
					c.Metrics = nil
					a = &c
				}
			}
			req.AllocsUpdated = append(req.AllocsUpdated, a)
		}
	}
	preemptedJobs := map[structs.NamespacedID]bool{}
	for _, allocs := range result.NodePreemptions {
		for _, a := range allocs {
			req.AllocsPreempted = append(req.AllocsPreempted, a)
			preemptedJobs[structs.NamespacedID{ID: a.JobID, Namespace: a.Namespace}] = true
		}
	}
	for id := range preemptedJobs {
		job, err := snap.JobByID(nil, id.Namespace, id.ID)
		if err != nil {
			return nil, err
		}
		if job == nil || job.Stop {
			continue
		}
		ev := s.newEval(job, structs.EvalTriggerPreemption)
		ev.JobModifyIndex = job.JobModifyIndex
		req.PreemptionEvals = append(req.PreemptionEvals, ev)
	}
	index, err := s.raftApply(structs.ApplyPlanResultsRequestType, req)
	if err != nil {
		return nil, err
	}
	result.AllocIndex = index
	if result.RefreshIndex != 0 && index > result.RefreshIndex {
		result.RefreshIndex = index
	}
	return result, nil
}

// evaluatePlan decides, node by node, what of the plan may commit.
func evaluatePlan(snap *state.StateSnapshot, plan *structs.Plan) *structs.PlanResult {
	r, _ := evaluatePlanReasons(snap, plan)
	return r
}

// evaluatePlanReasons is evaluatePlan that also says why each rejected
// node was rejected.
func evaluatePlanReasons(snap *state.StateSnapshot, plan *structs.Plan) (*structs.PlanResult, map[string]string) {
	result := &structs.PlanResult{
		NodeUpdate:      map[string][]*structs.Allocation{},
		NodeAllocation:  map[string][]*structs.Allocation{},
		NodePreemptions: map[string][]*structs.Allocation{},
	}
	nodes := map[string]bool{}
	for n := range plan.NodeUpdate {
		nodes[n] = true
	}
	for n := range plan.NodeAllocation {
		nodes[n] = true
	}
	// Nodes are checked in parallel (they are independent reads of one
	// snapshot); a plan of a node scheduler touches every node.
	ids := make([]string, 0, len(nodes))
	for n := range nodes {
		ids = append(ids, n)
	}
	fits := make([]bool, len(ids))
	why := make([]string, len(ids))
	workers := runtime.GOMAXPROCS(0)
	if workers > len(ids) {
		workers = len(ids)
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(ids); i += workers {
				fits[i], why[i] = evaluateNodePlan(snap, plan, ids[i])
			}
		}(w)
	}
	wg.Wait()
	partial := false
	reasons := map[string]string{}
	for i, nodeID := range ids {
		var keep []*structs.Allocation
		if fits[i] {
			var err error
			if keep, err = livePreemptions(snap, plan.NodePreemptions[nodeID]); err != nil {
				// Like any failed read of the node's state: reject it.
				fits[i], why[i] = false, err.Error()
			}
		}
		if !fits[i] {
			partial = true
			reasons[nodeID] = why[i]
			result.RejectedNodes = append(result.RejectedNodes, nodeID)
			if plan.AllAtOnce {
				return &structs.PlanResult{RefreshIndex: maxIndex(snap), RejectedNodes: result.RejectedNodes}, reasons
			}
			continue
		}
		if u := plan.NodeUpdate[nodeID]; len(u) > 0 {
			result.NodeUpdate[nodeID] = u
		}
		if a := plan.NodeAllocation[nodeID]; len(a) > 0 {
			result.NodeAllocation[nodeID] = a
		}
		if len(keep) > 0 {
			result.NodePreemptions[nodeID] = keep
		}
	}
	if partial {
		result.RefreshIndex = maxIndex(snap)
	}
	// Follow-ups reserve nothing on a node: they commit with whatever
	// part of the plan does.
	result.FollowupEvals, result.AllocFollowups = plan.FollowupEvals, plan.AllocFollowups
	return result, reasons
}

// livePreemptions drops preemptions of allocs that are gone or already
// terminal.
func livePreemptions(snap *state.StateSnapshot, preempt []*structs.Allocation) ([]*structs.Allocation, error) {
	var keep []*structs.Allocation
	for _, p := range preempt {
		cur, err := snap.AllocByID(nil, p.ID)
		if err != nil {
			return nil, err
		}
		if cur != nil && !cur.TerminalStatus() {
			keep = append(keep, p)
		}
	}
	return keep, nil
}

func maxIndex(snap *state.StateSnapshot) uint64 {
	a, n := snap.Index("allocs"), snap.Index("nodes")
	if a > n {
		return a
	}
	return n
}

// evaluateNodePlan checks one node of a plan (§9.3 evaluateNodePlan).
func evaluateNodePlan(snap *state.StateSnapshot, plan *structs.Plan, nodeID string) (bool, string) {
	placing := plan.NodeAllocation[nodeID]
	if len(placing) == 0 {
		return true, ""
	}
	node, err := snap.NodeByID(nil, nodeID)
	if err != nil {
		return false, err.Error()
	}
	if node == nil {
		return false, "node does not exist"
	}
	switch node.Status {
	case structs.NodeStatusDisconnected, structs.NodeStatusDown:
		for _, a := range placing {
			if a.ClientStatus != structs.AllocClientStatusUnknown && a.ClientStatus != structs.AllocClientStatusLost {
				return false, "node is " + node.Status
			}
		}
		return true, ""
	case structs.NodeStatusReady:
	default:
		return false, "node is not ready for placements"
	}
	existing, err := snap.AllocsByNodeTerminal(nil, nodeID, false)
	if err != nil {
		return false, err.Error()
	}
	if node.SchedulingEligibility == structs.NodeSchedulingIneligible {
		live := map[string]bool{}
		for _, a := range existing {
			live[a.ID] = true
		}
		for _, a := range placing {
			if !live[a.ID] {
				return false, "node is not eligible"
			}
		}
	}
	remove := map[string]bool{}
	for _, a := range plan.NodeUpdate[nodeID] {
		remove[a.ID] = true
	}
	for _, a := range plan.NodePreemptions[nodeID] {
		remove[a.ID] = true
	}
	for _, a := range placing {
		remove[a.ID] = true
	}
	var used structs.Resources
	add := func(r structs.Resources) {
		used.CPU += r.CPU
		used.MemoryMB += r.MemoryMB
		used.DiskMB += r.DiskMB
	}
	for _, a := range existing {
		if remove[a.ID] || a.TerminalStatus() {
			continue
		}
		add(a.ComparableResources())
	}
	for _, a := range placing {
		add(a.ComparableResources())
	}
	if why := portCollision(node, existing, remove, placing); why != "" {
		return false, why
	}
	capa := node.Capacity()
	switch {
	case used.CPU > capa.CPU:
		return false, "cpu exhausted"
	case used.MemoryMB > capa.MemoryMB:
		return false, "memory exhausted"
	case capa.DiskMB > 0 && used.DiskMB > capa.DiskMB:
		return false, "disk exhausted"
	}
	return true, ""
}

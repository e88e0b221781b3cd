// Package planapply is the leader's plan applier (§9.3): it takes the
// plans scheduler workers submit through the plan queue, one at a time,
// decides which part of each still fits the latest state and commits that
// part through Raft.
//
// The decision (Evaluate) is a function of one state snapshot and the
// plan: it checks the plan node by node, as Nomad's evaluatePlan, and
// writes nothing. The commit (Applier.Apply) turns the decision into one
// ApplyPlanResults Raft entry. The applier reaches the server only through
// Config: a snapshot at a minimum index, a Raft commit, an eval
// constructor and a clock.
package planapply

import (
	"runtime"
	"sync"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// State is what deciding a plan reads: one consistent snapshot (a
// *state.StateSnapshot). Returned objects belong to the store and are not
// modified. A nil object with a nil error means "not found".
type State interface {
	NodeByID(ws memdb.WatchSet, id string) (*structs.Node, error)
	AllocByID(ws memdb.WatchSet, id string) (*structs.Allocation, error)
	AllocsByNodeTerminal(ws memdb.WatchSet, nodeID string, terminal bool) ([]*structs.Allocation, error)
	// Index is the index of the table's latest write.
	Index(table string) uint64
}

// Evaluate decides, node by node, which part of the plan still fits snap
// and may commit. A node fits when it exists, may take the placements
// (ready and eligible, or down/disconnected and given only lost/unknown
// updates) and holds every placement within its capacity and ports once
// the plan's stops and preemptions are gone. A node that does not fit is
// listed in RejectedNodes, with the reason in the returned map, and the
// result's RefreshIndex tells the scheduler which state to retry against;
// for an all-at-once plan one rejected node rejects the whole plan.
// Preemptions of allocs already gone or terminal are dropped; follow-up
// evals commit with whatever part of the plan does.
func Evaluate(snap State, plan *structs.Plan) (*structs.PlanResult, map[string]string) {
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
				fits[i], why[i] = evaluateNode(snap, plan, ids[i])
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
				return &structs.PlanResult{RefreshIndex: refreshIndex(snap), RejectedNodes: result.RejectedNodes}, reasons
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
		result.RefreshIndex = refreshIndex(snap)
	}
	// Follow-ups reserve nothing on a node: they commit with whatever
	// part of the plan does.
	result.FollowupEvals, result.AllocFollowups = plan.FollowupEvals, plan.AllocFollowups
	return result, reasons
}

// livePreemptions drops preemptions of allocs that are gone or already
// terminal.
func livePreemptions(snap State, preempt []*structs.Allocation) ([]*structs.Allocation, error) {
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

// refreshIndex is the state a scheduler must see to retry a rejected
// part: the latest write to allocs or nodes.
func refreshIndex(snap State) uint64 {
	a, n := snap.Index("allocs"), snap.Index("nodes")
	if a > n {
		return a
	}
	return n
}

// evaluateNode checks one node of a plan (§9.3 evaluateNodePlan) and says
// why it does not fit.
func evaluateNode(snap State, plan *structs.Plan, nodeID string) (bool, string) {
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

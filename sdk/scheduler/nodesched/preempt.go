package nodesched

import (
	"cmp"
	"slices"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// PriorityDelta is how much lower a job's priority must be for its
// allocations to be preempted: only allocs of jobs at least this many
// priority points below the placing job are candidates.
const PriorityDelta = 10

// pickVictims chooses allocations of other jobs on node to evict so that
// ask fits. It prefers the lowest priority, then the newest alloc (the one
// that has done the least work), and evicts just enough: after the greedy
// pick, any victim whose eviction turns out unnecessary is spared again.
// skip excludes allocs already preempted by this plan.
func pickVictims(node *schedulerpb.Node, priority int32, used, ask feasible.Vec, skip func(string) bool) []*schedulerpb.NodeAlloc {
	var cands []*schedulerpb.NodeAlloc
	for _, o := range node.GetOthers() {
		if priority-o.GetJobPriority() >= PriorityDelta && !skip(o.GetId()) {
			cands = append(cands, o)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	slices.SortFunc(cands, func(a, b *schedulerpb.NodeAlloc) int {
		return cmp.Or(
			cmp.Compare(a.GetJobPriority(), b.GetJobPriority()),
			cmp.Compare(b.GetCreateIndex(), a.GetCreateIndex()),
			cmp.Compare(a.GetId(), b.GetId()),
		)
	})
	capacity := feasible.VecOf(node.GetCapacity())
	var (
		chosen []*schedulerpb.NodeAlloc
		freed  feasible.Vec
		fits   bool
	)
	for _, c := range cands {
		chosen = append(chosen, c)
		freed = freed.Add(feasible.VecOf(c.GetResources()))
		if fits, _ = feasible.Fits(capacity, used.Sub(freed), ask); fits {
			break
		}
	}
	if !fits {
		return nil
	}
	// Spare the most valuable victims first (picked last) if the rest
	// already free enough.
	for i := len(chosen) - 1; i >= 0; i-- {
		without := freed.Sub(feasible.VecOf(chosen[i].GetResources()))
		if ok, _ := feasible.Fits(capacity, used.Sub(without), ask); ok {
			freed = without
			chosen = slices.Delete(chosen, i, i+1)
		}
	}
	return chosen
}

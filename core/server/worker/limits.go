package worker

import (
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// placementCap is what limited one attempt's new placements.
type placementCap struct {
	limit   int  // new placements allowed
	byJob   bool // MaxAllocsPerJob, not MaxAllocsPerEval, set limit
	dropped int  // placements of the plugin's plan the core dropped
	placed  int  // new placements kept
}

// capPlacements enforces the allocation limits on a plugin's plan, whether
// or not the plugin honoured ScheduleRequest.max_placements: new
// placements beyond MaxAllocsPerEval, or beyond what MaxAllocsPerJob
// leaves the job once this plan's stops are counted, are dropped with the
// preemptions made for them, and counted queued. In-place updates and
// stops are never limited.
func (w *worker) capPlacements(req *pb.ScheduleRequest, resp *pb.ScheduleResponse) placementCap {
	cfg := &w.p.cfg
	p := resp.GetPlan()
	c := placementCap{limit: cfg.MaxAllocsPerEval}
	if p == nil {
		return c
	}
	stopping := make(map[string]bool, len(p.NodeUpdate))
	for _, st := range p.NodeUpdate {
		stopping[st.AllocId] = true
	}
	have := 0
	for _, a := range req.GetAllocs() {
		if a.GetDesiredStatus() == structs.AllocDesiredStatusRun && !stopping[a.GetId()] {
			have++
		}
	}
	if budget := cfg.MaxAllocsPerJob - have; budget < c.limit {
		c.limit, c.byJob = max(budget, 0), true
	}
	// The plugin's count of a group it reported includes its placements
	// (the core counts them down as they commit), so dropping one leaves
	// it queued; a group it did not report has its dropped ones counted.
	reported := make(map[string]bool, len(resp.QueuedAllocations))
	for tg := range resp.QueuedAllocations {
		reported[tg] = true
	}
	var dropped map[string]bool
	kept := p.NodeAllocation[:0]
	for _, pa := range p.NodeAllocation {
		if pa.InPlace || c.placed < c.limit {
			if !pa.InPlace {
				c.placed++
			}
			kept = append(kept, pa)
			continue
		}
		if dropped == nil {
			dropped = map[string]bool{}
		}
		dropped[pa.Id] = true
		if !reported[pa.TaskGroup] {
			if resp.QueuedAllocations == nil {
				resp.QueuedAllocations = map[string]int32{}
			}
			resp.QueuedAllocations[pa.TaskGroup]++
		}
	}
	if dropped == nil {
		return c
	}
	c.dropped = len(dropped)
	clear(p.NodeAllocation[len(kept):])
	p.NodeAllocation = kept
	keptPre := p.NodePreemptions[:0]
	for _, pr := range p.NodePreemptions {
		if !dropped[pr.PreemptedByAllocation] {
			keptPre = append(keptPre, pr)
		}
	}
	clear(p.NodePreemptions[len(keptPre):])
	p.NodePreemptions = keptPre
	return c
}

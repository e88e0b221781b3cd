package nodesched

import (
	"slices"
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
	"github.com/drover-org/drover/sdk/scheduler/preempt"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
)

// selection is the result of checking one group on one node.
type selection struct {
	filter    string // feasibility reason when the node was filtered
	dimension string // exhausted dimension when the group did not fit
	victims   []*schedulerpb.NodeAlloc
	ports     []*schedulerpb.AllocatedPort // picked, not yet held
}

// check runs the group's feasibility chain and the resource fit on node,
// given what the node already has in use. It records the node's computed
// class eligibility for blocked evals.
// allocName picks per_alloc volumes; self is the alloc updated in place,
// if any, whose own volume claims do not count against it.
func (r *run) check(g *group, node *schedulerpb.Node, allocName, self string, used feasible.Vec) selection {
	ok, reason := g.chain.CheckAlloc(node, allocName, self)
	if cc := node.GetComputedClass(); cc != "" {
		if prev, seen := r.classElig[cc]; !seen || (ok && !prev) {
			r.classElig[cc] = ok
		}
	}
	if !ok {
		return selection{filter: reason}
	}
	if fits, dim := feasible.Fits(feasible.VecOf(node.GetCapacity()), used, g.ask); !fits {
		return selection{dimension: dim}
	}
	if self != "" {
		return selection{} // an in-place update keeps its ports
	}
	return r.pickPorts(g, node, allocName)
}

// pickPorts picks the ports of a new allocation of g on node.
func (r *run) pickPorts(g *group, node *schedulerpb.Node, allocName string) selection {
	ports, dim := r.ports.Pick(node, g.ports, allocName)
	return selection{dimension: dim, ports: ports}
}

// nodeState tracks a node while its placements are made, so several groups
// or indexes on one node see each other's resources and preemptions.
type nodeState struct {
	node      *schedulerpb.Node
	used      feasible.Vec
	preempted []string
}

func (s *nodeState) isPreempted(id string) bool { return slices.Contains(s.preempted, id) }

// computePlacements places every tuple on its own node (§2.6). Tuples are
// processed grouped by node, in node then name order.
func (r *run) computePlacements(place []reconcile.AllocTuple) {
	byNode := func(a, b reconcile.AllocTuple) int {
		return strings.Compare(a.NodeID, b.NodeID)
	}
	if !slices.IsSortedFunc(place, byNode) {
		place = slices.Clone(place)
		slices.SortStableFunc(place, byNode)
	}
	var filteredBy map[string]*schedulerpb.AllocMetric
	var cur *nodeState
	limit := r.req.GetMaxPlacements()
	for _, t := range place {
		tgName := t.TaskGroup.GetName()
		if limit < 0 || (limit > 0 && int32(r.placed) >= limit) {
			// The core's per-eval limit: what is left stays queued, and
			// the core follows up with another eval. Checking the rest
			// would only cost time.
			r.capped++
			continue
		}
		g := r.groups[tgName]
		node := r.ready[t.NodeID]
		if node == nil || g == nil {
			// A destructive update of a finished alloc on a node that can no
			// longer take work: nothing is wanted there any more.
			r.queued[tgName]--
			continue
		}
		if cur == nil || cur.node != node {
			cur = &nodeState{node: node, used: r.baseUsed(node)}
		}
		sel := r.check(g, node, t.Name, "", cur.used)
		if sel.dimension != "" && r.preempt {
			need := preempt.Need{Capacity: feasible.VecOf(node.GetCapacity()), Used: cur.used, Ask: g.ask}
			if !g.ports.Empty() {
				need.Ports = r.ports.HeldStatic(node, g.ports)
				need.PortsFit = func(freed []int32) bool {
					_, dim := r.ports.PickFreeing(node, g.ports, t.Name, freed)
					return dim == ""
				}
			}
			if v := preempt.Victims(node, r.job.GetPriority(), need, cur.isPreempted); v != nil {
				// The victims' ports are free for this placement: the
				// core's plan check no longer counts preempted allocs.
				ports, dim := r.ports.PickFreeing(node, g.ports, t.Name, preempt.Ports(v))
				sel = selection{dimension: dim, ports: ports, victims: v}
				if dim != "" {
					sel.victims = nil
				}
			}
		}
		switch {
		case sel.filter != "":
			// Filtered nodes never block: the alloc is simply not wanted
			// there. Users hear of it only when no node could be used.
			r.queued[tgName]--
			if filteredBy == nil {
				filteredBy = map[string]*schedulerpb.AllocMetric{}
			}
			m := filteredBy[tgName]
			if m == nil {
				m = &schedulerpb.AllocMetric{ConstraintFiltered: map[string]int32{}}
				filteredBy[tgName] = m
			}
			m.NodesEvaluated++
			m.NodesFiltered++
			m.ConstraintFiltered[sel.filter]++
			if c := node.GetNodeClass(); c != "" {
				if m.ClassFiltered == nil {
					m.ClassFiltered = map[string]int32{}
				}
				m.ClassFiltered[c]++
			}
			if r.queued[tgName] <= 0 && !g.existing {
				r.fail(tgName, m)
			}
			if d := r.desired(tgName); d.Place > 0 {
				d.Place--
			}
		case sel.dimension != "":
			r.exhausted(g, node, sel.dimension)
		default:
			r.placeOn(t, g, cur, sel)
		}
	}
	r.filtered = filteredBy
}

func (r *run) fail(tg string, m *schedulerpb.AllocMetric) {
	if r.failed == nil {
		r.failed = map[string]*schedulerpb.AllocMetric{}
	}
	r.failed[tg] = m
}

// exhausted records a group that did not fit on a node. The first such
// node of a group gets a blocked eval pinned to it, so the group is retried
// when that node frees capacity; further ones are counted as coalesced
// failures of the same metric.
func (r *run) exhausted(g *group, node *schedulerpb.Node, dim string) {
	tgName := g.tg.GetName()
	if m := r.failed[tgName]; m != nil {
		m.CoalescedFailures++
		return
	}
	m := r.metric()
	m.NodesExhausted = 1
	m.DimensionExhausted = map[string]int32{dim: 1}
	if c := node.GetNodeClass(); c != "" {
		m.ClassExhausted = map[string]int32{c: 1}
	}
	r.fail(tgName, m)
	for _, b := range r.blocked {
		if b.GetNodeId() == node.GetId() {
			return
		}
	}
	r.blocked = append(r.blocked, &schedulerpb.BlockedEval{NodeId: node.GetId()})
}

// metric is a fresh one-node metric carrying the pool-wide counts. The
// NodesAvailable map is shared by every metric of one response: cloning it
// for each of 10,000 placements costs more than the rest of the placement.
func (r *run) metric() *schedulerpb.AllocMetric {
	return &schedulerpb.AllocMetric{
		NodesEvaluated: 1,
		NodesAvailable: r.nodesByDC,
		NodesInPool:    int32(len(r.ready)),
		NodePool:       r.job.GetNodePool(),
	}
}

// placedMetric is the metric of a successful placement. It is the same
// for every placement of a request (one node evaluated, pool-wide counts),
// so one message is shared by all of them; responses are read-only.
func (r *run) placedMetric() *schedulerpb.AllocMetric {
	if r.okMetric == nil {
		r.okMetric = r.metric()
	}
	return r.okMetric
}

// placeOn adds a new allocation for t on the node of cur.
func (r *run) placeOn(t reconcile.AllocTuple, g *group, cur *nodeState, sel selection) {
	node := cur.node
	victims := sel.victims
	var id string
	id, r.idBuf = appendAllocID(r.idBuf[:0], r.eval.GetId(), r.req.GetAttempt(), node.GetId(), t.Name)
	p := r.newPlaced(id, t.Name, node, g)
	r.plan.PlacementMetric = r.placedMetric()
	p.PreviousAllocation = t.Alloc.GetId()
	p.Ports = sel.ports
	r.ports.Hold(node, sel.ports)
	for _, v := range victims {
		p.PreemptedAllocations = append(p.PreemptedAllocations, v.GetId())
		r.plan.NodePreemptions = append(r.plan.NodePreemptions, &schedulerpb.Preemption{
			AllocId:               v.GetId(),
			NodeId:                node.GetId(),
			JobId:                 v.GetJobId(),
			Namespace:             v.GetNamespace(),
			PreemptedByAllocation: id,
		})
		cur.preempted = append(cur.preempted, v.GetId())
		cur.used = cur.used.Sub(feasible.VecOf(v.GetResources()))
		r.ports.Free(node, v.GetPorts())
	}
	if len(victims) > 0 {
		r.desired(g.tg.GetName()).Preemptions += uint64(len(victims))
	}
	cur.used = cur.used.Add(g.ask)
	g.chain.Placed(node.GetId(), t.Name)
	r.plan.NodeAllocation = append(r.plan.NodeAllocation, p)
	r.placed++
}

// newPlaced builds the plan entry of an allocation of g on node.
func (r *run) newPlaced(id, name string, node *schedulerpb.Node, g *group) *schedulerpb.PlacedAlloc {
	tasks := g.tg.GetTasks()
	res := make(map[string]*schedulerpb.Resources, len(tasks))
	for _, t := range tasks {
		tr := t.GetResources()
		res[t.GetName()] = &schedulerpb.Resources{
			Cpu:         tr.GetCpu(),
			MemoryMb:    tr.GetMemoryMb(),
			MemoryMaxMb: tr.GetMemoryMaxMb(),
			DiskMb:      tr.GetDiskMb(),
			Cores:       tr.GetCores(),
		}
	}
	return &schedulerpb.PlacedAlloc{
		Id:            id,
		Name:          name,
		NodeId:        node.GetId(),
		NodeName:      node.GetName(),
		TaskGroup:     g.tg.GetName(),
		TaskResources: res,
		SharedDiskMb:  g.tg.GetEphemeralDiskMb(),
	}
}

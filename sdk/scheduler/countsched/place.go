package countsched

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
	"github.com/drover-org/drover/sdk/scheduler/nodesched"
	"github.com/drover-org/drover/sdk/scheduler/preempt"
	"github.com/drover-org/drover/sdk/scheduler/rank"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
)

// candidate is a node new work may go to, with the group's static
// feasibility on it (the chain's verdict, which CSI volumes make depend on
// the allocation's index and on the plan's own claims).
type candidate struct {
	*node
	ok     bool
	reason string
}

// candidates are the nodes new work may go to: ready, eligible, not
// draining, in the job's pool and datacenters, in ID order.
func (r *run) candidates() ([]*node, map[string]int32) {
	var out []*node
	byDC := map[string]int32{}
	for _, n := range r.req.GetNodes() {
		if !feasible.PoolMatches(r.job.GetNodePool(), n.GetNodePool()) || !reconcile.NodeIsReady(n) ||
			!feasible.DatacenterMatches(r.job.GetDatacenters(), n.GetDatacenter()) {
			continue
		}
		out = append(out, r.nodes[n.GetId()])
		byDC[n.GetDatacenter()]++
	}
	slices.SortFunc(out, func(a, b *node) int { return strings.Compare(a.n.GetId(), b.n.GetId()) })
	return out, byDC
}

// place places every missing index of every group on its best node.
func (r *run) place() {
	nodes, byDC := r.candidates()
	limit := r.req.GetMaxPlacements()
	for _, name := range r.order {
		g := r.groups[name]
		r.queued[name] = 0
		var cands []candidate
		for i := range int(g.tg.GetCount()) {
			if g.taken[i] || r.rolloutHolds(g, i) {
				continue
			}
			if !g.updating[i] {
				r.desired(name).Place++
			}
			if p := r.placeIndex(g, i, nodes, byDC, &cands, limit, false); p != nil {
				p.PreviousAllocation = g.previous[i]
				p.RescheduleEvents = r.rescheduleEvents(g, i)
			}
		}
		r.placeCanaries(g, nodes, byDC, &cands, limit)
	}
}

// placeIndex places index i of g (as a canary when canary is set) on the
// best candidate: within the request's placement limit, and not once the
// group has failed on every node. It returns the placement, or nil when
// the index is queued instead (its failure recorded).
func (r *run) placeIndex(g *group, i int, nodes []*node, byDC map[string]int32, cands *[]candidate, limit int32, canary bool) *schedulerpb.PlacedAlloc {
	name := g.tg.GetName()
	if limit < 0 || (limit > 0 && int32(r.placed) >= limit) {
		r.queued[name]++
		return nil
	}
	if m := r.failed[name]; m != nil && !g.chain.PerAlloc() {
		// The group already failed on every node: the others would too.
		m.CoalescedFailures++
		r.queued[name]++
		return nil
	}
	if *cands == nil {
		*cands = r.staticCheck(g, nodes)
	}
	allocName := reconcile.AllocName(r.job.GetId(), name, i)
	best, ports, victims, metric := r.pick(g, i, allocName, *cands, byDC)
	if best == nil {
		r.fail(name, metric)
		r.queued[name]++
		return nil
	}
	idName := allocName
	if canary {
		// A canary may share its name with a placement of the same plan
		// (a failed allocation replaced): its ID is derived apart.
		idName += "#canary"
	}
	p := r.newPlaced(nodesched.AllocID(r.req.GetEval().GetId(), r.req.GetAttempt(), best.n.GetId(), idName), allocName, best.n, g)
	p.Canary = canary
	p.Metrics = metric
	p.Ports = ports
	r.ports.Hold(best.n, ports)
	r.plan.NodeAllocation = append(r.plan.NodeAllocation, p)
	r.evict(p, best, victims)
	best.used = best.used.Add(g.ask)
	g.chain.Placed(best.n.GetId(), allocName)
	g.rank.Add(best.n)
	r.distinct.Add(name, best.n)
	r.placed++
	return p
}

// staticCheck runs the group's feasibility chain once per candidate node
// and tells the spread scoring the values the feasible nodes offer.
func (r *run) staticCheck(g *group, nodes []*node) []candidate {
	out := make([]candidate, len(nodes))
	feasibleNodes := make([]*schedulerpb.Node, 0, len(nodes))
	for i, n := range nodes {
		out[i].node = n
		if g.chain.Claims() {
			out[i].ok = true // checked per allocation
			feasibleNodes = append(feasibleNodes, n.n)
			continue
		}
		out[i].ok, out[i].reason = g.chain.CheckAlloc(n.n, "", "")
		if out[i].ok {
			feasibleNodes = append(feasibleNodes, n.n)
		}
	}
	g.rank.Observe(feasibleNodes)
	return out
}

// pick chooses the node for index idx of g: of the feasible nodes where
// the group fits, the best ranked (package rank), ties to the lower node
// ID. When none fits and the attempt may preempt, the node where
// preemption frees room at least cost (see preemptPick). The metric
// describes the search; with no node chosen it explains the failure.
// ports are the host ports picked on the chosen node, victims the
// allocations to preempt there.
func (r *run) pick(g *group, idx int, allocName string, cands []candidate, byDC map[string]int32) (*node, []*schedulerpb.AllocatedPort, []*schedulerpb.NodeAlloc, *schedulerpb.AllocMetric) {
	m := &schedulerpb.AllocMetric{
		NodesAvailable: maps.Clone(byDC),
		NodesInPool:    int32(len(cands)),
		NodePool:       r.job.GetNodePool(),
	}
	penalized, penalty := g.penalized[idx]
	top := rank.NewTop(rank.MaxRetainedScores)
	var best *node
	var bestPorts []*schedulerpb.AllocatedPort
	var bestScore float64
	// full are the feasible nodes exhausted in a resource or port
	// dimension, where preemption may make room.
	var full []*node
	for i := range cands {
		c := &cands[i]
		n := c.n
		m.NodesEvaluated++
		ok, reason := c.ok, c.reason
		if ok && g.chain.Claims() {
			ok, reason = g.chain.CheckAlloc(n, allocName, "")
		}
		if ok {
			ok, reason = r.distinct.Check(g.tg.GetName(), n)
		}
		if cc := n.GetComputedClass(); cc != "" {
			if prev, seen := r.classElig[cc]; !seen || (ok && !prev) {
				r.classElig[cc] = ok
			}
		}
		if !ok {
			m.NodesFiltered++
			if m.ConstraintFiltered == nil {
				m.ConstraintFiltered = map[string]int32{}
			}
			m.ConstraintFiltered[reason]++
			if cl := n.GetNodeClass(); cl != "" {
				if m.ClassFiltered == nil {
					m.ClassFiltered = map[string]int32{}
				}
				m.ClassFiltered[cl]++
			}
			continue
		}
		fits, dim := feasible.Fits(c.capacity, c.used, g.ask)
		var ports []*schedulerpb.AllocatedPort
		if fits {
			ports, dim = r.ports.Pick(n, g.ports, allocName)
			fits = dim == ""
		}
		if !fits {
			if r.preempt {
				full = append(full, c.node)
			}
			m.NodesExhausted++
			if m.DimensionExhausted == nil {
				m.DimensionExhausted = map[string]int32{}
			}
			m.DimensionExhausted[dim]++
			if cl := n.GetNodeClass(); cl != "" {
				if m.ClassExhausted == nil {
					m.ClassExhausted = map[string]int32{}
				}
				m.ClassExhausted[cl]++
			}
			continue
		}
		s := g.rank.Score(n, rank.Options{
			Capacity: c.capacity, UsedAfter: c.used.Add(g.ask),
			Penalty: penalty, Penalized: penalized[n.GetId()],
		})
		top.Offer(n.GetId(), s)
		if best == nil || s > bestScore {
			best, bestPorts, bestScore = c.node, ports, s
		}
	}
	if best == nil && len(full) > 0 {
		if n, ports, victims := r.preemptPick(g, allocName, full, penalty, penalized, top); n != nil {
			m.Scores = top.Scores()
			return n, ports, victims, m
		}
	}
	if best != nil {
		m.Scores = top.Scores()
	}
	return best, bestPorts, nil, m
}

// preemptPick is pick's last resort: of the nodes full lists (feasible,
// but exhausted in a resource or port dimension), the one where evicting
// lower-priority allocations (package preempt) makes room at least cost:
// the lowest highest victim priority, then the fewest victims, then the
// best rank once the victims are gone, ties to the lower node ID.
func (r *run) preemptPick(g *group, allocName string, full []*node, penalty bool, penalized map[string]bool, top *rank.Top) (*node, []*schedulerpb.AllocatedPort, []*schedulerpb.NodeAlloc) {
	var (
		best      *node
		bestPorts []*schedulerpb.AllocatedPort
		bestVic   []*schedulerpb.NodeAlloc
		bestScore float64
	)
	skip := func(id string) bool { return r.preempted[id] }
	for _, c := range full {
		need := preempt.Need{Capacity: c.capacity, Used: c.used, Ask: g.ask}
		if !g.ports.Empty() {
			need.Ports = r.ports.HeldStatic(c.n, g.ports)
			need.PortsFit = func(freed []int32) bool {
				_, dim := r.ports.PickFreeing(c.n, g.ports, allocName, freed)
				return dim == ""
			}
		}
		victims := preempt.Victims(c.n, r.job.GetPriority(), need, skip)
		if victims == nil {
			continue
		}
		ports, dim := r.ports.PickFreeing(c.n, g.ports, allocName, preempt.Ports(victims))
		if dim != "" {
			continue
		}
		after := c.used.Sub(preempt.Freed(victims)).Add(g.ask)
		s := g.rank.Score(c.n, rank.Options{
			Capacity: c.capacity, UsedAfter: after, Penalty: penalty, Penalized: penalized[c.n.GetId()],
		})
		top.Offer(c.n.GetId(), s)
		better := best == nil
		if !better {
			better = cmp.Or(
				cmp.Compare(preempt.MaxPriority(victims), preempt.MaxPriority(bestVic)),
				cmp.Compare(len(victims), len(bestVic)),
				cmp.Compare(bestScore, s),
			) < 0
		}
		if better {
			best, bestPorts, bestVic, bestScore = c, ports, victims, s
		}
	}
	return best, bestPorts, bestVic
}

// evict records the preemption of victims on n by the new allocation p:
// each is listed in the plan's node_preemptions (the core marks it evict,
// "Preempted by alloc ID <p>") and in p's preempted_allocations, and what
// it used (resources, host ports) is freed on the node.
func (r *run) evict(p *schedulerpb.PlacedAlloc, n *node, victims []*schedulerpb.NodeAlloc) {
	if len(victims) == 0 {
		return
	}
	if r.preempted == nil {
		r.preempted = map[string]bool{}
	}
	for _, v := range victims {
		p.PreemptedAllocations = append(p.PreemptedAllocations, v.GetId())
		r.plan.NodePreemptions = append(r.plan.NodePreemptions, &schedulerpb.Preemption{
			AllocId: v.GetId(), NodeId: n.n.GetId(), JobId: v.GetJobId(), Namespace: v.GetNamespace(),
			PreemptedByAllocation: p.GetId(),
		})
		r.preempted[v.GetId()] = true
		n.used = n.used.Sub(feasible.VecOf(v.GetResources()))
		r.ports.Free(n.n, v.GetPorts())
	}
	r.desired(p.GetTaskGroup()).Preemptions += uint64(len(victims))
}

func (r *run) fail(tg string, m *schedulerpb.AllocMetric) {
	if r.failed == nil {
		r.failed = map[string]*schedulerpb.AllocMetric{}
	}
	r.failed[tg] = m
}

// newPlaced builds the plan entry of an allocation of g on n.
func (r *run) newPlaced(id, name string, n *schedulerpb.Node, g *group) *schedulerpb.PlacedAlloc {
	tasks := g.tg.GetTasks()
	res := make(map[string]*schedulerpb.Resources, len(tasks))
	for _, t := range tasks {
		tr := t.GetResources()
		res[t.GetName()] = &schedulerpb.Resources{
			Cpu: tr.GetCpu(), MemoryMb: tr.GetMemoryMb(), MemoryMaxMb: tr.GetMemoryMaxMb(),
			DiskMb: tr.GetDiskMb(), Cores: tr.GetCores(),
		}
	}
	return &schedulerpb.PlacedAlloc{
		Id: id, Name: name, NodeId: n.GetId(), NodeName: n.GetName(), TaskGroup: g.tg.GetName(),
		TaskResources: res, SharedDiskMb: g.tg.GetEphemeralDiskMb(),
	}
}

// response assembles the answer: one blocked eval when any group failed,
// carrying the class eligibility seen, so new capacity unblocks the job.
func (r *run) response() *schedulerpb.ScheduleResponse {
	evals, marks := r.followups()
	r.plan.AllocFollowups = append(r.plan.AllocFollowups, marks...)
	resp := &schedulerpb.ScheduleResponse{
		Plan: r.plan, FailedTgAllocs: r.failed, QueuedAllocations: r.queued, FollowupEvals: evals,
	}
	if len(r.failed) > 0 {
		resp.BlockedEvals = []*schedulerpb.BlockedEval{{
			ClassEligibility: maps.Clone(r.classElig), EscapedComputedClass: r.escaped,
		}}
	}
	return resp
}

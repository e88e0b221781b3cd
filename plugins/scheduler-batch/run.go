package batch

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
	"github.com/drover-org/drover/sdk/scheduler/nodesched"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
	"github.com/drover-org/drover/sdk/scheduler/reschedule"
)

// Stop descriptions, as users see them on allocations.
const (
	DescNotNeeded = "alloc not needed due to job update"
	DescLost      = "alloc is lost since its node is down"
	DescMigrating = "alloc is being migrated"
	DescUpdating  = "alloc is being updated due to job update"
	DescScaleDown = "alloc not needed due to count lowered"
)

// group is the per-request state of one task group.
type group struct {
	tg    *schedulerpb.TaskGroup
	chain *feasible.GroupChain
	ask   feasible.Vec
	// taken marks the indexes held by a kept live alloc or a finished one.
	taken map[int]bool
	// previous is the alloc each missing index replaces, if any.
	previous map[int]string
	// updating marks the indexes whose replacement is a destructive update
	// (annotated as such, not as a placement).
	updating map[int]bool
	// resched holds the failed alloc each index reschedules now.
	resched map[int]*rescheduling
	// later are the failed allocs due for a reschedule later.
	later []reschedule.Pending
}

// rescheduling is a failed alloc being replaced now.
type rescheduling struct {
	prev  *schedulerpb.Allocation
	delay time.Duration
	// avoid are the nodes the lineage failed on: the replacement goes
	// elsewhere when another node fits.
	avoid map[string]bool
}

// run is the state of one scheduling attempt.
type run struct {
	req      *schedulerpb.ScheduleRequest
	job      *schedulerpb.Job
	stopped  bool
	versions *reconcile.Versions
	nodes    map[string]*schedulerpb.Node
	groups   map[string]*group
	csi      *feasible.CSIVolumes // the request's volumes and this plan's claims
	order    []string             // group names in job order
	// used is each node's usage as this plan leaves it.
	used map[string]feasible.Vec

	plan      *schedulerpb.Plan
	queued    map[string]int32
	failed    map[string]*schedulerpb.AllocMetric
	classElig map[string]bool
	escaped   bool
	placed    int
	// now is the latest time the request proves has passed (the plugin
	// reads no clock): what reschedule decisions are taken against.
	now       time.Time
	followups []*schedulerpb.FollowupEval
}

func newRun(req *schedulerpb.ScheduleRequest) *run {
	job := req.GetJob()
	r := &run{
		req:       req,
		job:       job,
		stopped:   job == nil || job.GetStop(),
		versions:  reconcile.NewVersions(job, req.GetJobVersions()),
		nodes:     make(map[string]*schedulerpb.Node, len(req.GetNodes())),
		groups:    map[string]*group{},
		used:      make(map[string]feasible.Vec, len(req.GetNodes())),
		plan:      &schedulerpb.Plan{DesiredTgUpdates: map[string]*schedulerpb.DesiredUpdates{}},
		queued:    map[string]int32{},
		classElig: map[string]bool{},
		now:       reschedule.LatestTime(req),
	}
	for _, n := range req.GetNodes() {
		r.nodes[n.GetId()] = n
		r.used[n.GetId()] = feasible.VecOf(n.GetUsed())
	}
	if !r.stopped {
		cache := feasible.NewCache()
		r.csi = feasible.NewCSIVolumes(req)
		for _, tg := range job.GetTaskGroups() {
			g := &group{
				tg: tg, chain: feasible.NewGroupChainCSI(job, tg, cache, r.csi), ask: feasible.GroupAsk(tg),
				taken: map[int]bool{}, previous: map[int]string{}, updating: map[int]bool{},
				resched: map[int]*rescheduling{},
			}
			r.groups[tg.GetName()] = g
			r.order = append(r.order, tg.GetName())
			r.escaped = r.escaped || g.chain.Escaped
		}
	}
	return r
}

func (r *run) desired(tg string) *schedulerpb.DesiredUpdates {
	d := r.plan.DesiredTgUpdates[tg]
	if d == nil {
		d = &schedulerpb.DesiredUpdates{}
		r.plan.DesiredTgUpdates[tg] = d
	}
	return d
}

// stop adds a stop of a to the plan and frees a live alloc's resources for
// the placements of the same plan.
func (r *run) stop(a *schedulerpb.Allocation, desc, clientStatus string) {
	r.plan.NodeUpdate = append(r.plan.NodeUpdate, &schedulerpb.AllocStop{
		AllocId: a.GetId(), NodeId: a.GetNodeId(), DesiredDescription: desc, ClientStatus: clientStatus,
	})
	r.csi.Release(a.GetId())
	if !reconcile.Terminal(a) {
		if u, ok := r.used[a.GetNodeId()]; ok {
			r.used[a.GetNodeId()] = u.Sub(feasible.VecOf(a.GetResources()))
		}
	}
}

// nodeGone reports whether an alloc's node is missing or down.
func (r *run) nodeGone(id string) bool {
	n := r.nodes[id]
	return n == nil || n.GetStatus() == reconcile.NodeDown
}

// allocIndex parses the index of "<job>.<group>[<i>]"; -1 when malformed.
func allocIndex(name string) int {
	open := strings.LastIndexByte(name, '[')
	if open < 0 || !strings.HasSuffix(name, "]") {
		return -1
	}
	i, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// schedule diffs the allocs against each group's count, applies the diff
// to the plan and places what is missing.
func (r *run) schedule() {
	allocs := slices.Clone(r.req.GetAllocs())
	// Live allocs first, then by name and create index: the oldest of a
	// name is the one kept.
	slices.SortStableFunc(allocs, func(a, b *schedulerpb.Allocation) int {
		return cmp.Or(
			cmp.Compare(boolInt(reconcile.Terminal(a)), boolInt(reconcile.Terminal(b))),
			strings.Compare(a.GetName(), b.GetName()),
			cmp.Compare(a.GetCreateIndex(), b.GetCreateIndex()),
			strings.Compare(a.GetId(), b.GetId()))
	})
	for _, a := range allocs {
		if reconcile.ServerTerminal(a) {
			// Already stopped by the server; a client on a gone node will
			// never report it, so it is marked lost.
			cs := a.GetClientStatus()
			if r.nodeGone(a.GetNodeId()) && (cs == reconcile.ClientPending || cs == reconcile.ClientRunning) {
				r.stop(a, DescLost, reconcile.ClientLost)
			}
			continue
		}
		if r.stopped {
			if !reconcile.ClientTerminal(a) {
				r.stop(a, DescNotNeeded, "")
				r.desired(a.GetTaskGroup()).Stop++
			}
			continue
		}
		g := r.groups[a.GetTaskGroup()]
		idx := allocIndex(a.GetName())
		if reconcile.ClientTerminal(a) {
			r.finished(a, g, idx)
			continue
		}
		r.live(a, g, idx)
	}
	if r.stopped {
		return
	}
	r.place()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// finished handles an alloc its client has finished (complete, failed or
// lost). Complete ones of the current job (or of an older one the job did
// not change destructively) hold their index: batch work runs once. Failed
// ones are rescheduled by the group's policy (see rescheduleFailed); one already
// replaced leaves its index to the replacement.
func (r *run) finished(a *schedulerpb.Allocation, g *group, idx int) {
	if g == nil || idx < 0 || idx >= int(g.tg.GetCount()) || g.taken[idx] {
		return
	}
	if a.GetNextAllocation() != "" {
		// Replaced: the replacement, later in the order, holds the
		// index; if it is gone, the index is placed afresh.
		return
	}
	if a.GetClientStatus() == reconcile.ClientLost {
		g.previous[idx] = a.GetId()
		return
	}
	if reconcile.Destructive(r.versions.JobOf(a), r.job, g.tg.GetName()) {
		g.previous[idx] = a.GetId()
		return
	}
	if a.GetClientStatus() == reconcile.ClientFailed && !a.GetRanSuccessfully() {
		r.rescheduleFailed(a, g, idx)
		return
	}
	g.taken[idx] = true
	r.desired(g.tg.GetName()).Ignore++
}

// rescheduleFailed decides for a failed alloc by its group's reschedule
// policy: due now, it is replaced by this plan; due later, it holds its
// index and is marked with the follow-up eval that will replace it; not
// eligible, it stays failed and its index is done. An alloc already
// marked with a follow-up eval waits for that eval unless the request shows
// it is due (as Nomad, which reschedules it then whichever eval runs); when
// that eval is the one running, the alloc is due (the eval was due at the
// earliest time of its batch). The core unsets a follow-up eval that
// finished without replacing the alloc, so it is decided afresh.
func (r *run) rescheduleFailed(a *schedulerpb.Allocation, g *group, idx int) {
	name := g.tg.GetName()
	followup := a.GetFollowupEvalId()
	due := followup != "" && followup == r.req.GetEval().GetId()
	d := reschedule.Decide(g.tg.GetReschedulePolicy(), a, r.now)
	if due && d.Kind == reschedule.Later {
		d.Kind = reschedule.Now
	}
	if followup != "" && !due && d.Kind != reschedule.Now {
		// Its follow-up eval will come; nothing proves it is due sooner.
		g.taken[idx] = true
		r.desired(name).Ignore++
		return
	}
	switch d.Kind {
	case reschedule.Now:
		avoid := map[string]bool{a.GetNodeId(): true}
		for _, e := range a.GetRescheduleEvents() {
			avoid[e.GetPrevNodeId()] = true
		}
		g.resched[idx] = &rescheduling{prev: a, delay: d.Delay, avoid: avoid}
		g.previous[idx] = a.GetId()
		r.desired(name).RescheduleNow++
	case reschedule.Later:
		g.later = append(g.later, reschedule.Pending{AllocID: a.GetId(), At: d.At})
		g.taken[idx] = true
		d := r.desired(name)
		d.Ignore++
		d.RescheduleLater++
	default:
		g.taken[idx] = true
		r.desired(name).Ignore++
	}
}

// live handles an alloc that runs or is about to.
func (r *run) live(a *schedulerpb.Allocation, g *group, idx int) {
	switch {
	case g == nil:
		r.stop(a, DescNotNeeded, "")
		r.desired(a.GetTaskGroup()).Stop++
		return
	case idx < 0 || idx >= int(g.tg.GetCount()) || g.taken[idx]:
		r.stop(a, DescScaleDown, "")
		r.desired(g.tg.GetName()).Stop++
		return
	case r.nodeGone(a.GetNodeId()):
		r.stop(a, DescLost, reconcile.ClientLost)
		g.previous[idx] = a.GetId()
		return
	case a.GetMigrate():
		r.stop(a, DescMigrating, "")
		r.desired(g.tg.GetName()).Migrate++
		g.previous[idx] = a.GetId()
		return
	}
	if a.GetJobModifyIndex() != r.job.GetJobModifyIndex() {
		if reconcile.Destructive(r.versions.JobOf(a), r.job, g.tg.GetName()) || !r.inPlace(a, g) {
			r.stop(a, DescUpdating, "")
			r.desired(g.tg.GetName()).DestructiveUpdate++
			g.previous[idx] = a.GetId()
			g.updating[idx] = true
			return
		}
		r.desired(g.tg.GetName()).InPlaceUpdate++
		g.taken[idx] = true
		return
	}
	g.taken[idx] = true
	r.desired(g.tg.GetName()).Ignore++
}

// inPlace updates a live alloc to the current job on its node when the
// group still fits there, and reports whether it did.
func (r *run) inPlace(a *schedulerpb.Allocation, g *group) bool {
	n := r.nodes[a.GetNodeId()]
	if n == nil || n.GetStatus() != reconcile.NodeReady {
		return false
	}
	if ok, _ := g.chain.CheckAlloc(n, a.GetName(), a.GetId()); !ok {
		return false
	}
	used := r.used[n.GetId()].Sub(feasible.VecOf(a.GetResources()))
	if fits, _ := feasible.Fits(feasible.VecOf(n.GetCapacity()), used, g.ask); !fits {
		return false
	}
	r.used[n.GetId()] = used.Add(g.ask)
	p := r.newPlaced(a.GetId(), a.GetName(), n, g)
	p.InPlace = true
	r.plan.NodeAllocation = append(r.plan.NodeAllocation, p)
	return true
}

// candidates are the nodes new work may go to: ready, eligible, not
// draining, in the job's pool and datacenters, in ID order.
func (r *run) candidates() ([]*schedulerpb.Node, map[string]int32) {
	var out []*schedulerpb.Node
	byDC := map[string]int32{}
	for _, n := range r.req.GetNodes() {
		if !feasible.PoolMatches(r.job.GetNodePool(), n.GetNodePool()) || !reconcile.NodeIsReady(n) ||
			!feasible.DatacenterMatches(r.job.GetDatacenters(), n.GetDatacenter()) {
			continue
		}
		out = append(out, n)
		byDC[n.GetDatacenter()]++
	}
	slices.SortFunc(out, func(a, b *schedulerpb.Node) int { return strings.Compare(a.GetId(), b.GetId()) })
	return out, byDC
}

// place places every missing index of every group, bin-packing.
func (r *run) place() {
	nodes, byDC := r.candidates()
	limit := r.req.GetMaxPlacements()
	for _, name := range r.order {
		g := r.groups[name]
		r.queued[name] = 0
		for i := range int(g.tg.GetCount()) {
			if g.taken[i] {
				continue
			}
			if !g.updating[i] {
				r.desired(name).Place++
			}
			if limit < 0 || (limit > 0 && int32(r.placed) >= limit) {
				r.queued[name]++
				continue
			}
			if m := r.failed[name]; m != nil && !g.chain.PerAlloc() {
				// The group already failed on every node: the others
				// would too.
				m.CoalescedFailures++
				r.queued[name]++
				continue
			}
			allocName := reconcile.AllocName(r.job.GetId(), name, i)
			rs := g.resched[i]
			var avoid map[string]bool
			if rs != nil {
				avoid = rs.avoid
			}
			node, metric := r.pick(g, allocName, nodes, byDC, avoid)
			if node == nil {
				r.fail(name, metric)
				r.queued[name]++
				continue
			}
			p := r.newPlaced(nodesched.AllocID(r.req.GetEval().GetId(), r.req.GetAttempt(), node.GetId(), allocName), allocName, node, g)
			p.PreviousAllocation = g.previous[i]
			p.Metrics = metric
			if rs != nil {
				// The reschedule happens when it is due, or when the
				// request shows it is later than that.
				at := time.Unix(0, rs.prev.GetModifyTimeNs()).Add(rs.delay)
				if r.now.After(at) {
					at = r.now
				}
				// The failed alloc is left as it is: the core links it to
				// the replacement (NextAllocation) when the placement
				// commits, and a placement its node rejects leaves it
				// failed and unlinked, to be rescheduled again.
				p.RescheduleEvents = reschedule.NextEvents(g.tg.GetReschedulePolicy(), rs.prev, at, rs.delay)
			}
			r.plan.NodeAllocation = append(r.plan.NodeAllocation, p)
			r.used[node.GetId()] = r.used[node.GetId()].Add(g.ask)
			g.chain.Placed(node.GetId(), allocName)
			r.placed++
		}
	}
}

// pick chooses the node for one alloc of g: of the feasible nodes where
// the group fits, the one that is fullest once it is placed (the sum of its
// cpu and memory utilisation), ties to the lower node ID. A node in avoid
// (where a rescheduled alloc's lineage failed) is chosen only when no other
// fits. The metric describes the search; with no node chosen it explains
// the failure.
func (r *run) pick(g *group, allocName string, nodes []*schedulerpb.Node, byDC map[string]int32, avoid map[string]bool) (*schedulerpb.Node, *schedulerpb.AllocMetric) {
	m := &schedulerpb.AllocMetric{
		NodesAvailable: maps.Clone(byDC),
		NodesInPool:    int32(len(nodes)),
		NodePool:       r.job.GetNodePool(),
	}
	var best, fallback *schedulerpb.Node
	var bestScore, fallbackScore float64
	for _, n := range nodes {
		m.NodesEvaluated++
		ok, reason := g.chain.CheckAlloc(n, allocName, "")
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
			if c := n.GetNodeClass(); c != "" {
				if m.ClassFiltered == nil {
					m.ClassFiltered = map[string]int32{}
				}
				m.ClassFiltered[c]++
			}
			continue
		}
		capacity := feasible.VecOf(n.GetCapacity())
		used := r.used[n.GetId()]
		if fits, dim := feasible.Fits(capacity, used, g.ask); !fits {
			m.NodesExhausted++
			if m.DimensionExhausted == nil {
				m.DimensionExhausted = map[string]int32{}
			}
			m.DimensionExhausted[dim]++
			if c := n.GetNodeClass(); c != "" {
				if m.ClassExhausted == nil {
					m.ClassExhausted = map[string]int32{}
				}
				m.ClassExhausted[c]++
			}
			continue
		}
		s := packScore(capacity, used.Add(g.ask))
		switch {
		case avoid[n.GetId()]:
			if fallback == nil || s > fallbackScore {
				fallback, fallbackScore = n, s
			}
		case best == nil || s > bestScore:
			best, bestScore = n, s
		}
	}
	if best == nil {
		best = fallback
	}
	return best, m
}

// packScore is the node's utilisation after a placement, cpu plus memory,
// each in [0, 1]: higher is fuller.
func packScore(capacity, used feasible.Vec) float64 {
	frac := func(u, c int64) float64 {
		if c <= 0 {
			return 1
		}
		return float64(u) / float64(c)
	}
	return frac(used.CPU, capacity.CPU) + frac(used.MemoryMB, capacity.MemoryMB)
}

func (r *run) fail(tg string, m *schedulerpb.AllocMetric) {
	if r.failed == nil {
		r.failed = map[string]*schedulerpb.AllocMetric{}
	}
	r.failed[tg] = m
}

// newPlaced builds the plan entry of an allocation of g on node.
func (r *run) newPlaced(id, name string, node *schedulerpb.Node, g *group) *schedulerpb.PlacedAlloc {
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
		Id: id, Name: name, NodeId: node.GetId(), NodeName: node.GetName(), TaskGroup: g.tg.GetName(),
		TaskResources: res, SharedDiskMb: g.tg.GetEphemeralDiskMb(),
	}
}

// response assembles the answer: one blocked eval when any group failed,
// carrying the class eligibility seen, so new capacity unblocks the job.
func (r *run) response() *schedulerpb.ScheduleResponse {
	for _, name := range r.order {
		evals, marks := reschedule.Followups(r.req.GetEval().GetId(), name, r.groups[name].later)
		r.followups = append(r.followups, evals...)
		r.plan.AllocFollowups = append(r.plan.AllocFollowups, marks...)
	}
	resp := &schedulerpb.ScheduleResponse{
		Plan: r.plan, FailedTgAllocs: r.failed, QueuedAllocations: r.queued, FollowupEvals: r.followups,
	}
	if len(r.failed) > 0 {
		resp.BlockedEvals = []*schedulerpb.BlockedEval{{
			ClassEligibility: maps.Clone(r.classElig), EscapedComputedClass: r.escaped,
		}}
	}
	return resp
}

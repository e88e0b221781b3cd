package countsched

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
	"github.com/drover-org/drover/sdk/scheduler/rank"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
	"github.com/drover-org/drover/sdk/scheduler/reschedule"
)

// node is a node of the request and its usage as this plan leaves it.
type node struct {
	n        *schedulerpb.Node
	capacity feasible.Vec
	used     feasible.Vec
}

// group is the per-request state of one task group.
type group struct {
	tg    *schedulerpb.TaskGroup
	chain *feasible.GroupChain
	rank  *rank.Group
	ask   feasible.Vec
	ports feasible.PortAsks
	// taken marks the indexes held by a kept live alloc or a finished one.
	taken map[int]bool
	// previous is the alloc each missing index replaces, if any.
	previous map[int]string
	// penalized are the nodes a rescheduled index's lineage failed on.
	penalized map[int]map[string]bool
	// resched is the failed alloc each index replaces now by its
	// reschedule policy; later are those due for a reschedule later.
	resched map[int]*rescheduling
	later   []reschedule.Pending
	// updating marks the indexes whose replacement is a destructive update
	// (annotated as such, not as a placement).
	updating map[int]bool
	// updates and migrations in flight, against their limits (-1: none).
	updates, updateLimit       int
	migrations, migrationLimit int
	// roll is the group's rollout through the deployment (nil: none).
	roll *rollGroup
}

// run is the state of one scheduling attempt.
type run struct {
	cfg      Config
	req      *schedulerpb.ScheduleRequest
	job      *schedulerpb.Job
	stopped  bool
	versions *reconcile.Versions
	nodes    map[string]*node
	groups   map[string]*group
	order    []string // group names in job order
	csi      *feasible.CSIVolumes
	distinct *feasible.Distinct
	ports    *feasible.Ports // host ports held per node as this plan leaves them
	// preempt is whether this attempt may preempt; preempted are the
	// allocations of other jobs the plan evicts so far.
	preempt   bool
	preempted map[string]bool

	plan      *schedulerpb.Plan
	queued    map[string]int32
	failed    map[string]*schedulerpb.AllocMetric
	classElig map[string]bool
	escaped   bool
	placed    int
	heldBack  int
	// now is the time reschedule decisions are taken against: the core's
	// clock as the request carries it (reschedule.Clock).
	now time.Time
}

func newRun(req *schedulerpb.ScheduleRequest, cfg Config) *run {
	job := req.GetJob()
	r := &run{
		cfg:       cfg,
		req:       req,
		job:       job,
		stopped:   job == nil || job.GetStop(),
		versions:  reconcile.NewVersions(job, req.GetJobVersions()),
		nodes:     make(map[string]*node, len(req.GetNodes())),
		groups:    map[string]*group{},
		plan:      &schedulerpb.Plan{DesiredTgUpdates: map[string]*schedulerpb.DesiredUpdates{}},
		queued:    map[string]int32{},
		classElig: map[string]bool{},
		now:       reschedule.Clock(req),
		ports:     feasible.NewPorts(req),
	}
	if cfg.Preemption != nil {
		r.preempt = cfg.Preemption(req.GetConfig())
	}
	for _, n := range req.GetNodes() {
		r.nodes[n.GetId()] = &node{n: n, capacity: feasible.VecOf(n.GetCapacity()), used: feasible.VecOf(n.GetUsed())}
	}
	if r.stopped {
		return r
	}
	cache := feasible.NewCache()
	r.csi = feasible.NewCSIVolumes(req)
	r.distinct = feasible.NewDistinct(job)
	for _, tg := range job.GetTaskGroups() {
		g := &group{
			tg: tg, chain: feasible.NewGroupChainCSI(job, tg, cache, r.csi), rank: rank.NewGroup(job, tg, cache),
			ask: feasible.GroupAsk(tg), ports: feasible.GroupPorts(tg), taken: map[int]bool{}, previous: map[int]string{}, penalized: map[int]map[string]bool{},
			resched: map[int]*rescheduling{}, updating: map[int]bool{}, updateLimit: -1, migrationLimit: -1,
		}
		g.rank.SetJobAntiAffinity(!cfg.NoJobAntiAffinity)
		if cfg.PaceUpdates {
			g.updateLimit = reconcile.UpdateLimit(job, tg)
		}
		if cfg.PaceMigrations {
			g.migrationLimit = int(tg.GetMigrateMaxParallel())
			if g.migrationLimit <= 0 {
				g.migrationLimit = DefaultMigrateMaxParallel
			}
		}
		r.groups[tg.GetName()] = g
		r.order = append(r.order, tg.GetName())
		r.escaped = r.escaped || g.chain.Escaped
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
		r.ports.Release(a.GetId())
		if n := r.nodes[a.GetNodeId()]; n != nil {
			n.used = n.used.Sub(feasible.VecOf(a.GetResources()))
		}
	}
}

// keep records a live alloc the plan leaves on its node, for scoring and
// the distinct constraints of the placements that follow.
func (r *run) keep(a *schedulerpb.Allocation, g *group, idx int) {
	g.taken[idx] = true
	if n := r.nodes[a.GetNodeId()]; n != nil {
		g.rank.Add(n.n)
		r.distinct.Add(g.tg.GetName(), n.n)
	}
}

// drainForced reports whether the alloc's node's drain deadline passed:
// its allocations leave now, unpaced.
func (r *run) drainForced(id string) bool {
	n := r.nodes[id]
	return n != nil && n.n.GetDrainDeadlinePassed()
}

// nodeGone reports whether an alloc's node is missing or down.
func (r *run) nodeGone(id string) bool {
	n := r.nodes[id]
	return n == nil || n.n.GetStatus() == reconcile.NodeDown
}

// draining reports whether the alloc's node is draining.
func (r *run) draining(id string) bool {
	n := r.nodes[id]
	return n != nil && n.n.GetDraining()
}

// reconcile diffs the allocs against each group's count and applies the
// diff to the plan; place then fills the indexes left missing.
func (r *run) reconcile() {
	allocs := slices.Clone(r.req.GetAllocs())
	// Live allocs first, then by name and create index: the oldest of a
	// name is the one kept, and of finished ones the newest decides.
	slices.SortStableFunc(allocs, func(a, b *schedulerpb.Allocation) int {
		return cmp.Or(
			cmp.Compare(boolInt(reconcile.Terminal(a)), boolInt(reconcile.Terminal(b))),
			strings.Compare(a.GetName(), b.GetName()),
			cmp.Compare(a.GetCreateIndex(), b.GetCreateIndex()),
			strings.Compare(a.GetId(), b.GetId()))
	})
	if !r.stopped {
		r.countInFlight(allocs)
		r.prepareRollout(allocs)
	}
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
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// countInFlight counts, per group, the destructive updates and drain
// migrations still in flight: an index whose newest stopped alloc was
// stopped for that reason and whose replacement is not running yet (not
// placed, or pending) or, for a migration of a group with a migrate block
// (whose health the client judges by it), not healthy yet. An unhealthy
// replacement keeps its migration in flight, as Nomad's drain waits; the
// drain deadline ends the wait (drain_deadline_passed).
func (r *run) countInFlight(sorted []*schedulerpb.Allocation) {
	type index struct {
		group string
		idx   int
	}
	stopped := map[index]*schedulerpb.Allocation{} // newest server-stopped alloc
	running := map[index]bool{}
	healthy := map[index]bool{}
	live := map[index]bool{}
	for _, a := range sorted {
		k := index{a.GetTaskGroup(), allocIndex(a.GetName())}
		switch {
		case reconcile.ServerTerminal(a):
			if s := stopped[k]; s == nil || a.GetCreateIndex() >= s.GetCreateIndex() {
				stopped[k] = a
			}
		case !reconcile.ClientTerminal(a):
			live[k] = true
			run := a.GetClientStatus() == reconcile.ClientRunning
			running[k] = running[k] || run
			healthy[k] = healthy[k] || run && a.GetHealthy() == schedulerpb.AllocHealth_ALLOC_HEALTH_HEALTHY
		}
	}
	for k, a := range stopped {
		g := r.groups[k.group]
		if g == nil || k.idx < 0 || k.idx >= int(g.tg.GetCount()) {
			continue
		}
		switch {
		case a.GetMigrate() && r.draining(a.GetNodeId()):
			if !running[k] || g.tg.GetMigrate() != nil && !healthy[k] {
				g.migrations++
			}
		case running[k]:
		case live[k] && a.GetJobModifyIndex() != r.job.GetJobModifyIndex():
			// Stopped at an older version and replaced: an update.
			g.updates++
		}
	}
}

// finished handles an alloc its client has finished (complete, failed or
// lost), of a group that may still want its index.
func (r *run) finished(a *schedulerpb.Allocation, g *group, idx int) {
	if g == nil || idx < 0 || idx >= int(g.tg.GetCount()) || g.taken[idx] {
		return
	}
	if a.GetNextAllocation() != "" {
		// Replaced: the replacement, later in the order, holds the index;
		// if it is gone, the index is placed afresh.
		return
	}
	if a.GetClientStatus() == reconcile.ClientLost {
		g.previous[idx] = a.GetId()
		return
	}
	if r.rolloutKeepsFailed(a, g, idx) {
		return
	}
	changed := reconcile.Destructive(r.versions.JobOf(a), r.job, g.tg.GetName())
	fate := Hold
	if r.cfg.Finished != nil {
		fate = r.cfg.Finished(a, changed)
	} else if changed {
		fate = Replace
	}
	switch fate {
	case Hold:
		g.taken[idx] = true
		r.desired(g.tg.GetName()).Ignore++
	case Place:
		delete(g.previous, idx)
		delete(g.penalized, idx)
	case Replace:
		g.previous[idx] = a.GetId()
		delete(g.penalized, idx)
	case Reschedule:
		if r.rolloutHoldsUnmarked(a, g, idx) {
			return
		}
		r.reschedule(a, g, idx)
	}
}

// live handles an alloc that runs or is about to.
func (r *run) live(a *schedulerpb.Allocation, g *group, idx int) {
	if r.rolloutLive(a, g, idx) {
		return
	}
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
		if r.draining(a.GetNodeId()) && g.migrationLimit >= 0 && !r.drainForced(a.GetNodeId()) {
			if g.migrations >= g.migrationLimit {
				// Paced: it migrates once one in flight has a running
				// (with a migrate block: healthy) replacement.
				r.heldBack++
				r.keep(a, g, idx)
				r.desired(g.tg.GetName()).Ignore++
				return
			}
			g.migrations++
		}
		r.stop(a, DescMigrating, "")
		r.desired(g.tg.GetName()).Migrate++
		g.previous[idx] = a.GetId()
		return
	}
	if a.GetJobModifyIndex() != r.job.GetJobModifyIndex() {
		if reconcile.Destructive(r.versions.JobOf(a), r.job, g.tg.GetName()) || !r.inPlace(a, g) {
			if g.updateLimit >= 0 && g.updates >= g.updateLimit {
				r.heldBack++
				r.keep(a, g, idx)
				r.desired(g.tg.GetName()).Ignore++
				return
			}
			g.updates++
			r.stop(a, DescUpdating, "")
			r.desired(g.tg.GetName()).DestructiveUpdate++
			g.previous[idx] = a.GetId()
			g.updating[idx] = true
			return
		}
		r.desired(g.tg.GetName()).InPlaceUpdate++
		r.keep(a, g, idx)
		return
	}
	r.keep(a, g, idx)
	r.desired(g.tg.GetName()).Ignore++
}

// inPlace updates a live alloc to the current job on its node when the
// group still fits there, and reports whether it did.
func (r *run) inPlace(a *schedulerpb.Allocation, g *group) bool {
	n := r.nodes[a.GetNodeId()]
	if n == nil || n.n.GetStatus() != reconcile.NodeReady {
		return false
	}
	if ok, _ := g.chain.CheckAlloc(n.n, a.GetName(), a.GetId()); !ok {
		return false
	}
	used := n.used.Sub(feasible.VecOf(a.GetResources()))
	if fits, _ := feasible.Fits(n.capacity, used, g.ask); !fits {
		return false
	}
	n.used = used.Add(g.ask)
	p := r.newPlaced(a.GetId(), a.GetName(), n.n, g)
	p.InPlace = true
	p.Ports = r.ports.Of(a.GetId())
	r.plan.NodeAllocation = append(r.plan.NodeAllocation, p)
	return true
}

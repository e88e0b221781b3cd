package nodesched

import (
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
)

// Stop descriptions, as users see them on allocations.
const (
	DescNotNeeded = "alloc not needed due to job update"
	DescTainted   = "alloc not needed as node is tainted"
	DescMigrating = "alloc is being migrated"
	DescLost      = "alloc is lost since its node is down"
	DescUpdating  = "alloc is being updated due to job update"
)

// stop adds a stop of a to the plan. Stopping a live alloc frees its
// resources for placements later in the same plan.
func (r *run) stop(a *schedulerpb.Allocation, desc, clientStatus string) {
	r.plan.NodeUpdate = append(r.plan.NodeUpdate, &schedulerpb.AllocStop{
		AllocId:            a.GetId(),
		NodeId:             a.GetNodeId(),
		DesiredDescription: desc,
		ClientStatus:       clientStatus,
	})
	r.csi.Release(a.GetId())
	if !reconcile.Terminal(a) {
		r.ports.Release(a.GetId())
		r.adjust[a.GetNodeId()] = r.adjust[a.GetNodeId()].Sub(feasible.VecOf(a.GetResources()))
	}
}

// apply turns the reconciler's buckets into plan entries and annotations,
// makes the in-place updates, and returns the tuples left to place: the
// missing names plus the destructive updates that the update limiter lets
// through now.
func (r *run) apply(diff *reconcile.Result) []reconcile.AllocTuple {
	for _, t := range diff.Stop {
		r.stop(t.Alloc, DescNotNeeded, "")
		r.desired(t.Alloc.GetTaskGroup()).Stop++
	}
	for _, t := range diff.Migrate {
		desc := DescTainted
		if _, tainted := r.tainted[t.NodeID]; !tainted {
			desc = DescMigrating // marked by a user's alloc stop, not a drain
		}
		r.stop(t.Alloc, desc, "")
		r.desired(t.TaskGroup.GetName()).Migrate++
	}
	for _, t := range diff.Lost {
		r.stop(t.Alloc, DescLost, reconcile.ClientLost)
	}
	for _, t := range diff.Disconnecting {
		a := t.Alloc
		r.plan.NodeAllocation = append(r.plan.NodeAllocation, &schedulerpb.PlacedAlloc{
			Id:           a.GetId(),
			Name:         a.GetName(),
			NodeId:       a.GetNodeId(),
			NodeName:     a.GetNodeName(),
			TaskGroup:    a.GetTaskGroup(),
			InPlace:      true,
			ClientStatus: reconcile.ClientUnknown,
		})
		r.desired(t.TaskGroup.GetName()).Disconnect++
	}
	for _, t := range diff.Ignore {
		r.desired(t.TaskGroup.GetName()).Ignore++
		r.markExisting(t.TaskGroup)
	}
	place := diff.Place
	for _, t := range place {
		r.desired(t.TaskGroup.GetName()).Place++
	}

	var destructive []reconcile.AllocTuple
	for _, t := range diff.Update {
		d := r.desired(t.TaskGroup.GetName())
		if r.inPlace(t) {
			d.InPlaceUpdate++
			r.markExisting(t.TaskGroup)
			continue
		}
		d.DestructiveUpdate++
		destructive = append(destructive, t)
	}
	for _, t := range diff.Reconnecting {
		d := r.desired(t.TaskGroup.GetName())
		d.Reconnect++
		if r.inPlace(t) {
			r.markExisting(t.TaskGroup)
			continue
		}
		d.DestructiveUpdate++
		destructive = append(destructive, t)
	}
	now, limited := reconcile.EvictAndPlace(r.job, destructive)
	r.limited = limited
	for _, t := range now {
		r.stop(t.Alloc, DescUpdating, "")
		place = append(place, t)
	}
	return place
}

func (r *run) markExisting(tg *schedulerpb.TaskGroup) {
	if g := r.groups[tg.GetName()]; g != nil {
		g.existing = true
	}
}

// inPlace tries to update an alloc to the current job without replacing
// it, and reports whether that worked (or, for a finished alloc, whether it
// would have: a finished sysbatch alloc and a compatible change mean there
// is nothing to re-run). When it returns false the update is destructive.
func (r *run) inPlace(t reconcile.AllocTuple) bool {
	a := t.Alloc
	g := r.groups[t.TaskGroup.GetName()]
	if g == nil || reconcile.Destructive(r.versions.JobOf(a), r.job, g.tg.GetName()) {
		return false
	}
	if reconcile.Terminal(a) {
		return true
	}
	node := r.ready[a.GetNodeId()]
	if node == nil {
		return false
	}
	// The alloc's own resources are free for its new version.
	old := feasible.VecOf(a.GetResources())
	used := r.baseUsed(node).Sub(old)
	if sel := r.check(g, node, t.Name, a.GetId(), used); sel.filter != "" || sel.dimension != "" {
		return false
	}
	r.adjust[node.GetId()] = r.adjust[node.GetId()].Sub(old).Add(g.ask)
	p := r.newPlaced(a.GetId(), t.Name, node, g)
	p.InPlace = true
	p.Ports = r.ports.Of(a.GetId())
	r.plan.NodeAllocation = append(r.plan.NodeAllocation, p)
	return true
}

// baseUsed is what the node has in use once this plan's stops and in-place
// updates are applied, before new placements.
func (r *run) baseUsed(n *schedulerpb.Node) feasible.Vec {
	u := feasible.VecOf(n.GetUsed())
	if d, ok := r.adjust[n.GetId()]; ok {
		u = u.Add(d)
	}
	return u
}

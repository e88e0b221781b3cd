package countsched

import (
	"slices"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
	"github.com/drover-org/drover/sdk/scheduler/rollout"
)

// rollGroup is how a group with an update block rolls out through the
// job's deployment (Config.Deployments), package rollout's answer applied
// to the group's indexes.
type rollGroup struct {
	ans rollout.Answer
	// canaryIdx are the indexes to place canaries under: a canary bears
	// the name of an allocation it will stand in for, next to it.
	canaryIdx []int
	// promoted marks the indexes of the deployment's promoted canaries:
	// the older allocations of these names are no longer needed.
	promoted map[int]bool
	// stale are canaries to stop: of an older deployment and never
	// promoted (an older allocation of their name still runs), or of a
	// failed deployment, as Nomad stops them.
	stale map[string]bool
	// failedHere are the failed allocations of the current deployment when
	// it failed: they are not rescheduled.
	failedHere map[string]bool
}

// prepareRollout answers, for each group rolling out through deployments,
// what this evaluation may do, and proposes the deployment the job needs.
// sorted are the request's allocations, live first, oldest first.
func (r *run) prepareRollout(sorted []*schedulerpb.Allocation) {
	if !r.cfg.Deployments || r.stopped {
		return
	}
	cur := rollout.Current(r.job, r.req.GetDeployment())
	answers := map[string]rollout.Answer{}
	for _, name := range r.order {
		g := r.groups[name]
		if !rollout.Managed(g.tg) {
			continue
		}
		var allocs []*schedulerpb.Allocation
		// owner is the oldest live allocation of each index, canaries of
		// the current deployment aside: the one the index is kept for.
		owner := map[int]*schedulerpb.Allocation{}
		for _, a := range sorted {
			if a.GetTaskGroup() != name {
				continue
			}
			allocs = append(allocs, a)
			if idx := allocIndex(a.GetName()); rollout.Live(a) && !rollout.IsCanary(a, cur) && owner[idx] == nil {
				owner[idx] = a
			}
		}
		rg := &rollGroup{promoted: map[int]bool{}, stale: map[string]bool{}, failedHere: map[string]bool{}}
		var destructive []int
		canaryAt := map[int]bool{}
		for _, a := range allocs {
			idx := allocIndex(a.GetName())
			if !rollout.Live(a) || idx < 0 || idx >= int(g.tg.GetCount()) {
				continue
			}
			switch {
			case rollout.IsCanary(a, cur):
				canaryAt[idx] = true
				continue
			case a.GetCanary() && owner[idx] != a:
				rg.stale[a.GetId()] = true
				continue
			}
			if a.GetJobModifyIndex() != r.job.GetJobModifyIndex() && reconcile.Destructive(r.versions.JobOf(a), r.job, name) {
				destructive = append(destructive, idx)
			}
		}
		rg.ans = rollout.Decide(rollout.Group{
			Job: r.job, TaskGroup: g.tg, Deployment: r.req.GetDeployment(), Allocs: allocs, Destructive: len(destructive),
		})
		if rg.ans.Limit > 0 && slices.ContainsFunc(allocs, func(a *schedulerpb.Allocation) bool { return r.markedButKept(a, g, cur) }) {
			rg.ans.Limit = 0
		}
		answers[name] = rg.ans
		if !rg.ans.Managed {
			continue
		}
		for _, a := range allocs {
			if cur.GetStatus() == rollout.StatusFailed && a.GetDeploymentId() == cur.GetId() && a.GetClientStatus() == reconcile.ClientFailed {
				rg.failedHere[a.GetId()] = true
			}
			if !rollout.IsCanary(a, cur) {
				continue
			}
			switch {
			case rg.ans.Halted && cur.GetStatus() == rollout.StatusFailed && !rg.ans.Promoted:
				rg.stale[a.GetId()] = true
			case rg.ans.Promoted:
				rg.promoted[allocIndex(a.GetName())] = true
			}
		}
		slices.Sort(destructive)
		for _, i := range slices.Compact(destructive) {
			if len(rg.canaryIdx) == rg.ans.Canaries {
				break
			}
			if !canaryAt[i] {
				rg.canaryIdx = append(rg.canaryIdx, i)
			}
		}
		// The deployment paces destructive updates; those in flight are
		// its not-yet-healthy allocations, already taken off Limit.
		g.roll = rg
		g.updates, g.updateLimit = 0, rg.ans.Limit
		if rg.ans.Halted || !rg.ans.Promoted {
			g.updateLimit = 0
		}
	}
	r.plan.CreateDeployment = rollout.Proposal(answers)
}

// rolloutLive handles the live allocations a deployment decides about —
// canaries, and the older allocations promoted canaries stand for — and
// reports whether it did; the others go the common way.
func (r *run) rolloutLive(a *schedulerpb.Allocation, g *group, idx int) bool {
	if g == nil || g.roll == nil {
		return false
	}
	rg := g.roll
	name := g.tg.GetName()
	isCanary := rollout.IsCanary(a, rg.ans.Deployment)
	switch {
	case rg.stale[a.GetId()]:
		if r.nodeGone(a.GetNodeId()) {
			r.stop(a, DescLost, reconcile.ClientLost)
		} else {
			r.stop(a, DescNotNeeded, "")
		}
		r.desired(name).Stop++
		return true
	case isCanary && !rg.ans.Promoted:
		// Next to the allocation it stands for, holding no index until
		// promoted; placements after it still see it.
		if n := r.nodes[a.GetNodeId()]; n != nil {
			g.rank.Add(n.n)
			r.distinct.Add(name, n.n)
		}
		r.desired(name).Ignore++
		return true
	case !isCanary && rg.promoted[idx]:
		r.stop(a, DescNotNeeded, "")
		r.desired(name).Stop++
		return true
	}
	return false
}

// rolloutHolds reports whether the missing index i of g waits while its
// deployment places canaries or is halted, as Nomad holds placements then:
// only lost, migrating and failed allocations are replaced meanwhile; new
// indexes (a count raised, a completed allocation placed afresh) wait.
func (r *run) rolloutHolds(g *group, i int) bool {
	rg := g.roll
	if rg == nil || (rg.ans.Promoted && !rg.ans.Halted) {
		return false
	}
	return g.previous[i] == ""
}

// rolloutKeepsFailed holds the index of an allocation that failed in the
// group's failed deployment: as in Nomad, it is not rescheduled (the
// rollout stopped; a new version or a revert moves the group on).
func (r *run) rolloutKeepsFailed(a *schedulerpb.Allocation, g *group, idx int) bool {
	if g.roll == nil || !g.roll.failedHere[a.GetId()] {
		return false
	}
	g.taken[idx] = true
	r.desired(g.tg.GetName()).Ignore++
	return true
}

// rolloutHoldsUnmarked holds the index of a failed allocation of the job's
// active deployment that the core's deployment watcher has not marked for
// replacement (reschedule), as Nomad does: while a deployment is under
// way, its watcher decides which of its failed allocations are replaced
// (it marks the unhealthy ones of groups with a progress deadline; without
// one, the first unhealthy allocation fails the deployment). Once marked,
// or once the deployment is over, the allocation is rescheduled by its
// group's policy as any other; a failed deployment keeps its own failed
// allocations (rolloutKeepsFailed).
func (r *run) rolloutHoldsUnmarked(a *schedulerpb.Allocation, g *group, idx int) bool {
	if !r.cfg.Deployments || a.GetReschedule() {
		return false
	}
	cur := rollout.Current(r.job, r.req.GetDeployment())
	if cur == nil || a.GetDeploymentId() != cur.GetId() || !rollout.Active(cur) {
		return false
	}
	g.taken[idx] = true
	r.desired(g.tg.GetName()).Ignore++
	return true
}

// markedButKept reports whether a is an unhealthy allocation of deployment
// cur that failed and that the deployment watcher marked for replacement,
// but that this evaluation does not replace: its reschedule is due later,
// or its attempts are used up. Its group keeps it meanwhile, and as with
// any unhealthy allocation the group keeps (rollout.Decide), no further
// update starts, as in Nomad.
func (r *run) markedButKept(a *schedulerpb.Allocation, g *group, cur *schedulerpb.Deployment) bool {
	if cur == nil || a.GetDeploymentId() != cur.GetId() || !a.GetReschedule() || a.GetNextAllocation() != "" ||
		a.GetClientStatus() != reconcile.ClientFailed || reconcile.ServerTerminal(a) ||
		a.GetHealthy() != schedulerpb.AllocHealth_ALLOC_HEALTH_UNHEALTHY {
		return false
	}
	return !r.reschedulesNow(a, g)
}

// placeCanaries places the canaries the deployment still wants, each on
// the best node as any placement, marked as a canary; it runs in place's
// loop over groups and takes its candidate list and placement limit.
func (r *run) placeCanaries(g *group, nodes []*node, byDC map[string]int32, cands *[]candidate, limit int32) {
	if g.roll == nil {
		return
	}
	name := g.tg.GetName()
	for _, i := range g.roll.canaryIdx {
		r.desired(name).Canary++
		r.placeIndex(g, i, nodes, byDC, cands, limit, true)
	}
}

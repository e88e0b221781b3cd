// Package rollout is the arithmetic of a deployment for one task group, as
// Nomad's update block defines it, for scheduler types that declare
// deployments (JobTypeInfo.deployments). Given the group, the request's
// deployment and the group's allocations, Decide answers what the plugin may
// do in this evaluation:
//
//   - whether a new deployment is needed: the group has an update block
//     (max_parallel > 0), no deployment of the job's current version exists
//     (active or not: a failed one stops the rollout, the old version stays),
//     and either the version changed destructively for the group or the
//     group is placed for the first time (a new job: no live allocation);
//     an in-place update makes none;
//   - how many canaries to place: canaries are allocations of the new
//     version placed next to the old ones, replacing none of them, until
//     the deployment is promoted; a new job places no canaries (there is
//     nothing to compare them with);
//   - whether the old allocations may be replaced: with canaries, only once
//     the group is promoted;
//   - how many destructive updates may start now: max_parallel minus the
//     new-version allocations of the deployment that are not healthy yet;
//     none while the group keeps an unhealthy allocation of the deployment
//     (live, or failed and not yet marked for replacement by the core's
//     watcher). Health, not running, gates progress. Nothing moves while the
//     deployment is failed, paused, cancelled or waiting (pending, blocked).
//
// Marking a deployment successful, promoting it with auto_promote, failing
// it on unhealthy allocations or a passed progress deadline, and reverting
// the job are the core's deployment watcher's job: a plugin sends no status
// update for them.
//
// It imports only the protocol and the standard library and does no I/O.
package rollout

import (
	"slices"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Deployment statuses, as in ScheduleRequest.deployment.
const (
	StatusRunning    = "running"
	StatusPaused     = "paused"
	StatusFailed     = "failed"
	StatusSuccessful = "successful"
	StatusCancelled  = "cancelled"
)

// Group is what Decide needs to know about one task group.
type Group struct {
	Job       *schedulerpb.Job
	TaskGroup *schedulerpb.TaskGroup
	// Deployment is the request's deployment: the job's latest, active or
	// not, possibly of an older version; nil when the job has none.
	Deployment *schedulerpb.Deployment
	// Allocs are the group's allocations, any status.
	Allocs []*schedulerpb.Allocation
	// Destructive counts the group's live allocations that need a
	// destructive update to the job's current version (the caller's diff),
	// canaries of the current deployment not included.
	Destructive int
}

// Answer is Decide's answer for one group.
type Answer struct {
	// Managed: the group rolls out through deployments. When false, the
	// rest of the answer is zero and the caller paces as it would without
	// deployments (no update block, or max_parallel 0: all at once).
	Managed bool
	// Create is the group's part of a deployment to propose
	// (Plan.create_deployment); nil when none is needed.
	Create *schedulerpb.DeploymentGroupState
	// Deployment is the deployment of the job's current version the group
	// takes part in; nil when there is none yet (Create may propose it).
	Deployment *schedulerpb.Deployment
	// Halted: the deployment is failed, paused, cancelled or waiting, and
	// neither canaries nor destructive updates start (Promoted is still
	// set).
	Halted bool
	// Canaries is how many canaries to place in this evaluation.
	Canaries int
	// Promoted: the old allocations may be replaced (the canaries are
	// promoted, or the group has none). Promoted canaries then count
	// toward the group's count; the old allocations they stand for are
	// stopped.
	Promoted bool
	// Limit is how many destructive updates may start in this evaluation.
	Limit int
	// InFlight counts the new-version allocations of the deployment not
	// healthy yet (they hold back Limit).
	InFlight int
}

// Managed reports whether tg rolls out through deployments: it has an
// update block with max_parallel > 0.
func Managed(tg *schedulerpb.TaskGroup) bool {
	return tg.GetUpdate().GetMaxParallel() > 0
}

// Current returns d when it is a deployment of job's current version, else
// nil.
func Current(job *schedulerpb.Job, d *schedulerpb.Deployment) *schedulerpb.Deployment {
	if d == nil || job == nil || d.GetJobVersion() != job.GetVersion() || d.GetJobModifyIndex() != job.GetJobModifyIndex() {
		return nil
	}
	return d
}

// Active reports whether d is a deployment still under way: running,
// paused, or waiting (pending, blocked, unblocking); a failed, successful
// or cancelled one is over.
func Active(d *schedulerpb.Deployment) bool {
	switch d.GetStatus() {
	case StatusRunning, StatusPaused, "pending", "blocked", "unblocking":
		return true
	}
	return false
}

// Live reports whether an allocation is neither stopped by the server nor
// finished on its client.
func Live(a *schedulerpb.Allocation) bool {
	switch a.GetDesiredStatus() {
	case "stop", "evict":
		return false
	}
	switch a.GetClientStatus() {
	case "complete", "failed", "lost":
		return false
	}
	return true
}

// IsCanary reports whether a is a live canary of deployment d (not nil):
// marked as one, or, since promotion clears the mark (as Nomad does),
// listed in its group's placed_canaries.
func IsCanary(a *schedulerpb.Allocation, d *schedulerpb.Deployment) bool {
	if d == nil || a.GetDeploymentId() != d.GetId() || !Live(a) {
		return false
	}
	return a.GetCanary() || slices.Contains(d.GetTaskGroups()[a.GetTaskGroup()].GetPlacedCanaries(), a.GetId())
}

// Decide answers for one group; see the package comment.
func Decide(g Group) Answer {
	tg := g.TaskGroup
	if !Managed(tg) || g.Job == nil || g.Job.GetStop() {
		return Answer{}
	}
	up := tg.GetUpdate()
	maxParallel := int(up.GetMaxParallel())
	count := int(tg.GetCount())
	cur := Current(g.Job, g.Deployment)
	ans := Answer{Managed: true, Deployment: cur}
	if cur == nil {
		if count == 0 || (g.Destructive == 0 && !fresh(g.Job, g.Allocs)) {
			// Nothing to roll out (an in-place update, a count change,
			// or nothing wanted): no deployment. In-place updates join
			// no deployment, so one made for them could never succeed.
			ans.Promoted, ans.Limit = true, maxParallel
			return ans
		}
		canaries := 0
		if g.Destructive > 0 {
			canaries = min(int(up.GetCanary()), count)
		}
		ans.Create = &schedulerpb.DeploymentGroupState{DesiredTotal: int32(count), DesiredCanaries: int32(canaries)}
		ans.Canaries = canaries
		ans.Promoted = canaries == 0
		if ans.Promoted {
			ans.Limit = maxParallel
		}
		return ans
	}
	st := cur.GetTaskGroups()[tg.GetName()]
	if st == nil {
		// The deployment of this version leaves the group out: it had
		// nothing to roll out when the deployment was made.
		ans.Promoted, ans.Limit = true, maxParallel
		return ans
	}
	desired := int(st.GetDesiredCanaries())
	ans.Promoted = desired == 0 || st.GetPromoted()
	switch cur.GetStatus() {
	case StatusRunning, StatusSuccessful:
	default:
		// Promoted still tells the caller whether the canaries count
		// toward the group's count.
		ans.Halted = true
		return ans
	}
	live, stuck := 0, false
	for _, a := range g.Allocs {
		if IsCanary(a, cur) {
			live++
		}
		if a.GetDeploymentId() == cur.GetId() && Live(a) && a.GetJobModifyIndex() == g.Job.GetJobModifyIndex() &&
			a.GetHealthy() != schedulerpb.AllocHealth_ALLOC_HEALTH_HEALTHY {
			ans.InFlight++
		}
		stuck = stuck || keptUnhealthy(a, cur)
	}
	if !ans.Promoted {
		ans.Canaries = max(desired-live, 0)
		return ans
	}
	if !stuck {
		ans.Limit = max(maxParallel-ans.InFlight, 0)
	}
	return ans
}

// keptUnhealthy reports whether a is an unhealthy allocation of deployment
// d that its group keeps: live, or failed and neither replaced nor marked
// for replacement by the core's deployment watcher. As in Nomad, such an
// allocation starts no further update until it is replaced.
func keptUnhealthy(a *schedulerpb.Allocation, d *schedulerpb.Deployment) bool {
	if a.GetDeploymentId() != d.GetId() || a.GetHealthy() != schedulerpb.AllocHealth_ALLOC_HEALTH_UNHEALTHY {
		return false
	}
	if Live(a) {
		return true
	}
	return a.GetClientStatus() == "failed" && a.GetNextAllocation() == "" && !a.GetReschedule() &&
		a.GetDesiredStatus() != "stop" && a.GetDesiredStatus() != "evict"
}

// fresh reports whether the group is placed for the first time: no live
// allocation of any version, and none at all of the job's current version.
func fresh(job *schedulerpb.Job, allocs []*schedulerpb.Allocation) bool {
	for _, a := range allocs {
		if Live(a) || a.GetJobModifyIndex() == job.GetJobModifyIndex() {
			return false
		}
	}
	return true
}

// Proposal gathers the groups' Create parts into one Plan.create_deployment;
// nil when no group needs a deployment.
func Proposal(answers map[string]Answer) *schedulerpb.Deployment {
	var d *schedulerpb.Deployment
	for name, a := range answers {
		if a.Create == nil {
			continue
		}
		if d == nil {
			d = &schedulerpb.Deployment{TaskGroups: map[string]*schedulerpb.DeploymentGroupState{}}
		}
		d.TaskGroups[name] = a.Create
	}
	return d
}

// Package deploywatcher is the leader's watcher of active deployments.
//
// For every active deployment it decides, from the deployment, its job and
// the clock, what must happen next (Decide, a pure function): cancel it when
// its job is stopped or replaced, fail it when an allocation of a group
// without progress deadline is unhealthy or a group's progress deadline
// passes (reverting the job to its latest stable version when the group
// asks for auto_revert), mark the unhealthy allocations of groups with a
// progress deadline for replacement (Replacements) so that the scheduler
// reschedules them, promote its canaries when
// every group with canaries asks for auto_promote and they are healthy, mark
// it successful (and its job version stable) when every group has its
// desired healthy allocations, and otherwise create an eval whenever an
// allocation's health changed, so that the job's scheduler plugin places the
// next batch. The Watcher runs Decide on every change of the deployments or
// allocations tables and at the next deadline, and commits each decision
// through Raft.
package deploywatcher

import (
	"slices"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Action is what Decide asks for.
type Action int

const (
	// None: nothing to do.
	None Action = iota
	// Eval: create an eval for the job (allocation health changed).
	Eval
	// Cancel the deployment (job stopped or replaced).
	Cancel
	// Fail the deployment (unhealthy allocations or progress deadline).
	Fail
	// Promote every group's canaries (auto_promote).
	Promote
	// Succeed: mark the deployment successful and its job version stable.
	Succeed
	// Describe: keep running, with a new status description (waiting
	// for promotion).
	Describe
)

func (a Action) String() string {
	return [...]string{"none", "eval", "cancel", "fail", "promote", "succeed", "describe"}[a]
}

// Decision is Decide's answer.
type Decision struct {
	Action      Action
	Description string
	// AutoRevert: a failure reverts the job to its latest stable version.
	AutoRevert bool
	// Next is the earliest time at which the decision may change without
	// any write (a progress deadline); zero: none.
	Next time.Time
}

// Decide returns what the active deployment d needs now. job is the job's
// current version (nil when purged); healthChanged reports whether the
// health of an allocation of d changed since d was last looked at.
func Decide(d *structs.Deployment, job *structs.Job, now time.Time, healthChanged bool) Decision {
	switch {
	case job == nil || job.Stop || job.CreateIndex != d.JobCreateIndex:
		return Decision{Action: Cancel, Description: structs.DeploymentStatusDescriptionStoppedJob}
	case job.Version > d.JobVersion:
		return Decision{Action: Cancel, Description: structs.DeploymentStatusDescriptionNewerJob}
	case d.Status != structs.DeploymentStatusRunning:
		return Decision{} // paused (or pending/blocked): the operator's
	}
	// A failure reverts the job when a group that failed asks for
	// auto_revert, as in Nomad: the groups with unhealthy allocations or,
	// once a deadline passed, every group not done yet. A finished group's
	// setting does not count.
	failed, revert := false, false
	for _, st := range d.TaskGroups {
		// A group with a progress deadline has until then to make
		// progress: its unhealthy allocations are replaced (Replacements)
		// rather than failing it. Without one, the first fails it.
		if st.UnhealthyAllocs > 0 && st.ProgressDeadline == 0 {
			failed, revert = true, revert || st.AutoRevert
		}
	}
	if failed {
		return Decision{Action: Fail, Description: structs.DeploymentStatusDescriptionFailedAllocations, AutoRevert: revert}
	}
	var next time.Time
	for _, st := range d.TaskGroups {
		if groupDone(st) || awaitingPromotion(st) {
			continue
		}
		revert = revert || st.AutoRevert
		if st.RequireProgressBy.IsZero() {
			continue
		}
		if !now.Before(st.RequireProgressBy) {
			failed = true
			continue
		}
		if next.IsZero() || st.RequireProgressBy.Before(next) {
			next = st.RequireProgressBy
		}
	}
	if failed {
		return Decision{Action: Fail, Description: structs.DeploymentStatusDescriptionProgressDeadline, AutoRevert: revert}
	}
	canaryGroups, autoPromote, canariesHealthy := 0, true, true
	for _, st := range d.TaskGroups {
		if st.DesiredCanaries == 0 || st.Promoted {
			continue
		}
		canaryGroups++
		autoPromote = autoPromote && st.AutoPromote
		canariesHealthy = canariesHealthy && awaitingPromotion(st)
	}
	switch {
	case canaryGroups > 0 && canariesHealthy && autoPromote:
		return Decision{Action: Promote, Next: next}
	case canaryGroups > 0 && canariesHealthy && d.StatusDescription != structs.DeploymentStatusDescriptionRunningNeedsPromotion:
		return Decision{Action: Describe, Description: structs.DeploymentStatusDescriptionRunningNeedsPromotion, Next: next}
	case canaryGroups > 0 && autoPromote && !canariesHealthy && d.StatusDescription == structs.DeploymentStatusDescriptionRunning:
		return Decision{Action: Describe, Description: structs.DeploymentStatusDescriptionRunningAutoPromotion, Next: next}
	case canaryGroups == 0 && allDone(d):
		return Decision{Action: Succeed, Description: structs.DeploymentStatusDescriptionSuccessful}
	case healthChanged:
		return Decision{Action: Eval, Next: next}
	}
	return Decision{Next: next}
}

// Replacements returns the IDs of the allocations of d (allocs may hold
// others) to mark for replacement (DesiredTransition.Reschedule), as
// Nomad's watcher does: the unhealthy ones of groups with a progress
// deadline, not marked yet. While d is active, the scheduler reschedules a
// failed allocation of it only once so marked.
func Replacements(d *structs.Deployment, allocs []*structs.Allocation) []string {
	var ids []string
	for _, a := range allocs {
		st := d.TaskGroups[a.TaskGroup]
		if a.DeploymentID != d.ID || st == nil || st.ProgressDeadline == 0 || !a.DeploymentStatus.IsUnhealthy() {
			continue
		}
		if r := a.DesiredTransition.Reschedule; r != nil && *r {
			continue
		}
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}

// groupDone: the group has every allocation it wants healthy, canaries
// promoted.
func groupDone(st *structs.DeploymentState) bool {
	return (st.DesiredCanaries == 0 || st.Promoted) && st.HealthyAllocs >= st.DesiredTotal
}

func allDone(d *structs.Deployment) bool {
	for _, st := range d.TaskGroups {
		if !groupDone(st) {
			return false
		}
	}
	return true
}

// awaitingPromotion: the group's canaries are placed and healthy and it
// waits to be promoted; no progress deadline runs meanwhile.
func awaitingPromotion(st *structs.DeploymentState) bool {
	return st.DesiredCanaries > 0 && !st.Promoted && len(st.PlacedCanaries) >= st.DesiredCanaries &&
		st.HealthyAllocs >= st.DesiredCanaries
}

// RevertTarget returns the job version a failed deployment of version
// failed reverts to: the newest stable version before it, from versions
// (any order); nil when there is none.
func RevertTarget(versions []*structs.Job, failed uint64) *structs.Job {
	var best *structs.Job
	for _, v := range versions {
		if v.Stable && v.Version < failed && (best == nil || v.Version > best.Version) {
			best = v
		}
	}
	return best
}

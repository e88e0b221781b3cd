// Package drainer is the leader's node drainer.
//
// For every node with a drain strategy it decides, from the node, its
// allocations, the clock and the drain deadline it last acted past, what
// the drain needs now (Decide, a pure function), as each allocation's job
// type declares: allocations that run to completion (sysbatch) are left to
// finish until the deadline; those that drain last (system) go after all
// others, and stay when the drain ignores system jobs; past the deadline
// everything goes. A node with nothing left to migrate has its drain
// completed. The Drainer applies the decisions through Raft: the
// allocations to migrate are marked (DesiredTransition.Migrate) with one
// drain eval per job, so that each job's scheduler plugin replaces them.
//
// The Drainer runs on the leader: Run, started when the server establishes
// leadership and stopped by ending its context, makes a pass every
// Interval; Tick makes one at once (tests).
package drainer

import (
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Decision is Decide's answer for one draining node.
type Decision struct {
	// Complete: nothing is left on the node to migrate; the drain ends.
	Complete bool
	// Migrate are the allocations to mark for migration now.
	Migrate []*structs.Allocation
	// Forced: the drain's deadline has passed. ForcedNow: and the drainer
	// has not yet acted past this deadline, so the allocations already
	// marked are evaluated again: their scheduler paced them
	// (migrate.max_parallel, waiting for healthy replacements) and learns
	// from the node that they now leave at once.
	Forced, ForcedNow bool
}

// Decide returns what the drain of node n needs now, given its
// allocations and the deadline the drainer last acted past (zero: none).
// n must have a drain strategy.
func Decide(n *structs.Node, allocs []*structs.Allocation, now, actedPast time.Time) Decision {
	ds := n.DrainStrategy
	var d Decision
	d.Forced, d.ForcedNow = pastDeadline(ds, now, actedPast)
	var live, last []*structs.Allocation
	for _, a := range allocs {
		if a.TerminalStatus() {
			continue
		}
		if behavior(a).DrainLast {
			if !ds.IgnoreSystemJobs {
				last = append(last, a)
			}
			continue
		}
		live = append(live, a)
	}
	for _, a := range live {
		finishes := behavior(a).RunsToCompletion
		if (!finishes || d.Forced) && (!a.DesiredTransition.ShouldMigrate() || d.ForcedNow) {
			d.Migrate = append(d.Migrate, a)
		}
	}
	if len(live) == 0 || d.Forced {
		for _, a := range last {
			if !a.DesiredTransition.ShouldMigrate() {
				d.Migrate = append(d.Migrate, a)
			}
		}
	}
	d.Complete = len(live) == 0 && len(last) == 0
	return d
}

// pastDeadline reports whether ds's deadline has passed at now (forced),
// and whether it passed since the drainer last acted past it (forcedNow).
func pastDeadline(ds *structs.DrainStrategy, now, actedPast time.Time) (forced, forcedNow bool) {
	forced = !ds.ForceDeadline.IsZero() && !now.Before(ds.ForceDeadline)
	return forced, forced && !actedPast.Equal(ds.ForceDeadline)
}

// behavior is the declaration of the alloc's job type as its job version
// was registered with; the zero behaviour without one.
func behavior(a *structs.Allocation) structs.JobTypeBehavior {
	if a.Job == nil || a.Job.TypeBehavior == nil {
		return structs.JobTypeBehavior{}
	}
	return *a.Job.TypeBehavior
}

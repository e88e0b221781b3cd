// Package countsched is the engine of count-placed scheduler types (batch,
// service and the like): each task group keeps Count allocations in total,
// named "<job>.<group>[<index>]", wherever they fit best. One call to
// Schedule makes one scheduling attempt:
//
//   - the allocations are diffed against each group's count by index:
//     kept, stopped (job stopped, group gone, count lowered — the highest
//     indexes go first), lost (node down or missing: marked lost and
//     replaced), migrated (marked by a drain or an alloc stop: stopped and
//     replaced), updated in place (only non-destructive fields changed and
//     the node still takes the group) or destructively (stopped and
//     replaced);
//   - what a client-finished allocation (complete or failed) does is the
//     type's choice, Config.Finished: hold its index (batch work that is
//     done), place it again (a service that completed), or reschedule it
//     by the group's reschedule policy — now, later through a follow-up
//     eval, or not at all (package reschedule; see Reschedule);
//   - destructive updates and drain migrations can be paced (update and
//     migrate max_parallel), counting those already in flight;
//   - missing indexes are placed on the best-ranked feasible node (package
//     rank: bin-packing, job anti-affinity, affinity, spread), honouring
//     distinct_hosts and distinct_property, and placement failures are
//     explained in FailedTgAllocs with a blocked eval carrying the class
//     eligibility seen;
//   - when no node fits a placement and the type's preemption switch is
//     on (Config.Preemption), lower-priority allocations of other jobs are
//     preempted on the node where that costs least (package preempt):
//     a node that fits without preemption is always preferred.
//
// It imports only sdk/ and does no I/O: the same request gives the same
// plan.
package countsched

import (
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Stop descriptions, as users see them on allocations.
const (
	DescNotNeeded = "alloc not needed due to job update"
	DescLost      = "alloc is lost since its node is down"
	DescMigrating = "alloc is being migrated"
	DescUpdating  = "alloc is being updated due to job update"
	DescScaleDown = "alloc not needed due to count lowered"
)

// Finish is what becomes of the index of a client-finished allocation.
type Finish int

const (
	// Hold: the index is done and is not placed again.
	Hold Finish = iota
	// Place: the index is placed again, unlinked from the finished one.
	Place
	// Replace: the index is placed again as the allocation's replacement
	// (PreviousAllocation).
	Replace
	// Reschedule: by the group's reschedule policy (package reschedule):
	// due now, as Replace, the replacement preferring nodes the lineage
	// did not fail on and carrying its reschedule_events; due later, the
	// index is held and the allocation marked with a follow-up eval;
	// not eligible, the index is held and the allocation stays failed.
	Reschedule
)

// FinishedFunc decides the fate of a client-finished allocation (status
// complete or failed) of a group that still wants its index. changed
// reports that the job changed the group destructively since the
// allocation's version.
type FinishedFunc func(a *schedulerpb.Allocation, changed bool) Finish

// Config is what a scheduler type makes of the engine.
type Config struct {
	// Finished decides what client-finished allocations do; nil holds
	// every index (batch work runs once).
	Finished FinishedFunc
	// PaceUpdates limits the destructive updates of a group in flight at
	// once to its update max_parallel (group, else job; unset: no limit).
	// An update is in flight from its stop until its replacement runs.
	PaceUpdates bool
	// PaceMigrations limits the allocations of a group migrating off
	// draining nodes at once to its migrate max_parallel (1 when unset,
	// as Nomad's default). A migration is in flight from its stop until
	// its replacement runs or, when the group has a migrate block, is
	// reported healthy. A node whose drain deadline passed is not paced.
	PaceMigrations bool
	// Deployments rolls the groups with an update block (max_parallel >
	// 0) out through the job's deployment (package rollout): canaries
	// placed next to the old allocations until promoted, destructive
	// updates gated by health instead of PaceUpdates' running, a deployment
	// proposed for a new version. The type must declare deployments.
	Deployments bool
	// NoJobAntiAffinity leaves the job-anti-affinity score out, so a
	// group packs onto as few nodes as fit it (bin-packing alone). The
	// zero value scores as Nomad does.
	NoJobAntiAffinity bool
	// Preemption reads the type's preemption switch from the operator's
	// scheduler configuration (nil when the core sent none). When it is on
	// and no node fits a placement, allocations of jobs at least
	// preempt.PriorityDelta lower in priority are evicted to make room
	// (package preempt). Nil never preempts.
	Preemption func(*schedulerpb.SchedulerConfig) bool
}

// ServicePreemption is the service type's preemption switch
// (ServiceSchedulerEnabled, off unless the operator turns it on).
func ServicePreemption(cfg *schedulerpb.SchedulerConfig) bool { return cfg.GetPreemptionService() }

// BatchPreemption is the batch type's preemption switch
// (BatchSchedulerEnabled, off unless the operator turns it on).
func BatchPreemption(cfg *schedulerpb.SchedulerConfig) bool { return cfg.GetPreemptionBatch() }

// DefaultMigrateMaxParallel is migrate.max_parallel when a group sets none.
const DefaultMigrateMaxParallel = 1

// Result is the response of one attempt and what it did, for logs.
type Result struct {
	Response *schedulerpb.ScheduleResponse
	Placed   int
	Stopped  int
	// HeldBack counts the destructive updates and migrations the pacing
	// left for a later evaluation.
	HeldBack int
}

// Schedule makes one scheduling attempt for req.
func Schedule(req *schedulerpb.ScheduleRequest, cfg Config) *Result {
	r := newRun(req, cfg)
	r.reconcile()
	if !r.stopped {
		r.place()
	}
	return &Result{Response: r.response(), Placed: r.placed, Stopped: len(r.plan.GetNodeUpdate()), HeldBack: r.heldBack}
}

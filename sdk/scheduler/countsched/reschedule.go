package countsched

import (
	"time"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/reschedule"
)

// rescheduling is a failed allocation this plan replaces.
type rescheduling struct {
	prev  *schedulerpb.Allocation
	delay time.Duration
}

// reschedule decides for a failed allocation whose type chose Reschedule,
// by its group's reschedule policy (package reschedule):
//
//   - due now, its index is placed again as its replacement, with the
//     lineage's reschedule_events, preferring a node the lineage has not
//     failed on (the reschedule penalty of package rank);
//   - due later, it holds its index and is marked with the follow-up eval
//     that will replace it then (reschedule_later);
//   - not eligible (attempts used up within the interval), it holds its
//     index and stays failed: the group runs short of its count, as in
//     Nomad, until the job changes or an operator forces a reschedule.
//
// An allocation already marked with a follow-up eval waits for that eval
// unless the request shows it is due; when that eval is the one running,
// it is due (the eval was due at the earliest time of its batch). The core
// unsets a follow-up eval that finished without replacing the allocation,
// so it is decided afresh.
func (r *run) reschedule(a *schedulerpb.Allocation, g *group, idx int) {
	name := g.tg.GetName()
	followup := a.GetFollowupEvalId()
	d := r.decideReschedule(a, g)
	if followup != "" && !r.followupDue(a) && d.Kind != reschedule.Now {
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
		g.resched[idx] = &rescheduling{prev: a, delay: d.Delay}
		g.previous[idx] = a.GetId()
		g.penalized[idx] = avoid
		r.desired(name).RescheduleNow++
	case reschedule.Later:
		g.later = append(g.later, reschedule.Pending{AllocID: a.GetId(), At: d.At})
		g.taken[idx] = true
		du := r.desired(name)
		du.Ignore++
		du.RescheduleLater++
	default:
		g.taken[idx] = true
		r.desired(name).Ignore++
	}
}

// followupDue reports whether a's follow-up eval is the one running.
func (r *run) followupDue(a *schedulerpb.Allocation) bool {
	f := a.GetFollowupEvalId()
	return f != "" && f == r.req.GetEval().GetId()
}

// decideReschedule is the reschedule decision for failed allocation a of
// g; when its follow-up eval is the one running, a reschedule due later
// is due now (the eval was due at the earliest time of its batch).
func (r *run) decideReschedule(a *schedulerpb.Allocation, g *group) reschedule.Decision {
	d := reschedule.Decide(g.tg.GetReschedulePolicy(), a, r.now)
	if r.followupDue(a) && d.Kind == reschedule.Later {
		d.Kind = reschedule.Now
	}
	return d
}

// reschedulesNow reports whether reschedule replaces failed allocation a
// of g in this evaluation.
func (r *run) reschedulesNow(a *schedulerpb.Allocation, g *group) bool {
	return r.decideReschedule(a, g).Kind == reschedule.Now
}

// rescheduleEvents are the reschedule_events of the placement that
// replaces index idx's failed allocation, nil when it replaces none. The
// reschedule happens when it is due, or when the request shows it is later
// than that. The failed allocation is left as it is: the core links it to
// the replacement (next_allocation) when the placement commits, and a
// placement its node rejects leaves it failed and unlinked, to be
// rescheduled again.
func (r *run) rescheduleEvents(g *group, idx int) []*schedulerpb.RescheduleEvent {
	rs := g.resched[idx]
	if rs == nil {
		return nil
	}
	at := time.Unix(0, rs.prev.GetModifyTimeNs()).Add(rs.delay)
	if r.now.After(at) {
		at = r.now
	}
	return reschedule.NextEvents(g.tg.GetReschedulePolicy(), rs.prev, at, rs.delay)
}

// followups are the follow-up evals of the allocations due later, and
// their marks, group by group in job order.
func (r *run) followups() ([]*schedulerpb.FollowupEval, []*schedulerpb.AllocFollowup) {
	var evals []*schedulerpb.FollowupEval
	var marks []*schedulerpb.AllocFollowup
	for _, name := range r.order {
		e, m := reschedule.Followups(r.req.GetEval().GetId(), name, r.groups[name].later)
		evals = append(evals, e...)
		marks = append(marks, m...)
	}
	return evals, marks
}

// Package reschedule decides when a failed allocation is placed again, by
// its group's reschedule policy (the job file's reschedule block), and
// builds the reschedule tracker of the replacement. It is the arithmetic of
// rescheduling, shared by every scheduler plugin that reschedules; which
// allocations count as failed, and where the replacement goes, stay the
// plugin's.
//
// Times are the caller's: a scheduler plugin reads no clock, so "now" is
// the core's clock as the request carries it (now_ns; see Clock), or, from a
// core older than that field, whatever the request proves has passed (see
// LatestTime). A decision of Later whose time has in fact passed costs one
// follow-up eval, which the core runs at once; it never reschedules early.
//
// It imports only sdk/proto and the standard library.
package reschedule

import (
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Delay functions of a reschedule policy.
const (
	DelayConstant    = "constant"
	DelayExponential = "exponential"
	DelayFibonacci   = "fibonacci"
)

// MaxWait is the longest delay NextDelay gives, whatever the policy: the
// core refuses a follow-up eval due further ahead (and a job's delay and
// max_delay beyond it), so an uncapped exponential series stops growing
// there.
const MaxWait = 365 * 24 * time.Hour

// MaxUnlimitedEvents is how many past events the tracker of an allocation
// with an unlimited policy keeps: they no longer count attempts, only
// feed the delay function.
const MaxUnlimitedEvents = 5

// Kind is what to do with a failed allocation.
type Kind int

const (
	// NotEligible: the policy allows no further reschedule; the
	// allocation stays failed.
	NotEligible Kind = iota
	// Now: the allocation is due; place its replacement.
	Now
	// Later: the allocation is due at Decision.At; give it a follow-up
	// eval then.
	Later
)

func (k Kind) String() string {
	switch k {
	case Now:
		return "now"
	case Later:
		return "later"
	}
	return "not-eligible"
}

// Decision is the outcome of Decide.
type Decision struct {
	Kind Kind
	// At is when the allocation is due: its failure time plus Delay
	// (zero when NotEligible).
	At time.Time
	// Delay is the wait before this reschedule, as the delay function
	// gives it; it goes into the replacement's RescheduleEvent.
	Delay time.Duration
}

// Decide decides for a failed allocation, given its group's policy and the
// current time. The allocation's reschedule_events are its lineage's past
// reschedules and modify_time_ns its failure time.
//
// Eligibility follows Nomad: a nil policy, or zero attempts without
// unlimited, never reschedules; unlimited always does; otherwise the
// reschedules of the lineage within `interval` before the failure count,
// and fewer than `attempts` of them (with a next delay shorter than the
// interval) allow one more. Eligibility does not depend on now; only Now
// versus Later does.
//
// An allocation an operator forced (force_reschedule) is due now whatever
// the policy and the attempts used, with no delay.
func Decide(policy *pb.ReschedulePolicy, alloc *pb.Allocation, now time.Time) Decision {
	if alloc.GetForceReschedule() {
		return Decision{Kind: Now, At: now}
	}
	if policy == nil || (!policy.GetUnlimited() && policy.GetAttempts() <= 0) {
		return Decision{Kind: NotEligible}
	}
	failed := time.Unix(0, alloc.GetModifyTimeNs())
	events := alloc.GetRescheduleEvents()
	delay := NextDelay(policy, events, failed)
	if !policy.GetUnlimited() && len(events) > 0 {
		interval := time.Duration(policy.GetIntervalNs())
		if Attempted(policy, events, failed) >= int(policy.GetAttempts()) || delay >= interval {
			return Decision{Kind: NotEligible}
		}
	}
	d := Decision{Kind: Later, At: failed.Add(delay), Delay: delay}
	if !d.At.After(now) {
		d.Kind = Now
	}
	return d
}

// Attempted counts the events that fall within the policy's interval
// before t: the attempts already spent in the sliding window.
func Attempted(policy *pb.ReschedulePolicy, events []*pb.RescheduleEvent, t time.Time) int {
	interval := policy.GetIntervalNs()
	n := 0
	for _, e := range events {
		if t.UnixNano()-e.GetRescheduleTimeNs() < interval {
			n++
		}
	}
	return n
}

// NextDelay is the wait before the next reschedule of an allocation that
// failed at failed with the lineage's events:
//
//   - constant: delay every time;
//   - exponential: delay, then twice the previous event's delay;
//   - fibonacci: delay, delay, then the sum of the two previous delays
//     (d, d, 2d, 3d, 5d …);
//
// capped by max_delay when it is set, and always by MaxWait. Once capped, an allocation that ran
// longer than the cap since its last reschedule starts the series again at
// delay: it failed after a healthy spell, not in a crash loop.
func NextDelay(policy *pb.ReschedulePolicy, events []*pb.RescheduleEvent, failed time.Time) time.Duration {
	base := min(time.Duration(policy.GetDelayNs()), MaxWait)
	if len(events) == 0 {
		return base
	}
	last := events[len(events)-1]
	d := base
	switch policy.GetDelayFunction() {
	case DelayExponential:
		d = time.Duration(last.GetDelayNs()) * 2
	case DelayFibonacci:
		if len(events) >= 2 {
			prev := events[len(events)-2]
			if maxd := policy.GetMaxDelayNs(); maxd > 0 && prev.GetDelayNs() == maxd && last.GetDelayNs() == int64(base) {
				// The series was reset after the cap: it starts over
				// (d, d, 2d …), not from cap + d.
				d = base
			} else {
				d = time.Duration(last.GetDelayNs() + prev.GetDelayNs())
			}
		}
	default:
		return base
	}
	if d < base {
		// An overflowed or corrupt event never shortens the wait.
		d = base
	}
	if maxd := time.Duration(policy.GetMaxDelayNs()); maxd > 0 && d > maxd {
		d = maxd
		if failed.UnixNano()-last.GetRescheduleTimeNs() > int64(maxd) {
			d = base
		}
	}
	return min(d, MaxWait)
}

// NextEvents builds the reschedule tracker of the allocation that replaces
// prev at time at, after waiting delay: prev's events that still matter
// (within the interval of at, or the last MaxUnlimitedEvents when the
// policy is unlimited) followed by this reschedule. The result shares no
// message with prev.
func NextEvents(policy *pb.ReschedulePolicy, prev *pb.Allocation, at time.Time, delay time.Duration) []*pb.RescheduleEvent {
	past := prev.GetRescheduleEvents()
	var keep []*pb.RescheduleEvent
	switch {
	case policy.GetUnlimited():
		if len(past) > MaxUnlimitedEvents-1 {
			past = past[len(past)-(MaxUnlimitedEvents-1):]
		}
		keep = past
	default:
		for _, e := range past {
			if at.UnixNano()-e.GetRescheduleTimeNs() < policy.GetIntervalNs() {
				keep = append(keep, e)
			}
		}
	}
	out := make([]*pb.RescheduleEvent, 0, len(keep)+1)
	for _, e := range keep {
		out = append(out, &pb.RescheduleEvent{
			RescheduleTimeNs: e.GetRescheduleTimeNs(), PrevAllocId: e.GetPrevAllocId(),
			PrevNodeId: e.GetPrevNodeId(), DelayNs: e.GetDelayNs(),
		})
	}
	return append(out, &pb.RescheduleEvent{
		RescheduleTimeNs: at.UnixNano(), PrevAllocId: prev.GetId(), PrevNodeId: prev.GetNodeId(), DelayNs: int64(delay),
	})
}

// Clock is the time reschedule decisions of req are taken against: the
// core's clock (now_ns) when the core sets it, else LatestTime. Never
// earlier than LatestTime: a clock behind the allocations' own times (a
// leader change to a server whose clock lags) does not make a due
// allocation wait again.
func Clock(req *pb.ScheduleRequest) time.Time {
	latest := LatestTime(req)
	if ns := req.GetNowNs(); ns > 0 {
		if now := time.Unix(0, ns); now.After(latest) {
			return now
		}
	}
	return latest
}

// LatestTime is the latest time the request proves has passed: the
// latest modify time of its allocations (each was written before the
// request was built). A plugin without a clock passes it to Decide as now.
// It is zero when no allocation carries a time.
func LatestTime(req *pb.ScheduleRequest) time.Time {
	var latest int64
	for _, a := range req.GetAllocs() {
		latest = max(latest, a.GetModifyTimeNs())
	}
	if latest == 0 {
		return time.Time{}
	}
	return time.Unix(0, latest)
}

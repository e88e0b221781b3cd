package reschedule

import (
	"cmp"
	"slices"
	"strings"
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/derivedid"
)

// BatchWindow is how far apart the due times of failed allocations of one
// group may be and still share one follow-up eval (due at the earliest of
// them): many allocations failing together make one eval, not one each.
const BatchWindow = 5 * time.Second

// Pending is a failed allocation due later.
type Pending struct {
	AllocID string
	At      time.Time
}

// Followups groups the pending allocations of one task group into
// follow-up evals, in order of due time: each eval is due at the earliest
// time of its batch and takes the allocations due within BatchWindow of
// it. It returns the evals to create (ScheduleResponse.followup_evals) and
// the marks of the allocations (Plan.alloc_followups), both in a stable
// order. Eval IDs come from FollowupEvalID, so the same request always
// yields the same evals.
func Followups(evalID, group string, pending []Pending) ([]*pb.FollowupEval, []*pb.AllocFollowup) {
	if len(pending) == 0 {
		return nil, nil
	}
	sorted := slices.Clone(pending)
	slices.SortFunc(sorted, func(a, b Pending) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.AllocID, b.AllocID))
	})
	var evals []*pb.FollowupEval
	marks := make([]*pb.AllocFollowup, 0, len(sorted))
	var start time.Time
	var cur string
	for _, p := range sorted {
		if cur == "" || p.At.Sub(start) > BatchWindow {
			start = p.At
			cur = FollowupEvalID(evalID, group, start.UnixNano())
			evals = append(evals, &pb.FollowupEval{Id: cur, WaitUntilNs: start.UnixNano()})
		}
		marks = append(marks, &pb.AllocFollowup{AllocId: p.AllocID, FollowupEvalId: cur})
	}
	return evals, marks
}

// FollowupEvalID derives the ID of a follow-up eval from the eval that
// creates it, the task group and the time it is due. Unlike a new
// allocation's ID it does not depend on the attempt: a retried attempt
// whose first plan partly committed names the same eval, and the core
// creates it once.
//
// The result is an RFC 9562 version-8 (custom) UUID.
func FollowupEvalID(evalID, group string, waitUntilNs int64) string {
	return derivedid.Of(waitUntilNs, "followup", evalID, group)
}

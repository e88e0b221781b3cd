package reschedule

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
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
	var buf []byte
	// Length prefixes keep ("ab","c") and ("a","bc") apart.
	for _, s := range [...]string{"followup", evalID, group} {
		buf = strconv.AppendInt(buf, int64(len(s)), 10)
		buf = append(buf, ':')
		buf = append(buf, s...)
	}
	buf = strconv.AppendInt(buf, waitUntilNs, 10)
	sum := sha256.Sum256(buf)
	sum[6] = sum[6]&0x0f | 0x80 // version 8
	sum[8] = sum[8]&0x3f | 0x80 // RFC 9562 variant
	var out [36]byte
	hex.Encode(out[0:8], sum[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], sum[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], sum[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], sum[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], sum[10:16])
	return string(out[:])
}

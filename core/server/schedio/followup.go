package schedio

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Bounds on what a scheduler plugin's response may ask of the core's
// follow-ups, so that the plan's Raft entry stays bounded.
const (
	// MaxFollowupEvals is the most follow-up evals one response may
	// create. A plugin batches failures due within seconds of each other
	// into one eval, so even thousands of failing allocs need few.
	MaxFollowupEvals = 256
	// MaxFollowupWait is the furthest in the future a follow-up eval may
	// be due: a reschedule delay beyond a year is a mistake, and an eval
	// that far out would sit in the broker's delay heap for good.
	MaxFollowupWait = structs.MaxRescheduleDelay
)

// followupEvalDesc is the status description of a follow-up eval, as
// Nomad words it.
const followupEvalDesc = "created for delayed rescheduling"

// ConvertFollowups checks the response's follow-up evals and alloc marks
// and adds them to plan. Like ConvertPlan it refuses the whole response
// with an ErrInvalid naming the field and the rule broken: each eval ID a
// canonical UUID, distinct, neither the eval's own nor an eval of another
// job; each wait_until_ns after the epoch and at most MaxFollowupWait from
// now; at most MaxFollowupEvals of them; each mark naming an alloc of the
// eval's job, once, and one of the response's follow-up evals. An ID that
// an eval of the job already has is an earlier attempt's: it is not created
// twice (the state store skips it too).
func ConvertFollowups(snap PlanState, ev *structs.Evaluation, job *structs.Job, resp *pb.ScheduleResponse, plan *structs.Plan, now time.Time) error {
	fes := resp.GetFollowupEvals()
	marks := resp.GetPlan().GetAllocFollowups()
	if len(fes) == 0 && len(marks) == 0 {
		return nil
	}
	if job == nil {
		return followupError(ev, "followup_evals and alloc_followups need a job, and the job is purged")
	}
	ids, err := addFollowupEvals(snap, ev, job, fes, plan, now)
	if err != nil {
		return err
	}
	return addAllocFollowups(snap, ev, marks, ids, plan)
}

func followupError(ev *structs.Evaluation, format string, args ...any) error {
	return structs.NewError(structs.ErrInvalid, "scheduler plugin's response for job %q: "+format, append([]any{ev.JobID}, args...)...)
}

// addFollowupEvals checks the follow-up evals and adds those not created
// yet to plan. It returns the IDs of all of them, for the marks to name.
func addFollowupEvals(snap PlanState, ev *structs.Evaluation, job *structs.Job, fes []*pb.FollowupEval, plan *structs.Plan, now time.Time) (map[string]bool, error) {
	if len(fes) > MaxFollowupEvals {
		return nil, followupError(ev, "followup_evals has %d evals, more than the %d allowed", len(fes), MaxFollowupEvals)
	}
	latest := now.Add(MaxFollowupWait).UnixNano()
	ids := make(map[string]bool, len(fes))
	for i, fe := range fes {
		id := fe.GetId()
		if u, err := uuid.Parse(id); err != nil || u.String() != id {
			return nil, followupError(ev, "followup_evals[%d].id %q is not a UUID in canonical lowercase form", i, id)
		}
		if ids[id] {
			return nil, followupError(ev, "followup_evals[%d].id %q is named twice", i, id)
		}
		ids[id] = true
		if id == ev.ID {
			return nil, followupError(ev, "followup_evals[%d].id %q is the eval being scheduled", i, id)
		}
		if w := fe.GetWaitUntilNs(); w <= 0 || w > latest {
			return nil, followupError(ev, "followup_evals[%d].wait_until_ns %d must be after the epoch and at most %s from now", i, w, MaxFollowupWait)
		}
		existing, err := snap.EvalByID(nil, id)
		if err != nil {
			return nil, fmt.Errorf("read eval %q: %w", id, err)
		}
		if existing != nil {
			if existing.Namespace != ev.Namespace || existing.JobID != ev.JobID {
				return nil, followupError(ev, "followup_evals[%d].id %q is an eval of another job", i, id)
			}
			continue
		}
		wait := time.Unix(0, fe.GetWaitUntilNs()).UTC()
		plan.FollowupEvals = append(plan.FollowupEvals, &structs.Evaluation{
			ID: id, Namespace: ev.Namespace, Priority: job.Priority, Type: ev.Type,
			TriggeredBy: structs.EvalTriggerRetryFailedAlloc, JobID: ev.JobID, JobModifyIndex: job.JobModifyIndex,
			Status: structs.EvalStatusPending, StatusDescription: followupEvalDesc, WaitUntil: wait,
			PreviousEval: ev.ID, CreateTime: now.UnixNano(), ModifyTime: now.UnixNano(),
		})
	}
	return ids, nil
}

// addAllocFollowups checks the marks of allocs whose replacement a
// follow-up eval (one of ids) places, and adds them to plan.
func addAllocFollowups(snap PlanState, ev *structs.Evaluation, marks []*pb.AllocFollowup, ids map[string]bool, plan *structs.Plan) error {
	var bad planProblems
	seen := make(map[string]bool, len(marks))
	for i, m := range marks {
		if seen[m.GetAllocId()] {
			return followupError(ev, "plan.alloc_followups[%d] marks alloc %q a second time", i, m.GetAllocId())
		}
		seen[m.GetAllocId()] = true
		if !ids[m.GetFollowupEvalId()] {
			return followupError(ev, "plan.alloc_followups[%d].followup_eval_id %q is not one of followup_evals", i, m.GetFollowupEvalId())
		}
		a, err := snap.AllocByID(nil, m.GetAllocId())
		if err != nil {
			return fmt.Errorf("read alloc %q: %w", m.GetAllocId(), err)
		}
		if a == nil || a.Namespace != ev.Namespace || a.JobID != ev.JobID {
			bad.allocs = append(bad.allocs, m.GetAllocId())
			continue
		}
		plan.AllocFollowups = append(plan.AllocFollowups, &structs.AllocFollowup{AllocID: a.ID, FollowupEvalID: m.GetFollowupEvalId()})
	}
	return bad.err(ev.JobID)
}

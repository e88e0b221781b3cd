package state

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// TestUpsertPlanResultsFollowups: follow-up evals are created once (one
// already stored, maybe run since, stays as it is), marks set only the
// alloc's FollowupEvalID, and what does not exist is skipped rather than
// failing the entry.
func TestUpsertPlanResultsFollowups(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("batch"))
	a := mockAlloc(job, "n1")
	a.ClientStatus = structs.AllocClientStatusFailed
	must(t, s.UpsertAllocs(11, []*structs.Allocation{a}))
	before, _ := s.AllocByID(nil, a.ID)
	ran := mockEval(job, structs.EvalStatusComplete)
	must(t, s.UpsertEvals(12, []*structs.Evaluation{ran}))

	fresh := mockEval(job, structs.EvalStatusPending)
	again := mockEval(job, structs.EvalStatusPending)
	again.ID = ran.ID
	must(t, s.UpsertPlanResults(13, &structs.ApplyPlanResultsRequest{
		Job:           job,
		FollowupEvals: []*structs.Evaluation{fresh, again, {ID: ""}},
		AllocFollowups: []*structs.AllocFollowup{
			{AllocID: a.ID, FollowupEvalID: fresh.ID},
			{AllocID: "missing", FollowupEvalID: fresh.ID},
		},
	}))
	if e, _ := s.EvalByID(nil, fresh.ID); e == nil || e.CreateIndex != 13 || e.Status != structs.EvalStatusPending {
		t.Errorf("fresh follow-up eval = %+v, want created pending at 13", e)
	}
	if e, _ := s.EvalByID(nil, ran.ID); e.Status != structs.EvalStatusComplete || e.ModifyIndex != 12 {
		t.Errorf("stored eval rewritten: status %q, modify index %d", e.Status, e.ModifyIndex)
	}
	got, _ := s.AllocByID(nil, a.ID)
	if got.FollowupEvalID != fresh.ID || got.ModifyIndex != 13 {
		t.Errorf("alloc FollowupEvalID = %q at %d, want %q at 13", got.FollowupEvalID, got.ModifyIndex, fresh.ID)
	}
	if got.DesiredStatus != before.DesiredStatus || got.ClientStatus != before.ClientStatus || got.ModifyTime != before.ModifyTime ||
		got.AllocModifyIndex != before.AllocModifyIndex {
		t.Errorf("mark changed more than FollowupEvalID: %+v", got)
	}
}

package server

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// The leader stamps its clock into every entry that stores times, so that
// the FSM never reads a clock of its own.
func TestRaftApplyStampsTheLeadersClock(t *testing.T) {
	clock := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	s := testServer(t, func(c *Config) { c.Now = func() time.Time { return clock } })
	ev := &structs.Evaluation{ID: uuid.NewString(), Namespace: structs.DefaultNamespace, JobID: "nojob",
		Type: "service", Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete}
	req := &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{ev}}
	if _, err := s.raftApply(structs.EvalUpdateRequestType, req); err != nil {
		t.Fatal(err)
	}
	if req.Now != clock.UnixNano() {
		t.Errorf("entry stamped %d, want the leader's clock %d", req.Now, clock.UnixNano())
	}
	got, err := s.State().EvalByID(nil, ev.ID)
	if err != nil || got == nil {
		t.Fatalf("eval not stored: %v", err)
	}
	if got.CreateTime != clock.UnixNano() || got.ModifyTime != clock.UnixNano() {
		t.Errorf("eval times %d/%d, want the leader's clock %d", got.CreateTime, got.ModifyTime, clock.UnixNano())
	}
}

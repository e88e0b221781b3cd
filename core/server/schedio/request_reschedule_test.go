package schedio

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// TestRescheduleInputToPB: the request carries the group's policy and
// each alloc's tracker, links and change time (the latest task finish when
// there is one).
func TestRescheduleInputToPB(t *testing.T) {
	job := testJob("in", "batch")
	job.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{
		Attempts: 2, Interval: time.Hour, Delay: time.Second, DelayFunction: "fibonacci", MaxDelay: time.Minute, Unlimited: true,
	}
	gp := jobToPB(job).TaskGroups[0].ReschedulePolicy
	wantP := &pb.ReschedulePolicy{Attempts: 2, IntervalNs: int64(time.Hour), DelayNs: int64(time.Second), DelayFunction: "fibonacci", MaxDelayNs: int64(time.Minute), Unlimited: true}
	if gp.String() != wantP.String() {
		t.Fatalf("policy = %v, want %v", gp, wantP)
	}
	job.TaskGroups[0].ReschedulePolicy = nil
	if jobToPB(job).TaskGroups[0].ReschedulePolicy != nil {
		t.Fatal("a group without a policy must send none")
	}
	finished := time.Unix(0, 700)
	cases := []struct {
		name  string
		alloc *structs.Allocation
		want  int64
	}{
		{"no task states: modify time", &structs.Allocation{ModifyTime: 900}, 900},
		{"latest task finish", &structs.Allocation{ModifyTime: 900, TaskStates: map[string]*structs.TaskState{
			"a": {FinishedAt: time.Unix(0, 500)}, "b": {FinishedAt: finished}, "c": {}}}, 700},
		{"no task finished: modify time", &structs.Allocation{ModifyTime: 900, TaskStates: map[string]*structs.TaskState{"a": {}}}, 900},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := allocToPB(tc.alloc).ModifyTimeNs; got != tc.want {
				t.Fatalf("modify_time_ns = %d, want %d", got, tc.want)
			}
		})
	}
	a := &structs.Allocation{ID: "a", FollowupEvalID: "f", NextAllocation: "n", RescheduleTracker: &structs.RescheduleTracker{
		Events: []*structs.RescheduleEvent{{RescheduleTime: 1, PrevAllocID: "p", PrevNodeID: "pn", Delay: 3}},
	}}
	p := allocToPB(a)
	if p.FollowupEvalId != "f" || p.NextAllocation != "n" || len(p.RescheduleEvents) != 1 ||
		p.RescheduleEvents[0].String() != (&pb.RescheduleEvent{RescheduleTimeNs: 1, PrevAllocId: "p", PrevNodeId: "pn", DelayNs: 3}).String() {
		t.Fatalf("alloc = %v", p)
	}
}

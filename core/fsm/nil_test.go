package fsm

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

// TestNilElements: entries with nil elements in typed lists or maps (which
// only a server bug would write) are refused by the pre-commit check naming
// the element; and should one be committed anyway, Apply neither panics
// nor applies past it where an applier cannot cope: it stops cleanly.
func TestNilElements(t *testing.T) {
	job := mockJob("batch")
	cases := []struct {
		name  string
		t     structs.MessageType
		msg   any
		field string
	}{
		{"eval", structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{nil}}, "Evals[0]"},
		{"plan alloc", structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{nil}}, "AllocsUpdated[0]"},
		{"plan stop", structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsStopped: []*structs.Allocation{nil}}, "AllocsStopped[0]"},
		{"plan preemption", structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, PreemptionEvals: []*structs.Evaluation{nil}}, "PreemptionEvals[0]"},
		{"job group", structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: &structs.Job{ID: "x", TaskGroups: []*structs.TaskGroup{nil}}}, "Job.TaskGroups[0]"},
		{"job task", structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: &structs.Job{ID: "x", TaskGroups: []*structs.TaskGroup{{Name: "g", Tasks: []*structs.Task{nil}}}}}, "Job.TaskGroups[0].Tasks[0]"},
		{"desired transition", structs.AllocUpdateDesiredTransitionRequestType, &structs.AllocUpdateDesiredTransitionRequest{Allocs: map[string]*structs.DesiredTransition{"a": nil}}, "Allocs.a"},
		{"node status eval", structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{NodeID: "n", Evals: []*structs.Evaluation{nil}}, "Evals[0]"},
		{"client alloc", structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{nil}}, "Alloc[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf := encodeOrFail(t, tc.t, tc.msg)
			err := CheckEntry(buf)
			if err == nil || !strings.Contains(err.Error(), `"`+tc.field+`"`) {
				t.Fatalf("CheckEntry = %v, want a refusal naming %s", err, tc.field)
			}
			f, _ := testFSM(t)
			mustApply(t, f, 1, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
			resp := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: buf})
			if stop := f.Failed(); stop != nil && !strings.Contains(stop.Error(), "index 2") {
				t.Errorf("stop error %v does not name the index", stop)
			}
			_ = resp
		})
	}
}

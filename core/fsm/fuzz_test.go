package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

// FuzzApplyEntry: the FSM's entry decoder and appliers never panic on any
// bytes, and the server's pre-commit check is at least as strict as Apply:
// an entry the check passes never stops the FSM. (The check refuses more:
// nil elements, which some appliers skip.)
func FuzzApplyEntry(f *testing.F) {
	job := mockJob("batch")
	if buf, err := Encode(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job}); err == nil {
		f.Add(buf)
	}
	four := int64(4)
	if buf, err := Encode(structs.JobScaleRequestType, &structs.JobScaleRequest{Namespace: "default", JobID: job.ID, Group: "web",
		Job: job, Event: &structs.ScalingEvent{Count: &four, Meta: map[string]any{"k": 1.5}}}); err == nil {
		f.Add(buf)
	}
	if buf, err := Encode(structs.GCReapRequestType, &structs.GCReapRequest{
		Allocs: []structs.GCRef{{ID: "a", ModifyIndex: 1}}, Jobs: []structs.GCRef{{Namespace: "default", ID: "j", ModifyIndex: 2}}, Now: 1,
	}); err == nil {
		f.Add(buf)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkErr := CheckEntry(data)
		fsm, err := New(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		fsm.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
		stopped := fsm.Failed()
		if checkErr == nil && stopped != nil {
			t.Fatalf("CheckEntry = %v but Apply stopped = %v", checkErr, stopped)
		}
	})
}

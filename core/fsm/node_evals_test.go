package fsm

import (
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// Every node change writes the evals it causes in the same entry and the
// same state transaction: they exist at the change's index, carry it as
// their NodeModifyIndex, and a refused change writes none of them.
func TestNodeChangeWritesItsEvalsInOneEntry(t *testing.T) {
	nodeEval := func(nodeID string) *structs.Evaluation {
		ev := mockEval(structs.DefaultNamespace, "sys", structs.EvalStatusPending)
		ev.TriggeredBy, ev.NodeID = structs.EvalTriggerNodeUpdate, nodeID
		return ev
	}
	f, rec := testFSM(t)
	n := mockNode()
	steps := []struct {
		name string
		typ  structs.MessageType
		msg  func(ev *structs.Evaluation) any
	}{
		{"register", structs.NodeRegisterRequestType, func(ev *structs.Evaluation) any {
			return &structs.NodeRegisterRequest{Node: n, Evals: []*structs.Evaluation{ev}}
		}},
		{"status", structs.NodeUpdateStatusRequestType, func(ev *structs.Evaluation) any {
			return &structs.NodeUpdateStatusRequest{NodeID: n.ID, Status: structs.NodeStatusDown, Evals: []*structs.Evaluation{ev}}
		}},
		{"eligibility", structs.NodeUpdateEligibilityRequestType, func(ev *structs.Evaluation) any {
			return &structs.NodeUpdateEligibilityRequest{NodeID: n.ID, Eligibility: structs.NodeSchedulingIneligible, Evals: []*structs.Evaluation{ev}}
		}},
		{"drain", structs.NodeUpdateDrainRequestType, func(ev *structs.Evaluation) any {
			return &structs.NodeUpdateDrainRequest{NodeID: n.ID, MarkEligible: true, Evals: []*structs.Evaluation{ev}}
		}},
	}
	for i, step := range steps {
		index := uint64(10 + i)
		ev := nodeEval(n.ID)
		before := len(rec.evals)
		mustApply(t, f, index, step.typ, step.msg(ev))
		node, err := f.State().NodeByID(nil, n.ID)
		must(t, err)
		got, err := f.State().EvalByID(nil, ev.ID)
		must(t, err)
		switch {
		case node == nil || node.ModifyIndex != index:
			t.Errorf("%s: node not written at %d", step.name, index)
		case got == nil:
			t.Errorf("%s: the entry's eval was not written", step.name)
		case got.CreateIndex != index || got.NodeModifyIndex != index:
			t.Errorf("%s: eval created at %d with node index %d, want both %d", step.name, got.CreateIndex, got.NodeModifyIndex, index)
		}
		if len(rec.evals) != before+1 || rec.evals[len(rec.evals)-1].ID != ev.ID {
			t.Errorf("%s: eval not handed to the hooks", step.name)
		}
	}

	// A change the store refuses writes neither the change nor its evals.
	ev := nodeEval("nope")
	resp := apply(t, f, 20, structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{
		NodeID: "nope", Status: structs.NodeStatusDown, Evals: []*structs.Evaluation{ev}})
	if err, _ := resp.(error); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("status of an unknown node: %v, want ErrNotFound", resp)
	}
	if got, _ := f.State().EvalByID(nil, ev.ID); got != nil {
		t.Error("the evals of a refused node change were written")
	}
	// An eval the store refuses undoes the node change.
	resp = apply(t, f, 21, structs.NodeUpdateEligibilityRequestType, &structs.NodeUpdateEligibilityRequest{
		NodeID: n.ID, Eligibility: structs.NodeSchedulingEligible, Evals: []*structs.Evaluation{{}}})
	if err, _ := resp.(error); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("eligibility with an eval without ID: %v, want ErrInvalid", resp)
	}
	if node, _ := f.State().NodeByID(nil, n.ID); node.ModifyIndex == 21 {
		t.Error("the node change was written although its eval was refused")
	}
}

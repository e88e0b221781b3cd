package state

import (
	"errors"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestUpsertNodeKeepsOperatorFields(t *testing.T) {
	s := testStore(t)
	n := mockNode()
	must(t, s.UpsertNode(10, n))
	got, _ := s.NodeByID(nil, n.ID)
	if got.SchedulingEligibility != structs.NodeSchedulingEligible || got.CreateIndex != 10 || len(got.Events) != 1 {
		t.Fatalf("new node: eligibility %q create %d events %d", got.SchedulingEligibility, got.CreateIndex, len(got.Events))
	}
	must(t, s.UpdateNodeDrain(11, n.ID, &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}, false, 0, nil))

	// The client re-registers with its own (eligible, not draining) view.
	again := mockNode()
	again.ID, again.SecretID = n.ID, n.SecretID
	again.SchedulingEligibility = structs.NodeSchedulingEligible
	again.Attributes = map[string]string{"kernel.name": "linux", "new": "attr"}
	must(t, s.UpsertNode(12, again))
	got, _ = s.NodeByID(nil, n.ID)
	switch {
	case got.DrainStrategy == nil || got.SchedulingEligibility != structs.NodeSchedulingIneligible:
		t.Errorf("re-registration undid the drain: drain %v eligibility %q", got.DrainStrategy, got.SchedulingEligibility)
	case got.LastDrain == nil || got.LastDrain.Status != DrainStatusDraining:
		t.Errorf("LastDrain = %+v", got.LastDrain)
	case got.CreateIndex != 10 || got.ModifyIndex != 12 || got.Attributes["new"] != "attr":
		t.Errorf("create %d modify %d attrs %v", got.CreateIndex, got.ModifyIndex, got.Attributes)
	}

	// Back from down: a re-registration event is recorded.
	must(t, s.UpdateNodeStatus(13, n.ID, structs.NodeStatusDown, 1000, &structs.NodeEvent{Message: "Node heartbeat missed"}))
	back := again.Copy()
	back.Status = structs.NodeStatusReady
	must(t, s.UpsertNode(14, back))
	got, _ = s.NodeByID(nil, n.ID)
	if last := got.Events[len(got.Events)-1]; last.Message != "Node re-registered" || last.CreateIndex != 14 {
		t.Errorf("last event = %+v", last)
	}
}

func TestNodeDrainAndEligibility(t *testing.T) {
	drain := &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}
	type step struct {
		op          string // "drain", "undrain", "undrain-eligible", "eligible", "ineligible"
		wantErr     bool
		eligibility string
		draining    bool
		lastDrain   string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"drain makes ineligible", []step{
			{op: "drain", eligibility: structs.NodeSchedulingIneligible, draining: true, lastDrain: DrainStatusDraining},
		}},
		{"eligible refused while draining", []step{
			{op: "drain", eligibility: structs.NodeSchedulingIneligible, draining: true, lastDrain: DrainStatusDraining},
			{op: "eligible", wantErr: true, eligibility: structs.NodeSchedulingIneligible, draining: true, lastDrain: DrainStatusDraining},
		}},
		{"drain completes, node stays ineligible", []step{
			{op: "drain", eligibility: structs.NodeSchedulingIneligible, draining: true, lastDrain: DrainStatusDraining},
			{op: "undrain", eligibility: structs.NodeSchedulingIneligible, lastDrain: DrainStatusComplete},
			{op: "eligible", eligibility: structs.NodeSchedulingEligible, lastDrain: DrainStatusComplete},
		}},
		{"drain canceled with mark eligible", []step{
			{op: "drain", eligibility: structs.NodeSchedulingIneligible, draining: true, lastDrain: DrainStatusDraining},
			{op: "undrain-eligible", eligibility: structs.NodeSchedulingEligible, lastDrain: DrainStatusCanceled},
		}},
		{"eligibility toggles without drain", []step{
			{op: "ineligible", eligibility: structs.NodeSchedulingIneligible},
			{op: "eligible", eligibility: structs.NodeSchedulingEligible},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			n := mockNode()
			must(t, s.UpsertNode(10, n))
			for i, st := range tc.steps {
				index := uint64(11 + i)
				var err error
				switch st.op {
				case "drain":
					err = s.UpdateNodeDrain(index, n.ID, drain, false, 500, &structs.NodeEvent{Message: "drain"})
				case "undrain":
					err = s.UpdateNodeDrain(index, n.ID, nil, false, 500, nil)
				case "undrain-eligible":
					err = s.UpdateNodeDrain(index, n.ID, nil, true, 500, nil)
				case "eligible":
					err = s.UpdateNodeEligibility(index, n.ID, structs.NodeSchedulingEligible, 500, nil)
				case "ineligible":
					err = s.UpdateNodeEligibility(index, n.ID, structs.NodeSchedulingIneligible, 500, nil)
				}
				if (err != nil) != st.wantErr {
					t.Fatalf("step %d %s: err = %v, want error %v", i, st.op, err, st.wantErr)
				}
				got, _ := s.NodeByID(nil, n.ID)
				if got.SchedulingEligibility != st.eligibility || (got.DrainStrategy != nil) != st.draining {
					t.Errorf("step %d %s: eligibility %q draining %v, want %q %v", i, st.op, got.SchedulingEligibility, got.DrainStrategy != nil, st.eligibility, st.draining)
				}
				lastDrain := ""
				if got.LastDrain != nil {
					lastDrain = got.LastDrain.Status
				}
				if lastDrain != st.lastDrain {
					t.Errorf("step %d %s: LastDrain %q, want %q", i, st.op, lastDrain, st.lastDrain)
				}
				if !st.wantErr && got.ModifyIndex != index {
					t.Errorf("step %d: ModifyIndex %d, want %d", i, got.ModifyIndex, index)
				}
			}
		})
	}
}

func TestNodeUpdatesOfMissingNodes(t *testing.T) {
	s := testStore(t)
	for name, err := range map[string]error{
		"status":      s.UpdateNodeStatus(10, "nope", structs.NodeStatusDown, 1, nil),
		"drain":       s.UpdateNodeDrain(10, "nope", nil, true, 1, nil),
		"eligibility": s.UpdateNodeEligibility(10, "nope", structs.NodeSchedulingIneligible, 1, nil),
		"delete":      s.DeleteNode(10, []string{"nope"}),
	} {
		if !errors.Is(err, structs.ErrNotFound) {
			t.Errorf("%s of a missing node: %v, want ErrNotFound", name, err)
		}
	}
	if err := s.UpdateNodeEligibility(10, "nope", "maybe", 1, nil); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("bad eligibility value: %v, want ErrInvalid", err)
	}
}

func TestNodeEventsAreBounded(t *testing.T) {
	s := testStore(t)
	n := mockNode()
	must(t, s.UpsertNode(10, n))
	for i := 0; i < 2*MaxRetainedNodeEvents; i++ {
		must(t, s.UpdateNodeStatus(uint64(11+i), n.ID, structs.NodeStatusReady, int64(i), &structs.NodeEvent{Message: "hb"}))
	}
	got, _ := s.NodeByID(nil, n.ID)
	if len(got.Events) != MaxRetainedNodeEvents {
		t.Errorf("%d events kept, want %d", len(got.Events), MaxRetainedNodeEvents)
	}
	if last := got.Events[len(got.Events)-1]; last.CreateIndex != uint64(10+2*MaxRetainedNodeEvents) {
		t.Errorf("newest event index %d", last.CreateIndex)
	}
}

func TestNodeReaders(t *testing.T) {
	s := testStore(t)
	a, b, c := mockNode(), mockNode(), mockNode()
	a.ID, b.ID, c.ID = "ab12", "ab34", "cd56"
	c.NodePool = "gpu"
	for i, n := range []*structs.Node{a, b, c} {
		must(t, s.UpsertNode(uint64(10+i), n))
	}
	count := func(nodes []*structs.Node, err error) int {
		t.Helper()
		must(t, err)
		return len(nodes)
	}
	cases := []struct {
		name      string
		got, want int
	}{
		{"prefix", count(s.NodesByIDPrefix(nil, "ab")), 2},
		{"list all", count(s.NodeList(nil, "")), 3},
		{"pool default", count(s.NodesByPool(nil, structs.NodePoolDefault)), 2},
		{"pool gpu", count(s.NodesByPool(nil, "gpu")), 1},
		{"pool all", count(s.NodesByPool(nil, structs.NodePoolAll)), 3},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %d nodes, want %d", tc.name, tc.got, tc.want)
		}
	}
	got, err := s.NodeBySecretID(nil, c.SecretID)
	must(t, err)
	if got == nil || got.ID != c.ID {
		t.Errorf("NodeBySecretID = %v", got)
	}
	if got, _ := s.NodeBySecretID(nil, ""); got != nil {
		t.Error("empty secret matched a node")
	}
	must(t, s.DeleteNode(20, []string{a.ID, b.ID}))
	if n := count(s.Nodes(nil)); n != 1 {
		t.Errorf("%d nodes after delete, want 1", n)
	}
}

package fsm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/events"
	"github.com/drover-org/drover/core/structs"
)

// nextBatch reads one batch with a deadline.
func nextBatch(t *testing.T, s *events.Subscription) *events.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return b
}

func kinds(b *events.Batch) string {
	var out []string
	for _, e := range b.Events {
		out = append(out, e.Topic+"/"+e.Type)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// Each applied entry becomes one batch at its index, with the events its
// writes' changes imply, named by the entry's type; tables without a topic
// (summaries, versions, indexes) make none, and secrets never travel.
func TestEventsFromAppliedEntries(t *testing.T) {
	f, _ := testFSM(t)
	buf := events.NewBuffer(64, 0)
	defer buf.Close()
	f.SetEventBuffer(buf)
	sub, err := buf.Subscribe(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	node := mockNode()
	job := mockJob("service")
	job.Namespace = structs.DefaultNamespace
	eval := mockEval(job.Namespace, job.ID, structs.EvalStatusPending)
	alloc := mockAlloc(job, node.ID)
	alloc.Job = job
	token := &structs.ACLToken{AccessorID: "acc-1", SecretID: "very-secret", Type: "client", Policies: []string{"p"}}

	steps := []struct {
		index uint64
		typ   structs.MessageType
		msg   any
		want  string
	}{
		{10, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node}, "Node/NodeRegistration"},
		{11, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: eval},
			"Evaluation/EvaluationUpdated Job/JobRegistered"},
		{12, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{alloc}},
			"Allocation/PlanResult"},
		{13, structs.NodeUpdateEligibilityRequestType, &structs.NodeUpdateEligibilityRequest{NodeID: node.ID, Eligibility: structs.NodeSchedulingIneligible},
			"Node/NodeEligibility"},
		{14, structs.ACLTokenUpsertRequestType, &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{token}}, "ACLToken/ACLTokenUpserted"},
		{15, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: job.Namespace, JobID: job.ID, Purge: true},
			"Job/JobDeregistered"},
	}
	for _, st := range steps {
		mustApply(t, f, st.index, st.typ, st.msg)
		b := nextBatch(t, sub)
		if b.Index != st.index {
			t.Fatalf("batch index = %d, want %d", b.Index, st.index)
		}
		if got := kinds(b); !strings.HasPrefix(got, st.want) && got != st.want {
			t.Fatalf("index %d: events %q, want %q", st.index, got, st.want)
		}
		for _, e := range b.Events {
			if e.Index != st.index {
				t.Fatalf("event index = %d, want %d", e.Index, st.index)
			}
			raw, err := e.JSON()
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range []string{node.SecretID, token.SecretID} {
				if strings.Contains(string(raw), secret) {
					t.Fatalf("event %s/%s carries a secret: %s", e.Topic, e.Type, raw)
				}
			}
			if e.Topic == events.TopicAllocation {
				var got struct {
					Payload struct{ Allocation map[string]any }
				}
				must(t, json.Unmarshal(raw, &got))
				if got.Payload.Allocation["Job"] != nil || got.Payload.Allocation["JobID"] != job.ID {
					t.Fatalf("alloc payload: Job must be stripped and JobID kept: %v", got.Payload.Allocation)
				}
				if len(e.FilterKeys) == 0 || e.FilterKeys[0] != job.ID {
					t.Fatalf("alloc FilterKeys = %v, want the job ID", e.FilterKeys)
				}
			}
		}
	}
	// A refused entry writes nothing and publishes nothing.
	if resp := apply(t, f, 16, structs.NodeUpdateEligibilityRequestType,
		&structs.NodeUpdateEligibilityRequest{NodeID: "no-such-node", Eligibility: structs.NodeSchedulingEligible}); resp == nil {
		t.Fatal("eligibility of an unknown node was accepted")
	}
	if st := buf.Stats(); st.LatestIndex != 15 {
		t.Fatalf("latest index = %d after a refused entry, want 15", st.LatestIndex)
	}
}

// Without a buffer the store tracks no changes (no cost), and a restored
// store keeps feeding the buffer.
func TestEventsAfterRestore(t *testing.T) {
	f, _ := testFSM(t)
	buf := events.NewBuffer(8, 0)
	defer buf.Close()
	f.SetEventBuffer(buf)
	mustApply(t, f, 5, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()})
	snap := snapshotBytes(t, f)
	must(t, f.Restore(io.NopCloser(bytes.NewReader(snap))))
	mustApply(t, f, 6, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()})
	if st := buf.Stats(); st.LatestIndex != 6 || st.Published != 2 {
		t.Fatalf("stats after restore = %+v, want latest 6, 2 published", st)
	}
}

// Deployment entries give Deployment events keyed by the deployment and
// filterable by its job.
func TestDeploymentEvents(t *testing.T) {
	f, _, job, d, canary := deployFSM(t)
	mustApply(t, f, 4, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Now: 4, Alloc: []*structs.Allocation{{
		ID: canary.ID, ClientStatus: structs.AllocClientStatusRunning,
		DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: boolp(true)},
	}}})
	buf := events.NewBuffer(16, 0)
	defer buf.Close()
	f.SetEventBuffer(buf)
	sub, err := buf.Subscribe(0, &events.Filter{Topics: map[string][]string{events.TopicDeployment: {job.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	mustApply(t, f, 5, structs.DeploymentPromoteRequestType, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, All: true,
		Eval: mockEval(job.Namespace, job.ID, structs.EvalStatusPending), Now: 5})
	mustApply(t, f, 6, structs.DeploymentStatusUpdateRequestType, &structs.DeploymentStatusUpdateRequest{
		DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: d.ID, Status: structs.DeploymentStatusSuccessful}, Now: 6,
	})
	for _, want := range []struct {
		index uint64
		typ   string
	}{{5, events.TypeDeploymentPromotion}, {6, events.TypeDeploymentUpdate}} {
		b := nextBatch(t, sub)
		if b.Index != want.index || len(b.Events) != 1 || b.Events[0].Type != want.typ || b.Events[0].Key != d.ID {
			t.Fatalf("batch %d: %+v; want one %s of %s at %d", b.Index, b.Events, want.typ, d.ID, want.index)
		}
		if got := b.Events[0].Payload["Deployment"].(*structs.Deployment); got.ID != d.ID {
			t.Fatalf("payload %+v", got)
		}
	}
}

package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// nodeUpdateEvalAt returns the node-update eval of job for node created at
// index, or nil.
func nodeUpdateEvalAt(t *testing.T, s *Server, job, nodeID string, index uint64) *structs.Evaluation {
	t.Helper()
	evs, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.NodeID == nodeID && e.TriggeredBy == structs.EvalTriggerNodeUpdate && e.CreateIndex == index {
			return e
		}
	}
	return nil
}

// A node change and the evals it causes are one Raft entry: the evals are
// created at the very index that wrote the change, so no leadership loss can
// commit one without the other.
func TestNodeChangeAndItsEvalsAreOneEntry(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	resp := registerJob(t, s, testJob("sys", "system"))
	waitEvalTerminal(t, s, resp.EvalID)

	n := testNode("a")
	registerNodes(t, s, n)
	stored, err := s.State().NodeByID(nil, n.ID)
	if err != nil || stored == nil {
		t.Fatalf("node not registered: %v", err)
	}
	if ev := nodeUpdateEvalAt(t, s, "sys", n.ID, stored.CreateIndex); ev == nil || ev.NodeModifyIndex != stored.CreateIndex {
		t.Fatalf("register: no node eval at the registration's index %d (%+v)", stored.CreateIndex, ev)
	}

	if _, err := s.Nodes().UpdateEligibility(ctx, n.ID, structs.NodeSchedulingIneligible); err != nil {
		t.Fatal(err)
	}
	up, err := s.Nodes().UpdateEligibility(ctx, n.ID, structs.NodeSchedulingEligible)
	if err != nil {
		t.Fatal(err)
	}
	if len(up.EvalIDs) != 1 || up.EvalCreateIndex != up.NodeModifyIndex || up.Index != up.NodeModifyIndex {
		t.Fatalf("eligibility: response %+v, want one eval created with the change", up)
	}
	if ev := nodeUpdateEvalAt(t, s, "sys", n.ID, up.NodeModifyIndex); ev == nil || ev.ID != up.EvalIDs[0] {
		t.Fatalf("eligibility: eval %s not stored at the change's index %d", up.EvalIDs[0], up.NodeModifyIndex)
	}

	if _, err := s.Nodes().UpdateDrain(ctx, n.ID, &structs.DrainSpec{Deadline: time.Hour}, false, nil); err != nil {
		t.Fatal(err)
	}
	dr, err := s.Nodes().UpdateDrain(ctx, n.ID, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dr.EvalIDs) != 1 || dr.EvalCreateIndex != dr.NodeModifyIndex {
		t.Fatalf("drain cancel: response %+v, want one eval created with the change", dr)
	}
	if ev := nodeUpdateEvalAt(t, s, "sys", n.ID, dr.NodeModifyIndex); ev == nil || ev.ID != dr.EvalIDs[0] {
		t.Fatalf("drain cancel: eval %s not stored at the change's index %d", dr.EvalIDs[0], dr.NodeModifyIndex)
	}

	cur, err := s.State().NodeByID(nil, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.setNodeStatus(cur, structs.NodeStatusDown, "Node heartbeat missed"); err != nil {
		t.Fatal(err)
	}
	down, err := s.State().NodeByID(nil, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if down.Status != structs.NodeStatusDown {
		t.Fatalf("node %s, want down", down.Status)
	}
	if ev := nodeUpdateEvalAt(t, s, "sys", n.ID, down.ModifyIndex); ev == nil || ev.NodeModifyIndex != down.ModifyIndex {
		t.Fatalf("status: no node eval at the status change's index %d", down.ModifyIndex)
	}
}

// An allocation the server stopped whose client never reported it ended
// (its machine was lost just before the stop) is stranded once its node
// goes down: no client will ever report it, so the node going down must
// evaluate its job, whose scheduler marks it lost (which hands its volume
// claims to the volume watcher). The job may be stopped, or purged: then
// the eval is of the alloc's own job version.
func TestNodeDownEvaluatesStrandedStops(t *testing.T) {
	for _, purge := range []bool{false, true} {
		name := map[bool]string{false: "stopped", true: "purged"}[purge]
		t.Run(name, func(t *testing.T) {
			s := testServer(t, nil)
			ctx := context.Background()
			n := testNode("a")
			registerNodes(t, s, n)
			job := testJob("svc", "service")
			job.TaskGroups[0].Tasks[0].Config = map[string]any{"command": "/bin/sleep", "args": []any{"3600"}}
			al := runJobOn(t, s, job, n, structs.AllocClientStatusRunning)

			dr, err := s.Jobs().Deregister(ctx, structs.DefaultNamespace, job.ID, purge)
			if err != nil {
				t.Fatal(err)
			}
			waitEvalTerminal(t, s, dr.EvalID)
			a, err := s.State().AllocByID(nil, al.ID)
			if err != nil || a == nil {
				t.Fatalf("alloc after the stop: %v %v", a, err)
			}
			if a.DesiredStatus != structs.AllocDesiredStatusStop || a.ClientStatus != structs.AllocClientStatusRunning {
				t.Fatalf("alloc after the stop: desired %s, client %s; want stop, running", a.DesiredStatus, a.ClientStatus)
			}

			cur, err := s.State().NodeByID(nil, n.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.setNodeStatus(cur, structs.NodeStatusDown, "Node heartbeat missed"); err != nil {
				t.Fatal(err)
			}
			down, err := s.State().NodeByID(nil, n.ID)
			if err != nil {
				t.Fatal(err)
			}
			ev := nodeUpdateEvalAt(t, s, job.ID, n.ID, down.ModifyIndex)
			if ev == nil {
				t.Fatalf("no node-update eval of %s at the node's down index %d", job.ID, down.ModifyIndex)
			}
			waitEvalTerminal(t, s, ev.ID)
			waitFor(t, 30*time.Second, "the stranded alloc marked lost", func() bool {
				a, _ := s.State().AllocByID(nil, al.ID)
				return a != nil && a.ClientStatus == structs.AllocClientStatusLost
			})
		})
	}
}

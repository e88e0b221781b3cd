package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// allocsOn returns the allocs of job on node.
func allocsOn(t *testing.T, s *Server, jobID, nodeID string) []*structs.Allocation {
	t.Helper()
	all, err := s.State().AllocsByJob(nil, structs.DefaultNamespace, jobID, true)
	if err != nil {
		t.Fatal(err)
	}
	var out []*structs.Allocation
	for _, a := range all {
		if a.NodeID == nodeID {
			out = append(out, a)
		}
	}
	return out
}

// liveAllocsOn returns the non-terminal allocs of job on node.
func liveAllocsOn(t *testing.T, s *Server, jobID, nodeID string) []*structs.Allocation {
	t.Helper()
	var out []*structs.Allocation
	for _, a := range allocsOn(t, s, jobID, nodeID) {
		if !a.TerminalStatus() {
			out = append(out, a)
		}
	}
	return out
}

// runJobOn registers job and waits for its alloc on node, which the
// client then reports with clientStatus.
func runJobOn(t *testing.T, s *Server, job *structs.Job, node *structs.Node, clientStatus string) *structs.Allocation {
	t.Helper()
	resp := registerJob(t, s, job)
	if ev := waitEvalTerminal(t, s, resp.EvalID); ev.Status != structs.EvalStatusComplete {
		t.Fatalf("eval of %s: %s %s", job.ID, ev.Status, ev.StatusDescription)
	}
	allocs := allocsOn(t, s, job.ID, node.ID)
	if len(allocs) != 1 {
		t.Fatalf("%s: %d allocs on %s", job.ID, len(allocs), node.Name)
	}
	u := allocs[0].Copy()
	u.ClientStatus = clientStatus
	if err := s.Nodes().UpdateAllocs(context.Background(), node.ID, node.SecretID, []*structs.Allocation{u}); err != nil {
		t.Fatal(err)
	}
	return allocs[0]
}

func jobStatus(s *Server, id string) string {
	j, _ := s.State().JobByID(nil, structs.DefaultNamespace, id)
	if j == nil {
		return ""
	}
	return j.Status
}

func TestNodeJoinEvals(t *testing.T) {
	s := testServer(t, nil)
	a, b := testNode("a"), testNode("b")
	registerNodes(t, s, a)

	runJobOn(t, s, testJob("done", "sysbatch"), a, structs.AllocClientStatusComplete)
	waitFor(t, 5*time.Second, "finished sysbatch job dead", func() bool { return jobStatus(s, "done") == structs.JobStatusDead })
	runJobOn(t, s, testJob("busy", "sysbatch"), a, structs.AllocClientStatusRunning)
	waitFor(t, 5*time.Second, "busy sysbatch job running", func() bool { return jobStatus(s, "busy") == structs.JobStatusRunning })
	runJobOn(t, s, testJob("sys", "system"), a, structs.AllocClientStatusRunning)
	other := testJob("elsewhere", "system")
	other.Datacenters = []string{"dc2"}
	registerJob(t, s, other)

	registerNodes(t, s, b)
	waitFor(t, 15*time.Second, "system and running sysbatch jobs placed on the new node", func() bool {
		return len(allocsOn(t, s, "sys", b.ID)) == 1 && len(allocsOn(t, s, "busy", b.ID)) == 1
	})
	// The node's evals were written in one entry, so the dead job's absence
	// is final once the others are placed.
	for _, id := range []string{"done", "elsewhere"} {
		if n := len(allocsOn(t, s, id, b.ID)); n != 0 {
			t.Fatalf("%s got %d allocs on the new node", id, n)
		}
		evs, _ := s.State().EvalsByJob(nil, "default", id)
		for _, e := range evs {
			if e.NodeID == b.ID {
				t.Fatalf("%s got a node eval for the new node: %s", id, e.TriggeredBy)
			}
		}
	}
	for _, id := range []string{"sys", "busy"} {
		evs, _ := s.State().EvalsByJob(nil, "default", id)
		var found bool
		for _, e := range evs {
			found = found || (e.NodeID == b.ID && e.TriggeredBy == structs.EvalTriggerNodeUpdate)
		}
		if !found {
			t.Fatalf("%s has no node-update eval for the new node", id)
		}
	}

	// Re-registering an unchanged ready node creates no evals.
	before, _ := s.State().Evals(nil)
	registerNodes(t, s, b)
	after, _ := s.State().Evals(nil)
	if len(after) != len(before) {
		t.Fatalf("re-register of a ready node created %d evals", len(after)-len(before))
	}
}

func TestRegisterNodeRefusals(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	n := testNode("a")
	registerNodes(t, s, n)
	cases := []struct {
		name string
		mut  func(*structs.Node)
		kind error
	}{
		{"missing ID", func(n *structs.Node) { n.ID = "" }, structs.ErrInvalid},
		{"missing secret", func(n *structs.Node) { n.SecretID = "" }, structs.ErrInvalid},
		{"missing datacenter", func(n *structs.Node) { n.Datacenter = "" }, structs.ErrInvalid},
		{"secret mismatch", func(x *structs.Node) { x.ID = n.ID; x.SecretID = uuid.NewString() }, structs.ErrPermissionDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := testNode("x")
			tc.mut(x)
			if _, err := s.Nodes().Register(ctx, x); !errors.Is(err, tc.kind) {
				t.Fatalf("err %v, want %v", err, tc.kind)
			}
		})
	}
	if _, err := s.Nodes().Heartbeat(ctx, n.ID, "wrong"); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("heartbeat with a wrong secret: %v", err)
	}
	if _, err := s.Nodes().Heartbeat(ctx, uuid.NewString(), n.SecretID); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("heartbeat of an unknown node: %v", err)
	}
}

func TestHeartbeatExpiryAndRecovery(t *testing.T) {
	s := testServer(t, func(c *Config) {
		c.HeartbeatTTL = 200 * time.Millisecond
		c.HeartbeatGrace = 200 * time.Millisecond
	})
	ctx := context.Background()
	registerJob(t, s, testJob("sys", "system"))
	n := testNode("a")
	ttl, err := s.Nodes().Register(ctx, n)
	// The floor plus a random stagger below it.
	if err != nil || ttl < 200*time.Millisecond || ttl >= 400*time.Millisecond {
		t.Fatalf("register: ttl %s (want in [200ms, 400ms)), %v", ttl, err)
	}
	beat := func() {
		if _, err := s.Nodes().Heartbeat(ctx, n.ID, n.SecretID); err != nil {
			t.Fatal(err)
		}
	}
	var first *structs.Allocation
	waitFor(t, 15*time.Second, "system alloc on the live node", func() bool {
		beat()
		if live := liveAllocsOn(t, s, "sys", n.ID); len(live) == 1 {
			first = live[0]
			return true
		}
		return false
	})

	waitFor(t, 10*time.Second, "node marked down after its TTL", func() bool {
		node, _ := s.State().NodeByID(nil, n.ID)
		return node.Status == structs.NodeStatusDown
	})
	waitFor(t, 15*time.Second, "system alloc lost", func() bool {
		a, _ := s.State().AllocByID(nil, first.ID)
		return a.ClientStatus == structs.AllocClientStatusLost && a.DesiredStatus == structs.AllocDesiredStatusStop
	})

	waitFor(t, 15*time.Second, "node ready again with a new system alloc", func() bool {
		beat()
		node, _ := s.State().NodeByID(nil, n.ID)
		live := liveAllocsOn(t, s, "sys", n.ID)
		return node.Status == structs.NodeStatusReady && len(live) == 1 && live[0].ID != first.ID
	})
	node, _ := s.State().NodeByID(nil, n.ID)
	var sawDown, sawBeat bool
	for _, e := range node.Events {
		sawDown = sawDown || e.Message == "Node heartbeat missed"
		sawBeat = sawBeat || e.Message == "Node heartbeat received"
	}
	if !sawDown || !sawBeat {
		t.Fatalf("node events lack the status changes: %+v", node.Events)
	}
}

func TestNodeEligibility(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	n := testNode("a")
	registerNodes(t, s, n)

	if _, err := s.Nodes().UpdateEligibility(ctx, n.ID, structs.NodeSchedulingIneligible); err != nil {
		t.Fatal(err)
	}
	resp := registerJob(t, s, testJob("sys", "system"))
	waitEvalTerminal(t, s, resp.EvalID)
	if got := allocsOn(t, s, "sys", n.ID); len(got) != 0 {
		t.Fatalf("ineligible node got %d allocs", len(got))
	}

	up, err := s.Nodes().UpdateEligibility(ctx, n.ID, structs.NodeSchedulingEligible)
	if err != nil {
		t.Fatal(err)
	}
	if len(up.EvalIDs) != 1 || up.EvalCreateIndex == 0 || up.NodeModifyIndex == 0 {
		t.Fatalf("eligible again: %+v", up)
	}
	waitEvalTerminal(t, s, up.EvalIDs[0])
	if got := allocsOn(t, s, "sys", n.ID); len(got) != 1 {
		t.Fatalf("eligible node got %d allocs", len(got))
	}
	// Eligible while already eligible: no evals.
	if again, err := s.Nodes().UpdateEligibility(ctx, n.ID, structs.NodeSchedulingEligible); err != nil || len(again.EvalIDs) != 0 {
		t.Fatalf("no-op eligibility: %+v %v", again, err)
	}

	cases := []struct {
		name string
		node string
		elig string
		kind error
	}{
		{"bad value", n.ID, "maybe", structs.ErrInvalid},
		{"unknown node", uuid.NewString(), structs.NodeSchedulingIneligible, structs.ErrNotFound},
	}
	for _, tc := range cases {
		if _, err := s.Nodes().UpdateEligibility(ctx, tc.node, tc.elig); !errors.Is(err, tc.kind) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.kind)
		}
	}
	if _, err := s.Nodes().UpdateDrain(ctx, n.ID, &structs.DrainSpec{Deadline: time.Hour}, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Nodes().UpdateEligibility(ctx, n.ID, structs.NodeSchedulingEligible); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("eligible during a drain: %v", err)
	}
}

func TestStopAlloc(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	n := testNode("a")
	registerNodes(t, s, n)
	a := runJobOn(t, s, testJob("sb", "sysbatch"), n, structs.AllocClientStatusRunning)

	resp, err := s.Nodes().StopAlloc(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.TriggeredBy != structs.EvalTriggerAllocStop || ev.Status != structs.EvalStatusComplete {
		t.Fatalf("stop eval = %s %s", ev.TriggeredBy, ev.Status)
	}
	got, _ := s.State().AllocByID(nil, a.ID)
	if !got.DesiredTransition.ShouldMigrate() || got.DesiredStatus != structs.AllocDesiredStatusStop {
		t.Fatalf("stopped alloc: migrate=%v desired=%q", got.DesiredTransition.ShouldMigrate(), got.DesiredStatus)
	}
	if all := allocsOn(t, s, "sb", n.ID); len(all) != 1 {
		t.Fatalf("a stopped sysbatch alloc was replaced: %d allocs", len(all))
	}
	if _, err := s.Nodes().StopAlloc(ctx, uuid.NewString()); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("stop of an unknown alloc: %v", err)
	}
}

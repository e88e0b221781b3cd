package server

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Eval delete, node evaluate and purge, and a register with its source,
// sent to a follower run on the leader; their errors keep their kind.
func TestNomadCompatWritesForwardToLeader(t *testing.T) {
	var addrs []string
	var lns []net.Listener
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns, addrs = append(lns, ln), append(addrs, ln.Addr().String())
	}
	a := clusterServer(t, "a", lns[0], addrs, nil)
	b := clusterServer(t, "b", lns[1], addrs, nil)
	var leader, follower *Server
	waitFor(t, 30*time.Second, "a leader", func() bool {
		switch {
		case a.IsLeader() && a.established.Load():
			leader, follower = a, b
		case b.IsLeader() && b.established.Load():
			leader, follower = b, a
		default:
			return false
		}
		return true
	})
	waitFor(t, 10*time.Second, "the follower to know the leader", func() bool { return follower.LeaderAddr() != "" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	done := &structs.Evaluation{ID: "00000000-0000-0000-0000-0000000000d1", Namespace: structs.DefaultNamespace, JobID: "gone",
		Type: "system", Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete}
	if _, err := leader.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{done}}); err != nil {
		t.Fatal(err)
	}
	pauseBroker(t, leader, true)
	resp, err := follower.DeleteEvals(ctx, []string{done.ID}, "")
	if err != nil || resp.Count != 1 {
		t.Fatalf("eval delete through the follower: %+v, %v", resp, err)
	}
	if _, err := follower.DeleteEvals(ctx, nil, `Status ~ "x"`); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("bad filter through the follower: %v; want ErrInvalid", err)
	}
	if _, err := follower.Nodes().Evaluate(ctx, "00000000-0000-0000-0000-00000000dead"); !errors.Is(err, structs.ErrNotFound) {
		t.Errorf("evaluate of a missing node through the follower: %v; want ErrNotFound", err)
	}

	n := testNode("fwd")
	if _, err := follower.Nodes().Register(ctx, n); err != nil {
		t.Fatal(err)
	}
	reg, err := follower.Jobs().RegisterSubmission(ctx, testJob("fwd", "sysbatch"),
		&structs.JobSubmission{Source: "job \"fwd\" {}", Format: structs.JobSubmissionFormatHCL2}, false, 0)
	if err != nil {
		t.Fatalf("register with a source through the follower: %v", err)
	}
	waitFor(t, 30*time.Second, "the source on the leader", func() bool {
		s, err := leader.State().JobSubmission(nil, structs.DefaultNamespace, "fwd", 0)
		return err == nil && s != nil && s.Source == "job \"fwd\" {}" && s.JobModifyIndex == reg.JobModifyIndex
	})
	pr, err := follower.Nodes().Purge(ctx, n.ID)
	if err != nil || pr.NodeModifyIndex == 0 {
		t.Fatalf("purge through the follower: %+v, %v", pr, err)
	}
	for _, s := range []*Server{a, b} {
		waitFor(t, 30*time.Second, "the node purged on "+s.cfg.NodeName, func() bool {
			node, err := s.State().NodeByID(nil, n.ID)
			return err == nil && node == nil
		})
	}
}

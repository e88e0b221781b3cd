package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/drover-org/drover/core/events"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/gc"
)

// A follower serves the same events as the leader from its own buffer: it
// applies the same log, so the same entry gives the same batch at the same
// index.
func TestFollowerEventStream(t *testing.T) {
	var lns []net.Listener
	var addrs []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns, addrs = append(lns, ln), append(addrs, ln.Addr().String())
	}
	r := &gcRouter{col: gc.New()}
	a := clusterServer(t, "a", lns[0], addrs, r)
	b := clusterServer(t, "b", lns[1], addrs, r)
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
	filter := &events.Filter{Topics: map[string][]string{events.TopicEvaluation: {"watched"}}, Namespace: "*"}
	subs := map[string]*events.Subscription{}
	for name, s := range map[string]*Server{"leader": leader, "follower": follower} {
		sub, err := s.Events().Subscribe(0, filter)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs[name] = sub
	}
	ev := &structs.Evaluation{ID: "00000000-0000-0000-0000-0000000000e1", Namespace: structs.DefaultNamespace, JobID: "watched",
		Type: "system", Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete}
	index, err := leader.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{ev}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, sub := range subs {
		batch, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if batch.Index != index || len(batch.Events) != 1 || batch.Events[0].Key != ev.ID || batch.Events[0].Type != events.TypeEvalUpdated {
			t.Fatalf("%s: batch at %d with %+v; want the eval's EvaluationUpdated at %d", name, batch.Index, batch.Events, index)
		}
	}
}

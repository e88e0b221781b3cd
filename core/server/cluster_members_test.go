package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testtier"
)

// Members reports every server of the Raft configuration alive with the
// facts it gives about itself, and a peer that does not answer as an
// error (shown as "failed") once the retries reach memberInfoTimeout.
func TestMembersAliveAndUnanswered(t *testing.T) {
	testtier.Slow(t, "waits out the 5 s deadline of an unanswered member")
	// Full tier, and only waits: beside the other waiting tests.
	t.Parallel()
	var lns []net.Listener
	var addrs []string
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns, addrs = append(lns, ln), append(addrs, ln.Addr().String())
	}
	r := &gcRouter{}
	a := clusterServer(t, "a", lns[0], addrs, r)
	clusterServer(t, "b", lns[1], addrs, r)
	waitFor(t, 30*time.Second, "both servers in a's Raft configuration", func() bool {
		p, err := a.Operator().RaftPeers()
		return err == nil && len(p.Servers) == 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	members, err := a.Operator().Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 {
		t.Fatalf("members = %+v; want a and b", members)
	}
	for i, want := range []string{"a", "b"} {
		if m := members[i]; m.Name != want || m.Status != "alive" || m.Address != addrs[i] {
			t.Errorf("member %d = %+v; want %s alive at %s", i, m, want, addrs[i])
		}
	}

	// Nobody listens at dead: every try fails at once and is tried again
	// until the deadline, which ends it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	start := time.Now()
	if info, err := (leaderLink{a}).peerInfo(ctx, dead); err == nil {
		t.Fatalf("peerInfo(%s) = %+v; want an error", dead, info)
	}
	if took := time.Since(start); took < memberInfoTimeout/2 {
		t.Errorf("peerInfo gave up after %v; want it to retry until about %v", took, memberInfoTimeout)
	}
}

package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func listen(t *testing.T) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, ln.Addr().String()
}

// JoinServers: a lone cluster's server adds a server that has no state
// yet (it then belongs to the cluster); joining a member again counts as
// joined; a server of another cluster is refused naming it; a malformed
// address is refused before any RPC. ForceLeave refuses an alive server
// with its kind and does nothing for an unknown name (Nomad's no-op).
func TestJoinServersAndForceLeave(t *testing.T) {
	lnA, addrA := listen(t)
	lnB, addrB := listen(t)
	lnC, addrC := listen(t)
	r := &gcRouter{}
	a := clusterServer(t, "a", lnA, []string{addrA}, r)
	// b waits for a second server it is never told of: no state of its own.
	b := clusterServerExpect(t, "b", lnB, []string{addrB}, 2, r)
	c := clusterServer(t, "c", lnC, []string{addrC}, r)
	waitFor(t, 30*time.Second, "a and c to lead their own clusters", func() bool { return a.IsLeader() && c.IsLeader() })
	if b.Info().HasState {
		t.Fatal("b has Raft state before any join")
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := a.JoinServers(ctx, []string{addrB})
	if err != nil || n != 1 {
		t.Fatalf("JoinServers(b) = %d, %v; want 1", n, err)
	}
	waitFor(t, 30*time.Second, "b in a's cluster with state", func() bool {
		p, err := a.Operator().RaftPeers()
		return err == nil && len(p.Servers) == 2 && b.Info().HasState
	})
	if n, err := a.JoinServers(ctx, []string{addrB}); err != nil || n != 1 {
		t.Errorf("JoinServers(b) again = %d, %v; want 1 (already a member)", n, err)
	}
	n, err = a.JoinServers(ctx, []string{addrC})
	if err == nil || n != 0 || !strings.Contains(err.Error(), `server "c" belongs to another cluster`) {
		t.Errorf("JoinServers(c) = %d, %v; want 0 and a refusal naming c", n, err)
	}
	if _, err := a.JoinServers(ctx, []string{"no-port"}); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "address") {
		t.Errorf("JoinServers(no-port) = %v; want ErrInvalid naming address", err)
	}

	if err := a.ForceLeave(ctx, "b"); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "alive") {
		t.Errorf("ForceLeave(b alive) = %v; want ErrInvalid saying it is alive", err)
	}
	if err := a.ForceLeave(ctx, "nosuch"); err != nil {
		t.Errorf("ForceLeave(nosuch) = %v; want a no-op, as Nomad's", err)
	}
	if p, _ := a.Operator().RaftPeers(); len(p.Servers) != 2 {
		t.Errorf("the refused force-leaves changed the configuration: %+v", p.Servers)
	}
}

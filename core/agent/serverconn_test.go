package agent

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
)

// startHeartbeatServer serves Node.Heartbeat, answering with fail's error
// while it is set, and counts the calls.
func startHeartbeatServer(t *testing.T, fail *atomic.Pointer[error], calls *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(nil, hclog.NewNullLogger())
	rpc.Handle(srv, "Node.Heartbeat", func(context.Context, *server.NodeAuthArgs) (*server.TTLReply, error) {
		calls.Add(1)
		if e := fail.Load(); e != nil {
			return nil, *e
		}
		return &server.TTLReply{TTL: time.Minute}, nil
	})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	return ln.Addr().String()
}

// A server answering "no leader" (an election) is kept for
// rpc.NoLeaderPatience: the call fails there without trying the others,
// which would make every node handshake with another server at once.
// Past the patience the client moves on; an unreachable server is left at
// once.
func TestRemoteServersNoLeaderPatience(t *testing.T) {
	var failA, failB atomic.Pointer[error]
	var callsA, callsB atomic.Int64
	noLeader := structs.NewError(structs.ErrNoLeader, "No cluster leader")
	failA.Store(&noLeader)
	a := startHeartbeatServer(t, &failA, &callsA)
	b := startHeartbeatServer(t, &failB, &callsB)
	pool := rpc.NewPool(nil)
	defer pool.Close()
	r, err := newRemoteServers(pool, []string{a, b}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for i := 0; i < 3; i++ {
		if _, err := r.Heartbeat(ctx, "n", "s"); !errors.Is(err, structs.ErrNoLeader) {
			t.Fatalf("heartbeat %d during an election: %v, want ErrNoLeader", i, err)
		}
	}
	if addr, _ := r.current(); addr != a || callsB.Load() != 0 {
		t.Fatalf("left %s for %s (%d calls there) within the patience", a, addr, callsB.Load())
	}

	// The leader is known again: the streak ends.
	failA.Store(nil)
	if _, err := r.Heartbeat(ctx, "n", "s"); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	cleared := r.noLeaderSince.IsZero()
	r.mu.Unlock()
	if !cleared {
		t.Fatal("a success left the no-leader streak running")
	}

	// "No leader" for longer than the patience: the next server serves.
	failA.Store(&noLeader)
	if _, err := r.Heartbeat(ctx, "n", "s"); !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("first no-leader answer: %v", err)
	}
	r.mu.Lock()
	r.noLeaderSince = time.Now().Add(-rpc.NoLeaderPatience)
	r.mu.Unlock()
	if _, err := r.Heartbeat(ctx, "n", "s"); err != nil {
		t.Fatalf("past the patience: %v, want the next server's answer", err)
	}
	if addr, _ := r.current(); addr != b || callsB.Load() != 1 {
		t.Fatalf("past the patience: on %s with %d calls to %s", addr, callsB.Load(), b)
	}

	// Unavailable (shut down) is left at once.
	unavailable := structs.NewError(structs.ErrUnavailable, "server is shut down")
	failB.Store(&unavailable)
	failA.Store(nil)
	if _, err := r.Heartbeat(ctx, "n", "s"); err != nil {
		t.Fatalf("with b unavailable: %v, want a's answer", err)
	}
	if addr, _ := r.current(); addr != a {
		t.Fatalf("on %s after b was unavailable, want %s", addr, a)
	}
}

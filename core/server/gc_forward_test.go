package server

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	"github.com/drover-org/drover/plugins/gc"
	sdkgc "github.com/drover-org/drover/sdk/gc"
)

// clusterServer is one server of a plaintext test cluster: Raft and RPC
// share one port through the agent's mux, as in production.
func clusterServer(t *testing.T, name string, ln net.Listener, peers []string, router GCRouter) *Server {
	t.Helper()
	return clusterServerExpect(t, name, ln, peers, len(peers), router)
}

// clusterServerExpect is clusterServer waiting for expect servers before
// it bootstraps.
func clusterServerExpect(t *testing.T, name string, ln net.Listener, peers []string, expect int, router GCRouter) *Server {
	t.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	mux := rpc.NewMux(ln, nil, logger)
	layer, err := rpc.NewRaftLayer(mux.RaftListener(), ln.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := rpc.NewPool(nil)
	rs := rpc.NewServer(nil, logger)
	s, err := New(Config{
		Logger: logger, NodeName: name, DataDir: t.TempDir(), RPCAddr: ln.Addr().String(),
		RaftLayer: layer, RPCPool: pool, BootstrapExpect: expect, RetryJoin: peers,
		RetryInterval: 50 * time.Millisecond, Schedulers: builtin.InProcess{}, GC: router,
		RaftTiming: &RaftTiming{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
			LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.RegisterRPC(rs)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = rs.Serve(mux.GRPCListener())
	}()
	t.Cleanup(func() {
		_ = s.Shutdown()
		rs.Stop()
		<-served
		pool.Close()
		_ = mux.Close()
	})
	return s
}

// Force GC sent to a follower runs on the leader; its errors keep their
// kind across the forward.
func TestForceGCForwardsToLeader(t *testing.T) {
	var lns []net.Listener
	var addrs []string
	for i := 0; i < 2; i++ {
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
	waitFor(t, 10*time.Second, "the follower to know the leader", func() bool { return follower.LeaderAddr() != "" })

	evals := []*structs.Evaluation{{ID: "00000000-0000-0000-0000-000000000001", Namespace: structs.DefaultNamespace, JobID: "gone",
		Type: "system", Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete}}
	if _, err := leader.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals}); err != nil {
		t.Fatal(err)
	}
	// Force GC reaps what is older than sdk/gc.ForceThreshold (1 ms), by
	// the time the leader stamped on the entry: on a fast machine the call
	// below can come sooner.
	stored, err := leader.State().EvalByID(nil, evals[0].ID)
	if err != nil || stored == nil {
		t.Fatalf("eval after its write: %+v, %v", stored, err)
	}
	waitFor(t, 10*time.Second, "the eval older than the force threshold", func() bool {
		return time.Since(time.Unix(0, stored.ModifyTime)) > sdkgc.ForceThreshold
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := follower.ForceGC(ctx); err != nil {
		t.Fatalf("ForceGC through the follower: %v", err)
	}
	// ForceGC answered once the leader (perhaps a new one: a loaded
	// machine may hold an election meanwhile) committed the reap; each
	// server applies it in its own time.
	for _, s := range []*Server{a, b} {
		waitFor(t, 30*time.Second, "the eval reaped on "+s.cfg.NodeName, func() bool {
			e, err := s.State().EvalByID(nil, evals[0].ID)
			return err == nil && e == nil
		})
	}

	r.set(nil, structs.NewError(structs.ErrUnavailable, "gc plugin restarting"))
	if err := follower.ForceGC(ctx); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("forwarded ForceGC with the plugin unavailable: %v, want ErrUnavailable", err)
	}
}

package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/plugins/builtin"
)

var errInjected = errors.New("injected step-up failure")

// startServer starts a server without waiting for a leader (a server
// waiting to join a cluster has none yet).
func startServer(t *testing.T, mut func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		Logger:       hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}}),
		Schedulers:   builtin.InProcess{},
		KnownDrivers: []string{"raw_exec"},
		HeartbeatTTL: time.Minute,
	}
	mut(&cfg)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

// A step-up that fails is retried, and the attempt that succeeds restores
// what the failed ones did not: an eval left pending by the previous
// leadership is enqueued and processed.
func TestStepUpSucceedsOnRetry(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	onDisk := func(c *Config) { onDiskAlone(c, dir, addr) }
	s := testServer(t, onDisk)
	// With the leader's components off, the eval is committed but never
	// enqueued: it is still pending when the server stops.
	s.revokeLeadership()
	resp := registerJob(t, s, testJob("left-pending", "sysbatch"))
	if st := evalStatus(t, s, resp.EvalID); st != structs.EvalStatusPending {
		t.Fatalf("eval %s before restart, want pending", st)
	}
	if err := s.Shutdown(); err != nil {
		t.Fatal(err)
	}

	var calls atomic.Int32
	s2 := testServer(t, func(c *Config) {
		onDisk(c)
		c.StepUpBackoff = 10 * time.Millisecond
		c.stepUpFault = func() error {
			if calls.Add(1) <= 2 {
				return errInjected
			}
			return nil
		}
	})
	// testServer returned once the leader was established.
	if n := calls.Load(); n != 3 {
		t.Fatalf("step-up ran %d times, want 2 failures and a success", n)
	}
	if !s2.IsLeader() || !s2.established.Load() || !s2.broker.Enabled() || !s2.blocked.Enabled() {
		t.Fatal("leader not established after a successful retry")
	}
	waitFor(t, 15*time.Second, "the pending eval processed", func() bool {
		return evalStatus(t, s2, resp.EvalID) == structs.EvalStatusComplete
	})
}

// A leader that cannot establish itself hands leadership to another server
// after StepUpAttempts failures; while it is alone it keeps retrying.
func TestStepUpGivesUpAndStepsDown(t *testing.T) {
	testtier.Slow(t, "forms a three-server Raft cluster and waits out its elections")
	// Full tier, and only waits: beside the other waiting tests.
	t.Parallel()
	var badCalls atomic.Int32
	type peer struct{ id, addr string }
	peers := []peer{{"s1", freeAddr(t)}, {"s2", freeAddr(t)}, {"s3", freeAddr(t)}}
	servers := make([]*Server, len(peers))
	for i, p := range peers {
		dir, addr, id := t.TempDir(), p.addr, p.id
		servers[i] = startServer(t, func(c *Config) {
			c.NodeName, c.DataDir, c.RPCAddr = id, dir, addr
			c.StepUpAttempts, c.StepUpBackoff = 3, 20*time.Millisecond
			// clusterServer's timers: elections in a fraction of a second.
			c.RaftTiming = &RaftTiming{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
				LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 10 * time.Millisecond}
			if i == 0 {
				// s1 bootstraps alone and cannot ever establish itself.
				c.stepUpFault = func() error { badCalls.Add(1); return errInjected }
			} else {
				// Wait to be added to s1's cluster.
				c.BootstrapExpect = 3
			}
		})
	}
	bad := servers[0]
	waitFor(t, 30*time.Second, "s1 elected", bad.IsLeader)
	waitFor(t, 30*time.Second, "s1 failed a full round of attempts alone", func() bool { return badCalls.Load() > 3 })
	if !bad.IsLeader() {
		t.Fatal("a lone leader that failed to establish itself should stay leader and retry")
	}

	ctx := context.Background()
	for _, p := range peers[1:] {
		waitFor(t, 60*time.Second, "peer "+p.id+" added", func() bool {
			for _, s := range servers {
				if s.IsLeader() {
					return s.Operator().AddRaftPeer(ctx, p.id, p.addr) == nil
				}
			}
			return false
		})
	}
	// The server that stepped down must not keep its broker enabled.
	waitFor(t, 60*time.Second, "a healthy leader other than s1", func() bool {
		for _, s := range servers[1:] {
			if s.IsLeader() && s.established.Load() {
				return !bad.IsLeader() && !bad.broker.Enabled()
			}
		}
		return false
	})
	if n := badCalls.Load(); n < 3 {
		t.Errorf("s1 stepped down after %d attempts, want at least 3", n)
	}
}

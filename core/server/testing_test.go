package server

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/server/internal/servertest"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testServer(t *testing.T, mut func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		Logger:       hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}}),
		DevMode:      true,
		Schedulers:   builtin.InProcess{},
		KnownDrivers: []string{"raw_exec"},
		HeartbeatTTL: time.Minute,
	}
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// onDiskAlone makes c a server that keeps its Raft log and snapshots in
// dir and listens on addr, the only voter of its cluster, with short Raft
// timers: a lone voter has no follower to miss its heartbeats and no
// quorum to lose, so they cost nothing, and its first election after a
// start takes one heartbeat timeout (1-2 s with the production timers,
// which TestRaftTimingDefaults checks; 50-100 ms here).
func onDiskAlone(c *Config, dir, addr string) {
	c.DevMode, c.DataDir, c.RPCAddr = false, dir, addr
	c.RaftTiming = &RaftTiming{HeartbeatTimeout: 50 * time.Millisecond, ElectionTimeout: 50 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond, CommitTimeout: 5 * time.Millisecond}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// testNode is servertest.Node.
func testNode(name string) *structs.Node { return servertest.Node(name) }

// testJob is a one-group job of type typ. It carries the built-in
// declaration of typ, as the leader stamps it on registration, so that a
// test may also write it to state directly; registering replaces it with
// the declaration of the router the server runs.
func testJob(id, typ string) *structs.Job { return servertest.Job(id, typ, builtinBehavior(typ)) }

// builtinBehavior is the built-in declaration of job type typ (nil: none).
func builtinBehavior(typ string) *structs.JobTypeBehavior {
	if d, ok := (builtin.InProcess{}).JobType(typ); ok {
		return &d
	}
	return nil
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func evalStatus(t *testing.T, s *Server, id string) string {
	ev, err := s.State().EvalByID(nil, id)
	if err != nil {
		t.Fatal(err)
	}
	if ev == nil {
		return ""
	}
	return ev.Status
}

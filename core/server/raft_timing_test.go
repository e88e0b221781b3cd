package server

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/plugins/builtin"
)

// A server on disk runs Raft with timers that a loaded machine does not
// trip: hashicorp/raft's (and Nomad's) 1s heartbeat and election
// timeouts, not the 500ms/250ms that lost leaders under load.
// (raftstore's tests cover the multiplier and RaftTiming.)
func TestRaftTimingDefaults(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	// The timers are set at New: no need to wait out the first election
	// they time.
	s := startServer(t, func(c *Config) { c.DevMode, c.DataDir, c.RPCAddr = false, dir, addr })
	rc := s.raft.ReloadableConfig()
	if rc.HeartbeatTimeout != time.Second || rc.ElectionTimeout != time.Second {
		t.Errorf("heartbeat %s, election %s; want 1s each", rc.HeartbeatTimeout, rc.ElectionTimeout)
	}
}

// A server with a bad multiplier does not start, and says why.
func TestRaftTimingInvalid(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), RPCAddr: freeAddr(t), RaftMultiplier: 11, Schedulers: builtin.InProcess{}}
	if s, err := New(cfg); err == nil || !strings.Contains(err.Error(), "raft_multiplier") {
		if s != nil {
			_ = s.Shutdown()
		}
		t.Fatalf("New with raft_multiplier 11: %v", err)
	}
}

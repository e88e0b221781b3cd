package server

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
)

// A server on disk runs Raft with timers that a loaded machine does not
// trip: hashicorp/raft's (and Nomad's) 1s heartbeat and election
// timeouts, not the 500ms/250ms that lost leaders under load.
func TestRaftTimingDefaults(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	s := testServer(t, func(c *Config) { c.DevMode, c.DataDir, c.RPCAddr = false, dir, addr })
	rc := s.raft.ReloadableConfig()
	if rc.HeartbeatTimeout != time.Second || rc.ElectionTimeout != time.Second {
		t.Errorf("heartbeat %s, election %s; want 1s each", rc.HeartbeatTimeout, rc.ElectionTimeout)
	}
}

func TestRaftTimingMultiplier(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		cfg                                Config
		heartbeat, election, lease, commit time.Duration
	}{
		{"default", Config{}, time.Second, time.Second, 500 * time.Millisecond, 50 * time.Millisecond},
		{"one", Config{RaftMultiplier: 1}, time.Second, time.Second, 500 * time.Millisecond, 50 * time.Millisecond},
		{"five", Config{RaftMultiplier: 5}, 5 * time.Second, 5 * time.Second, 2500 * time.Millisecond, 250 * time.Millisecond},
		{"max", Config{RaftMultiplier: MaxRaftMultiplier}, 10 * time.Second, 10 * time.Second, 5 * time.Second, 500 * time.Millisecond},
		{"explicit for a failover test", Config{RaftTiming: &RaftTiming{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond}},
			200 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := raft.DefaultConfig()
			if err := tc.cfg.applyRaftTiming(rc); err != nil {
				t.Fatal(err)
			}
			if rc.HeartbeatTimeout != tc.heartbeat || rc.ElectionTimeout != tc.election || rc.LeaderLeaseTimeout != tc.lease || rc.CommitTimeout != tc.commit {
				t.Errorf("heartbeat %s, election %s, lease %s, commit %s; want %s, %s, %s, %s",
					rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, rc.CommitTimeout, tc.heartbeat, tc.election, tc.lease, tc.commit)
			}
		})
	}
}

func TestRaftTimingInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"multiplier above 10", Config{RaftMultiplier: 11}, "raft_multiplier: must be between 1 and 10 (got 11)"},
		{"negative multiplier", Config{RaftMultiplier: -1}, "raft_multiplier: must be between 1 and 10 (got -1)"},
		{"lease over heartbeat", Config{RaftTiming: &RaftTiming{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 2 * time.Second}}, "leader lease (2s) must not exceed the heartbeat timeout (1s)"},
		{"election under heartbeat", Config{RaftTiming: &RaftTiming{HeartbeatTimeout: time.Second, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond}}, "election timeout (100ms) must not be shorter"},
		{"zero", Config{RaftTiming: &RaftTiming{}}, "at least 5ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.applyRaftTiming(raft.DefaultConfig())
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid-request error containing %q", err, tc.want)
			}
		})
	}
	// A server with a bad multiplier does not start, and says why.
	cfg := Config{DataDir: t.TempDir(), RPCAddr: freeAddr(t), RaftMultiplier: 11, Schedulers: builtin.InProcess{}}
	if s, err := New(cfg); err == nil || !strings.Contains(err.Error(), "raft_multiplier") {
		if s != nil {
			_ = s.Shutdown()
		}
		t.Fatalf("New with raft_multiplier 11: %v", err)
	}
}

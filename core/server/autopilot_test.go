package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// The autopilot configuration written through a follower lands on the
// leader (CAS included) and reads back on both; the health a follower
// answers is the leader's view of both servers.
func TestAutopilotThroughFollower(t *testing.T) {
	var addrs []string
	var lns []net.Listener
	for range 2 {
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

	cfg := structs.DefaultAutopilotConfig()
	cfg.MinQuorum, cfg.ServerStabilizationTime = 2, 42*time.Second
	ok, idx, err := follower.Operator().SetAutopilotConfig(ctx, cfg, true, 0)
	if err != nil || !ok || idx == 0 {
		t.Fatalf("CAS at 0 through the follower: %v %d %v", ok, idx, err)
	}
	if ok, _, err := follower.Operator().SetAutopilotConfig(ctx, cfg, true, 0); err != nil || ok {
		t.Fatalf("stale CAS through the follower: %v %v; want false", ok, err)
	}
	bad := cfg.Copy()
	bad.LastContactThreshold = 0
	if _, _, err := follower.Operator().SetAutopilotConfig(ctx, bad, false, 0); structs.HTTPStatus(err) != 400 {
		t.Errorf("bad config through the follower: %v; want an invalid-request error", err)
	}
	for _, s := range []*Server{leader, follower} {
		waitFor(t, 10*time.Second, "the configuration on "+s.raftID(), func() bool {
			c, i, err := s.Operator().AutopilotConfig()
			return err == nil && i == idx && c.MinQuorum == 2 && c.ServerStabilizationTime == 42*time.Second
		})
	}

	var h *structs.OperatorHealthReply
	waitFor(t, 20*time.Second, "both servers alive in the health", func() bool {
		h, err = follower.Operator().AutopilotHealth(ctx)
		if err != nil || len(h.Servers) != 2 || len(h.Voters) != 2 {
			return false
		}
		for _, s := range h.Servers {
			if s.SerfStatus != "alive" {
				return false
			}
		}
		return true
	})
	if h.Leader != leader.raftID() {
		t.Errorf("health names leader %q; want %q", h.Leader, leader.raftID())
	}
}

// The agent's autopilot block is the configuration of a cluster that has
// none: the leader writes it at step-up.
func TestAutopilotConfigFromAgent(t *testing.T) {
	want := structs.DefaultAutopilotConfig()
	want.MinQuorum, want.CleanupDeadServers = 3, false
	s := testServer(t, func(c *Config) { c.Autopilot = want })
	waitFor(t, 20*time.Second, "the agent's autopilot configuration in the state", func() bool {
		c, idx, err := s.Operator().AutopilotConfig()
		return err == nil && idx != 0 && c.MinQuorum == 3 && !c.CleanupDeadServers
	})
}

package server

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

func voters(ids ...string) []raft.Server {
	var out []raft.Server
	for _, id := range ids {
		out = append(out, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":4647"), Suffrage: raft.Voter})
	}
	return out
}

func stats(term, index uint64, contact time.Duration) *AutopilotStats {
	return &AutopilotStats{LastTerm: term, LastIndex: index, LastContact: contact, Version: "1.0"}
}

// One autopilot round's decision: health, failure tolerance and which dead
// server (if any) is removed.
func TestDecideAutopilot(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	def := structs.DefaultAutopilotConfig()
	cases := []struct {
		name      string
		cfg       func(*structs.AutopilotConfig)
		servers   []raft.Server
		probes    map[string]*AutopilotStats
		failedFor map[string]time.Duration // tracked as failed since now-d
		healthy   bool
		tolerance int
		unhealthy []string
		remove    string
	}{
		{name: "all healthy", servers: voters("a", "b", "c"),
			probes:  map[string]*AutopilotStats{"a": stats(2, 100, 0), "b": stats(2, 99, 10*time.Millisecond), "c": stats(2, 100, 50*time.Millisecond)},
			healthy: true, tolerance: 1},
		{name: "stale contact", servers: voters("a", "b", "c"),
			probes:  map[string]*AutopilotStats{"a": stats(2, 100, 0), "b": stats(2, 100, time.Second), "c": stats(2, 100, 0)},
			healthy: false, tolerance: 0, unhealthy: []string{"b"}},
		{name: "trailing logs", servers: voters("a", "b", "c"),
			probes:  map[string]*AutopilotStats{"a": stats(2, 1000, 0), "b": stats(2, 100, 0), "c": stats(2, 999, 0)},
			healthy: false, tolerance: 0, unhealthy: []string{"b"}},
		{name: "old term", servers: voters("a", "b", "c"),
			probes:  map[string]*AutopilotStats{"a": stats(3, 100, 0), "b": stats(2, 100, 0), "c": stats(3, 100, 0)},
			healthy: false, unhealthy: []string{"b"}},
		{name: "never heard from the leader", servers: voters("a", "b", "c"),
			probes:  map[string]*AutopilotStats{"a": stats(2, 100, 0), "b": stats(2, 100, -1), "c": stats(2, 100, 0)},
			healthy: false, unhealthy: []string{"b"}},
		{name: "dead but not for long", servers: voters("a", "b", "c"),
			probes:    map[string]*AutopilotStats{"a": stats(2, 100, 0), "c": stats(2, 100, 0)},
			failedFor: map[string]time.Duration{"b": 5 * time.Second},
			healthy:   false, unhealthy: []string{"b"}},
		{name: "dead past stabilization is removed", servers: voters("a", "b", "c"),
			probes:    map[string]*AutopilotStats{"a": stats(2, 100, 0), "c": stats(2, 100, 0)},
			failedFor: map[string]time.Duration{"b": 11 * time.Second},
			healthy:   false, unhealthy: []string{"b"}, remove: "b"},
		{name: "cleanup off", cfg: func(c *structs.AutopilotConfig) { c.CleanupDeadServers = false }, servers: voters("a", "b", "c"),
			probes:    map[string]*AutopilotStats{"a": stats(2, 100, 0), "c": stats(2, 100, 0)},
			failedFor: map[string]time.Duration{"b": time.Hour},
			healthy:   false, unhealthy: []string{"b"}, remove: "b"}, // decided; the caller checks the switch
		{name: "min quorum keeps it", cfg: func(c *structs.AutopilotConfig) { c.MinQuorum = 3 }, servers: voters("a", "b", "c"),
			probes:    map[string]*AutopilotStats{"a": stats(2, 100, 0), "c": stats(2, 100, 0)},
			failedFor: map[string]time.Duration{"b": time.Hour},
			healthy:   false, unhealthy: []string{"b"}},
		{name: "two of five dead: the older goes first", servers: voters("a", "b", "c", "d", "e"),
			probes:    map[string]*AutopilotStats{"a": stats(2, 100, 0), "c": stats(2, 100, 0), "e": stats(2, 100, 0)},
			failedFor: map[string]time.Duration{"b": time.Minute, "d": 2 * time.Minute},
			healthy:   false, unhealthy: []string{"b", "d"}, remove: "d"},
		{name: "no quorum left alive: nothing removed", servers: voters("a", "b", "c", "d", "e"),
			probes:    map[string]*AutopilotStats{"a": stats(2, 100, 0), "e": stats(2, 100, 0)},
			failedFor: map[string]time.Duration{"b": time.Hour, "c": time.Hour, "d": time.Hour},
			healthy:   false, unhealthy: []string{"b", "c", "d"}},
		{name: "a dead non-voter always goes", servers: append(voters("a", "b", "c"), raft.Server{ID: "n", Address: "n:4647", Suffrage: raft.Nonvoter}),
			probes:    map[string]*AutopilotStats{"a": stats(2, 100, 0), "b": stats(2, 100, 0), "c": stats(2, 100, 0)},
			failedFor: map[string]time.Duration{"n": time.Minute},
			healthy:   false, tolerance: 1, unhealthy: []string{"n"}, remove: "n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := def.Copy()
			if tc.cfg != nil {
				tc.cfg(cfg)
			}
			tracked := map[string]*trackedServer{"gone": {ID: "gone"}}
			for id, d := range tc.failedFor {
				tracked[id] = &trackedServer{ID: id, failedSince: now.Add(-d), stableSince: now.Add(-d)}
			}
			reply, remove := decideAutopilot(cfg, tc.servers, "a", tc.probes, tracked, now)
			if _, ok := tracked["gone"]; ok {
				t.Error("a server no longer in the configuration is still tracked")
			}
			if reply.Healthy != tc.healthy || reply.FailureTolerance != tc.tolerance || reply.Leader != "a" {
				t.Errorf("healthy %v tolerance %d leader %s; want %v %d a", reply.Healthy, reply.FailureTolerance, reply.Leader, tc.healthy, tc.tolerance)
			}
			var unhealthy []string
			for _, s := range reply.Servers {
				if !s.Healthy {
					unhealthy = append(unhealthy, s.ID)
				}
				if alive := tc.probes[s.ID] != nil; alive != (s.SerfStatus == "alive") {
					t.Errorf("%s: SerfStatus %s", s.ID, s.SerfStatus)
				}
			}
			if len(unhealthy) != len(tc.unhealthy) || (len(unhealthy) > 0 && unhealthy[0] != tc.unhealthy[0]) {
				t.Errorf("unhealthy %v; want %v", unhealthy, tc.unhealthy)
			}
			got := ""
			if remove != nil {
				got = remove.ID
			}
			if got != tc.remove {
				t.Errorf("removes %q; want %q", got, tc.remove)
			}
		})
	}
}

// StableSince moves when a server's health changes, not on every round.
func TestDecideAutopilotStableSince(t *testing.T) {
	cfg := structs.DefaultAutopilotConfig()
	t0 := time.Unix(1_000_000, 0)
	tracked := map[string]*trackedServer{}
	healthy := map[string]*AutopilotStats{"a": stats(2, 1, 0), "b": stats(2, 1, 0)}
	sick := map[string]*AutopilotStats{"a": stats(2, 1, 0), "b": stats(2, 1, time.Hour)}
	stableOf := func(r *structs.OperatorHealthReply) time.Time { return r.Servers[1].StableSince }
	r1, _ := decideAutopilot(cfg, voters("a", "b"), "a", healthy, tracked, t0)
	r2, _ := decideAutopilot(cfg, voters("a", "b"), "a", healthy, tracked, t0.Add(time.Second))
	r3, _ := decideAutopilot(cfg, voters("a", "b"), "a", sick, tracked, t0.Add(2*time.Second))
	if !stableOf(r1).Equal(t0) || !stableOf(r2).Equal(t0) || !stableOf(r3).Equal(t0.Add(2*time.Second)) {
		t.Errorf("StableSince %v %v %v", stableOf(r1), stableOf(r2), stableOf(r3))
	}
}

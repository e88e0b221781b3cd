package agent

import (
	"strings"
	"testing"
)

// raft_multiplier is Nomad's server knob: 1..10, checked at parse time
// with an error that names it, and merged like any other server field.
func TestConfigRaftMultiplier(t *testing.T) {
	const base = "data_dir = \"/x\"\nserver {\n  enabled = true\n  raft_multiplier = %s\n}\n"
	for _, bad := range []string{"11", "-1"} {
		_, err := ParseConfig("agent.hcl", []byte(strings.Replace(base, "%s", bad, 1)))
		want := "server.raft_multiplier: must be between 1 and 10 (got " + bad + ")"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("raft_multiplier = %s: %v; want %q", bad, err, want)
		}
	}
	c, err := ParseConfig("agent.hcl", []byte(strings.Replace(base, "%s", "5", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.RaftMultiplier != 5 {
		t.Errorf("raft_multiplier %d, want 5", c.Server.RaftMultiplier)
	}
	merged := mergeServer(&ServerConfig{Enabled: true, RaftMultiplier: 2}, &ServerConfig{RaftMultiplier: 7})
	if merged.RaftMultiplier != 7 {
		t.Errorf("merged raft_multiplier %d, want the later file's 7", merged.RaftMultiplier)
	}
	if merged = mergeServer(&ServerConfig{Enabled: true, RaftMultiplier: 2}, &ServerConfig{}); merged.RaftMultiplier != 2 {
		t.Errorf("merged raft_multiplier %d, want 2 kept", merged.RaftMultiplier)
	}
}

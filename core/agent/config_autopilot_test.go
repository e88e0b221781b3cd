package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Nomad's autopilot block decodes over Nomad's defaults; a bad value is
// refused when the config is validated, naming the key.
func TestAutopilotBlock(t *testing.T) {
	const head = "data_dir = \"/d\"\nserver {\n  enabled = true\n}\n"
	cases := []struct {
		name, block, want string
		check             func(*structs.AutopilotConfig) bool
	}{
		{"none", "", "", func(c *structs.AutopilotConfig) bool { return c == nil }},
		{"partial", "autopilot {\n  cleanup_dead_servers = false\n  min_quorum = 3\n}\n", "", func(c *structs.AutopilotConfig) bool {
			return !c.CleanupDeadServers && c.MinQuorum == 3 && c.LastContactThreshold == 200*time.Millisecond &&
				c.MaxTrailingLogs == 250 && c.ServerStabilizationTime == 10*time.Second
		}},
		{"all", `autopilot {
  cleanup_dead_servers      = true
  last_contact_threshold    = "1s"
  max_trailing_logs         = 500
  min_quorum                = 5
  server_stabilization_time = "30s"
  enable_redundancy_zones   = true
  disable_upgrade_migration = true
  enable_custom_upgrades    = true
}
`, "", func(c *structs.AutopilotConfig) bool {
			return c.CleanupDeadServers && c.LastContactThreshold == time.Second && c.MaxTrailingLogs == 500 && c.MinQuorum == 5 &&
				c.ServerStabilizationTime == 30*time.Second && c.EnableRedundancyZones && c.DisableUpgradeMigration && c.EnableCustomUpgrades
		}},
		{"bad duration", "autopilot {\n  last_contact_threshold = \"soon\"\n}\n", "autopilot.last_contact_threshold", nil},
		{"zero threshold", "autopilot {\n  last_contact_threshold = \"0s\"\n}\n", "LastContactThreshold", nil},
		{"negative quorum", "autopilot {\n  min_quorum = -1\n}\n", "autopilot.min_quorum", nil},
		{"unknown key", "autopilot {\n  cleanup = true\n}\n", "cleanup", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig("agent.hcl", []byte(head+tc.block))
			if err == nil {
				err = cfg.Validate()
			}
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v; want one naming %s", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range cfg.Warnings {
				if strings.Contains(w.Key, "autopilot") {
					t.Errorf("warned about the served block: %v", w)
				}
			}
			got, err := cfg.autopilotConfig()
			if err != nil || !tc.check(got) {
				t.Fatalf("autopilot config %+v, %v", got, err)
			}
		})
	}
}

func TestAutopilotBlockMerge(t *testing.T) {
	no, three := false, 3
	a := &Config{Autopilot: &AutopilotBlock{CleanupDeadServers: &no, LastContactThreshold: "1s"}}
	b := &Config{Autopilot: &AutopilotBlock{MinQuorum: &three, LastContactThreshold: "2s"}}
	r := a.Merge(b)
	got, err := r.autopilotConfig()
	if err != nil || got.CleanupDeadServers || got.MinQuorum != 3 || got.LastContactThreshold != 2*time.Second {
		t.Fatalf("merged %+v, %v", got, err)
	}
}

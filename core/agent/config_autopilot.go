package agent

import (
	"fmt"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// AutopilotBlock is Nomad's top-level `autopilot { … }` block: the
// autopilot configuration a new cluster starts with. The leader writes it
// when the cluster has none yet; after that the configuration lives in
// Raft and changes through `operator autopilot set-config` (as in Nomad,
// a later change of the block does not override it).
type AutopilotBlock struct {
	CleanupDeadServers      *bool  `hcl:"cleanup_dead_servers,optional"`
	LastContactThreshold    string `hcl:"last_contact_threshold,optional"`
	MaxTrailingLogs         *int   `hcl:"max_trailing_logs,optional"`
	MinQuorum               *int   `hcl:"min_quorum,optional"`
	ServerStabilizationTime string `hcl:"server_stabilization_time,optional"`
	EnableRedundancyZones   *bool  `hcl:"enable_redundancy_zones,optional"`
	DisableUpgradeMigration *bool  `hcl:"disable_upgrade_migration,optional"`
	EnableCustomUpgrades    *bool  `hcl:"enable_custom_upgrades,optional"`
}

// autopilotConfig is the block over Nomad's defaults, checked; nil without
// a block.
func (c *Config) autopilotConfig() (*structs.AutopilotConfig, error) {
	b := c.Autopilot
	if b == nil {
		return nil, nil
	}
	out := structs.DefaultAutopilotConfig()
	for _, f := range []struct {
		key string
		v   *bool
		dst *bool
	}{
		{"cleanup_dead_servers", b.CleanupDeadServers, &out.CleanupDeadServers},
		{"enable_redundancy_zones", b.EnableRedundancyZones, &out.EnableRedundancyZones},
		{"disable_upgrade_migration", b.DisableUpgradeMigration, &out.DisableUpgradeMigration},
		{"enable_custom_upgrades", b.EnableCustomUpgrades, &out.EnableCustomUpgrades},
	} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	for _, f := range []struct {
		key, v string
		dst    *time.Duration
	}{
		{"last_contact_threshold", b.LastContactThreshold, &out.LastContactThreshold},
		{"server_stabilization_time", b.ServerStabilizationTime, &out.ServerStabilizationTime},
	} {
		if f.v == "" {
			continue
		}
		d, err := time.ParseDuration(f.v)
		if err != nil {
			return nil, fmt.Errorf("autopilot.%s: %q is not a duration (such as \"10s\")", f.key, f.v)
		}
		*f.dst = d
	}
	if b.MaxTrailingLogs != nil {
		if *b.MaxTrailingLogs < 0 {
			return nil, fmt.Errorf("autopilot.max_trailing_logs: must not be negative, got %d", *b.MaxTrailingLogs)
		}
		out.MaxTrailingLogs = uint64(*b.MaxTrailingLogs)
	}
	if b.MinQuorum != nil {
		if *b.MinQuorum < 0 || *b.MinQuorum > structs.MaxAutopilotMinQuorum {
			return nil, fmt.Errorf("autopilot.min_quorum: must be between 0 and %d, got %d", structs.MaxAutopilotMinQuorum, *b.MinQuorum)
		}
		out.MinQuorum = uint(*b.MinQuorum)
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("autopilot: %w", err)
	}
	return out, nil
}

func mergeAutopilot(a, b *AutopilotBlock) *AutopilotBlock {
	if b == nil {
		return a
	}
	r := AutopilotBlock{}
	if a != nil {
		r = *a
	}
	for _, f := range []struct{ dst, v **bool }{
		{&r.CleanupDeadServers, &b.CleanupDeadServers}, {&r.EnableRedundancyZones, &b.EnableRedundancyZones},
		{&r.DisableUpgradeMigration, &b.DisableUpgradeMigration}, {&r.EnableCustomUpgrades, &b.EnableCustomUpgrades},
	} {
		if *f.v != nil {
			*f.dst = *f.v
		}
	}
	for _, f := range []struct{ dst, v **int }{{&r.MaxTrailingLogs, &b.MaxTrailingLogs}, {&r.MinQuorum, &b.MinQuorum}} {
		if *f.v != nil {
			*f.dst = *f.v
		}
	}
	str(&r.LastContactThreshold, b.LastContactThreshold)
	str(&r.ServerStabilizationTime, b.ServerStabilizationTime)
	return &r
}

package rawexec

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/drover-org/drover/sdk/driver"
)

// ConfigEnvVar carries the plugin config (the agent's `plugin "raw_exec" {
// config { … } }` stanza, as JSON, with the -dev agent's defaults filled
// in) to the plugin process at launch, once the agent has had the plugin
// check it (ValidateConfig). A hand-started plugin reads the same
// variable; without it the driver is disabled.
const ConfigEnvVar = "DROVER_RAWEXEC_PLUGIN_CONFIG"

// ConfigKeyEnabled, ConfigKeyNoCgroups and ConfigKeyDeniedHostUsers are the
// operator's keys, named in refusals so the operator knows what to change.
const (
	ConfigKeyEnabled         = "enabled"
	ConfigKeyNoCgroups       = "no_cgroups"
	ConfigKeyDeniedHostUsers = "denied_host_users"
)

// DefaultDeniedHostUsers is denied_host_users outside -dev: a task may not
// run as root, which would let it read every other task's environment and
// the node's own credentials.
var DefaultDeniedHostUsers = []string{"root"}

// PluginConfig is the driver's configuration.
type PluginConfig struct {
	// Enabled turns the driver on (Nomad's key). Off, it fingerprints as
	// undetected, so the scheduler places nothing on it.
	Enabled bool `json:"enabled"`
	// NoCgroups runs tasks without a cgroup: no memory or cpu limit, and a
	// process that leaves the task's process group survives a stop. Only
	// for hosts with no writable cgroup hierarchy.
	NoCgroups bool `json:"no_cgroups"`
	// DeniedHostUsers are the host users (names or numeric uids) a task may
	// not run as; a task without `user` runs as the driver's own user,
	// which is checked too. nil means DefaultDeniedHostUsers; an empty list
	// denies nobody.
	DeniedHostUsers []string `json:"denied_host_users"`
	// CgroupsOptional is set by the -dev agent, not by operators: where no
	// cgroup hierarchy is writable (a developer's non-root run) tasks run
	// without one, with a warning, instead of failing.
	CgroupsOptional bool `json:"cgroups_optional,omitempty"`
}

// DevConfig is the -dev agent's configuration: enabled, any user, cgroups
// where the host offers them.
func DevConfig() *PluginConfig {
	return &PluginConfig{Enabled: true, DeniedHostUsers: []string{}, CgroupsOptional: true}
}

// ParsePluginConfig decodes the plugin config strictly and applies the
// defaults. Empty input is the default config: disabled.
func ParsePluginConfig(raw []byte) (*PluginConfig, error) {
	var cfg PluginConfig
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("raw_exec plugin config: %w", err)
		}
	}
	if cfg.DeniedHostUsers == nil {
		cfg.DeniedHostUsers = append([]string(nil), DefaultDeniedHostUsers...)
	}
	for i, u := range cfg.DeniedHostUsers {
		if strings.TrimSpace(u) == "" {
			return nil, fmt.Errorf("raw_exec plugin config: %s[%d] is empty", ConfigKeyDeniedHostUsers, i)
		}
	}
	return &cfg, nil
}

// ValidateConfig implements driver.ConfigValidator: raw is accepted when
// ParsePluginConfig takes it, as the plugin would at start.
func (d *Driver) ValidateConfig(_ context.Context, raw []byte) error {
	_, err := ParsePluginConfig(raw)
	return driver.InvalidPluginConfig(err)
}

var _ driver.ConfigValidator = (*Driver)(nil)

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/shared"
)

// builtinDriver is a Nomad task driver that a built-in plugin serves, so
// that a Nomad client config's `plugin "raw_exec" { config { … } }` works
// unchanged: the stanza configures the built-in instead of naming a
// binary in plugin_dir. The agent knows no more of the driver than this:
// the driver plugin checks the config itself (driver.ConfigValidator)
// before the agent starts it with that config.
type builtinDriver struct {
	plugin string
	// configEnv carries the config, as JSON, to the built-in at launch
	// (the variable the plugin reads at start).
	configEnv string
	// keys are the config keys drover honours, with their types. Nomad's
	// other keys would be silently ignored, so they are refused.
	keys map[string]cty.Type
}

// The Nomad drivers drover serves with built-in plugins.
const (
	rawexecDriver = "raw_exec"
	dockerDriver  = "docker"
	mockDriver    = "mock_driver"
	execDriver    = "exec"
)

var nomadDrivers = map[string]builtinDriver{
	rawexecDriver: {plugin: rawexecPlugin, configEnv: "DROVER_RAWEXEC_PLUGIN_CONFIG", keys: map[string]cty.Type{
		"enabled":           cty.Bool,
		"no_cgroups":        cty.Bool,
		"denied_host_users": cty.List(cty.String),
	}},
	// docker's config has blocks (gc, volumes); dockerConfig renders it.
	dockerDriver: {plugin: dockerPlugin, configEnv: "DROVER_DOCKER_PLUGIN_CONFIG"},
	// Nomad's test driver: Nomad's keys, and enabled (the -dev agent's).
	mockDriver: {plugin: mockPlugin, configEnv: "DROVER_MOCK_PLUGIN_CONFIG", keys: map[string]cty.Type{
		"enabled":                    cty.Bool,
		"fs_isolation":               cty.String,
		"shutdown_periodic_after":    cty.Bool,
		"shutdown_periodic_duration": cty.Number,
	}},
	// Nomad's exec plugin keys.
	execDriver: {plugin: execPlugin, configEnv: "DROVER_EXEC_PLUGIN_CONFIG", keys: map[string]cty.Type{
		"default_pid_mode": cty.String,
		"default_ipc_mode": cty.String,
		"no_pivot_root":    cty.Bool,
		"allow_caps":       cty.List(cty.String),
	}},
}

// The built-in plugins serving Nomad's mock_driver and exec.
const (
	mockPlugin = "driver-mock"
	execPlugin = "driver-exec"
)

// simpleDrivers are the Nomad drivers whose config is their stanzas'
// settings as they stand (no blocks), by the plugin serving each.
var simpleDrivers = map[string]string{mockPlugin: mockDriver, execPlugin: execDriver}

// builtinLaunched reports whether the agent runs the built-in plugin
// name: mock_driver only in -dev or where a `plugin "mock_driver"` stanza
// asks for it (Nomad's release builds have no mock driver); every other
// built-in always.
func builtinLaunched(name string, cfg *Config) bool {
	if name != mockPlugin {
		return true
	}
	return cfg.DevMode || slices.ContainsFunc(cfg.Plugins, func(p *PluginConfig) bool { return p.Name == mockDriver })
}

// builtinDriverEnv is the environment handing a Nomad driver's config
// (its stanzas over the -dev defaults) to the built-in plugin serving it
// at launch; nil for other plugins.
func builtinDriverEnv(name string, plugins []*PluginConfig, dev bool) ([]string, error) {
	nomadName, ok := simpleDrivers[name]
	if !ok {
		return nil, nil
	}
	m := map[string]any{}
	if dev && name == mockPlugin {
		m["enabled"] = true
	}
	for _, p := range plugins {
		if p.Name != nomadName {
			continue
		}
		settings, err := p.PluginSettings()
		if err != nil {
			return nil, err
		}
		for k, v := range settings {
			m[k] = v
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return []string{nomadDrivers[nomadName].configEnv + "=" + string(raw)}, nil
}

// check validates the stanza within its file: its config block and, for a
// Nomad driver name, the keys and types that driver accepts. The values
// are the driver's to judge: checkDriverConfigs asks it at agent start.
// Any other plugin's config block is decoded against the schema the
// plugin publishes, which only the plugin host can ask once the plugin
// runs: here it is only found.
func (p *PluginConfig) check() error {
	if p.Name == dockerDriver {
		_, _, err := p.dockerConfig()
		return err
	}
	d, ok := nomadDrivers[p.Name]
	if !ok {
		_, err := p.ConfigBody()
		return err
	}
	if _, err := p.PluginSettings(); err != nil {
		return err
	}
	if len(p.Args) > 0 {
		return fmt.Errorf("plugin %q: args: the built-in %s driver takes no arguments", p.Name, p.Name)
	}
	attrs, err := p.configAttrs()
	if err != nil {
		return err
	}
	for name, a := range attrs {
		want, ok := d.keys[name]
		if !ok {
			known := make([]string, 0, len(d.keys))
			for k := range d.keys {
				known = append(known, k)
			}
			slices.Sort(known)
			return fmt.Errorf("%s: plugin %q: config %s is not supported by drover's built-in %s driver (supported: %s)",
				rangeString(a.NameRange), p.Name, name, p.Name, strings.Join(known, ", "))
		}
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return diagError(diags)
		}
		if v.IsNull() || !hasType(v, want) {
			return fmt.Errorf("%s: plugin %q: config %s must be a %s", rangeString(a.Expr.Range()), p.Name, name, want.FriendlyName())
		}
	}
	return nil
}

// hasType reports whether v is of type want; for a list of strings, an
// HCL tuple literal (["a", "b"], []) of strings is one.
func hasType(v cty.Value, want cty.Type) bool {
	if v.Type().Equals(want) {
		return true
	}
	if !want.IsListType() || !(v.Type().IsTupleType() || v.Type().IsListType() || v.Type().IsSetType()) {
		return false
	}
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		if ev.IsNull() || !ev.Type().Equals(want.ElementType()) {
			return false
		}
	}
	return true
}

// rawexecPlugin is the built-in plugin serving Nomad's raw_exec driver.
const rawexecPlugin = "driver-rawexec"

// rawexecDevConfig is the raw_exec config of the -dev agent, under its
// stanzas: enabled, no user denied, cgroups where the host offers them
// (cgroups_optional: tasks run without one, with a warning, where no
// hierarchy is writable), as Nomad's -dev agent enables raw_exec.
var rawexecDevConfig = map[string]any{"enabled": true, "denied_host_users": []any{}, "cgroups_optional": true}

// rawexecConfigJSON renders the raw_exec plugin config from the config's
// `plugin "raw_exec"` stanzas (later ones win, key by key) over the
// defaults: outside -dev the plugin's own (disabled, root denied, cgroups
// required); in -dev rawexecDevConfig.
func rawexecConfigJSON(plugins []*PluginConfig, dev bool) ([]byte, error) {
	m := map[string]any{}
	if dev {
		for k, v := range rawexecDevConfig {
			m[k] = v
		}
	}
	for _, p := range plugins {
		if p.Name != rawexecDriver {
			continue
		}
		settings, err := p.PluginSettings()
		if err != nil {
			return nil, err
		}
		for k, v := range settings {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// rawexecEnv is the environment that hands the raw_exec config to the
// built-in plugin at launch.
func rawexecEnv(plugins []*PluginConfig, dev bool) ([]string, error) {
	raw, err := rawexecConfigJSON(plugins, dev)
	if err != nil {
		return nil, err
	}
	return []string{nomadDrivers[rawexecDriver].configEnv + "=" + string(raw)}, nil
}

// driverConfigCheck is one Nomad driver stanza's config for its driver
// plugin to judge.
type driverConfigCheck struct {
	driver string // raw_exec, docker, mock_driver, exec
	pos    string // the stanza's position, for the error
	raw    []byte // the config as the plugin gets it
}

// driverConfigChecks lists the config of every Nomad driver stanza, each
// on its own, as the plugin would get it were it the only one.
func driverConfigChecks(plugins []*PluginConfig) ([]driverConfigCheck, error) {
	var out []driverConfigCheck
	for _, p := range plugins {
		switch p.Name {
		case rawexecDriver:
			raw, err := rawexecConfigJSON([]*PluginConfig{p}, false)
			if err != nil {
				return nil, err
			}
			if string(raw) != "{}" { // a stanza that sets nothing has nothing to judge
				out = append(out, driverConfigCheck{driver: p.Name, pos: rangeString(p.Remain.MissingItemRange()), raw: raw})
			}
		case mockDriver, execDriver:
			raw, err := builtinDriverEnv(nomadDrivers[p.Name].plugin, []*PluginConfig{p}, false)
			if err != nil {
				return nil, err
			}
			if v := strings.SplitN(raw[0], "=", 2)[1]; v != "{}" {
				out = append(out, driverConfigCheck{driver: p.Name, pos: rangeString(p.Remain.MissingItemRange()), raw: []byte(v)})
			}
		case dockerDriver:
			raw, pos, err := p.dockerConfig()
			if err != nil {
				return nil, err
			}
			if raw != nil {
				out = append(out, driverConfigCheck{driver: p.Name, pos: pos, raw: raw})
			}
		}
	}
	return out, nil
}

// checkDriverConfigs has the driver plugins in ds judge checks, through
// the driver protocol's ValidateConfig. A refusal names the stanza, the
// plugin, and the field and rule it breaks, as the plugin words them.
func checkDriverConfigs(ctx context.Context, ds *pluginhost.DriverSet, checks []driverConfigCheck) error {
	for _, c := range checks {
		err := ds.ValidateConfig(ctx, c.driver, c.raw)
		switch {
		case err == nil:
		case errors.Is(err, driver.ErrInvalidPluginConfig):
			return fmt.Errorf("%s: plugin %q: %w", c.pos, c.driver, err)
		default:
			return fmt.Errorf("plugin %q: checking its config: %w", c.driver, err)
		}
	}
	return nil
}

// validateDriverConfigs checks the config of cfg's Nomad driver stanzas
// before the agent starts their plugins with it: it launches each such
// driver's built-in plugin without a config (as it starts then) and asks
// it. A plugin started with a config it refuses would only fail to launch.
func validateDriverConfigs(ctx context.Context, hc pluginhost.Config, plugins []*PluginConfig, env []string) error {
	checks, err := driverConfigChecks(plugins)
	if err != nil || len(checks) == 0 {
		return err
	}
	hc.Builtins, hc.Stanzas, hc.PluginDir = nil, nil, ""
	for _, c := range checks {
		name := nomadDrivers[c.driver].plugin
		if !slices.ContainsFunc(hc.Builtins, func(b pluginhost.Builtin) bool { return b.Name == name }) {
			hc.Builtins = append(hc.Builtins, pluginhost.Builtin{Name: name, Kind: shared.KindDriver, Env: env})
		}
	}
	hc.Logger = hc.Logger.Named("config-check")
	host, err := pluginhost.New(ctx, hc)
	if err != nil {
		return fmt.Errorf("plugins: start the driver plugins to check their config: %w", err)
	}
	defer host.Close()
	return checkDriverConfigs(ctx, host.Drivers(), checks)
}

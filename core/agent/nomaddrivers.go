package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	docker "github.com/drover-org/drover/plugins/driver-docker"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

// builtinDriver is a Nomad task driver that a built-in plugin serves, so
// that a Nomad client config's `plugin "raw_exec" { config { … } }` works
// unchanged: the stanza configures the built-in instead of naming a
// binary in plugin_dir.
type builtinDriver struct {
	plugin string
	// keys are the config keys drover honours, with their types. Nomad's
	// other keys would be silently ignored, so they are refused.
	keys map[string]cty.Type
}

var nomadDrivers = map[string]builtinDriver{
	rawexec.Name: {plugin: rawexecPlugin, keys: map[string]cty.Type{
		rawexec.ConfigKeyEnabled:         cty.Bool,
		rawexec.ConfigKeyNoCgroups:       cty.Bool,
		rawexec.ConfigKeyDeniedHostUsers: cty.List(cty.String),
	}},
	// docker's config has blocks (gc, volumes); dockerConfigJSON checks it.
	docker.Name: {plugin: dockerPlugin},
}

// check validates the stanza within its file: its config block and, for a
// Nomad driver name, the keys and types that driver accepts.
func (p *PluginConfig) check() error {
	if p.Name == docker.Name {
		_, err := p.dockerConfigJSON()
		return err
	}
	if _, err := p.PluginSettings(); err != nil {
		return err
	}
	d, ok := nomadDrivers[p.Name]
	if !ok {
		return nil
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
	if p.Name == rawexec.Name {
		if _, err := rawexecConfigJSON([]*PluginConfig{p}, false); err != nil {
			return fmt.Errorf("%s: %w", rangeString(p.Remain.MissingItemRange()), err)
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

// rawexecConfigJSON renders the raw_exec plugin config from the config's
// `plugin "raw_exec"` stanzas (later ones win, key by key) over the
// defaults: outside -dev the plugin's own (disabled, root denied, cgroups
// required); in -dev rawexec.DevConfig (enabled, no user denied, cgroups
// where the host has them), as Nomad's -dev agent enables raw_exec.
func rawexecConfigJSON(plugins []*PluginConfig, dev bool) ([]byte, error) {
	m := map[string]any{}
	if dev {
		raw, err := json.Marshal(rawexec.DevConfig())
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
	}
	for _, p := range plugins {
		if p.Name != rawexec.Name {
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
	if _, err := rawexec.ParsePluginConfig(raw); err != nil {
		return nil, fmt.Errorf("plugin %q: %v", rawexec.Name, err)
	}
	return raw, nil
}

// rawexecEnv is the environment that hands the raw_exec config to the
// built-in plugin (the driver protocol has no config call).
func rawexecEnv(plugins []*PluginConfig, dev bool) ([]string, error) {
	raw, err := rawexecConfigJSON(plugins, dev)
	if err != nil {
		return nil, err
	}
	return []string{rawexec.ConfigEnvVar + "=" + string(raw)}, nil
}

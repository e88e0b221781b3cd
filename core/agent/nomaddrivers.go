package agent

import (
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
	rawexec.Name: {plugin: "driver-rawexec", keys: map[string]cty.Type{"enabled": cty.Bool}},
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
		if v.IsNull() || !v.Type().Equals(want) {
			return fmt.Errorf("%s: plugin %q: config %s must be a %s", rangeString(a.Expr.Range()), p.Name, name, want.FriendlyName())
		}
	}
	return nil
}

// disabledBuiltins lists the built-in plugins a Nomad driver stanza turns
// off (`enabled = false`). Drover enables raw_exec by default, Nomad only
// in -dev; an explicit false is honoured either way.
func disabledBuiltins(plugins []*PluginConfig) map[string]bool {
	out := map[string]bool{}
	for _, p := range plugins {
		d, ok := nomadDrivers[p.Name]
		if !ok {
			continue
		}
		settings, err := p.PluginSettings()
		if err != nil {
			continue // validated at parse time
		}
		if en, ok := settings["enabled"].(bool); ok && !en {
			out[d.plugin] = true
		}
	}
	return out
}

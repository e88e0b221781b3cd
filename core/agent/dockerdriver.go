package agent

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// dockerPlugin is the built-in plugin serving Nomad's docker driver.
const dockerPlugin = "driver-docker"

// dockerConfig renders a `plugin "docker" { config { … } }` stanza's
// config block (attributes and the gc and volumes blocks, as Nomad writes
// them) as the JSON the docker plugin decodes, with the block's position.
// nil when the stanza has no config block. Whether the plugin takes it is
// the plugin's to say (checkDriverConfigs asks it at agent start), so a bad
// key or value fails the agent with its position, not the plugin at
// launch.
func (p *PluginConfig) dockerConfig() (raw []byte, pos string, err error) {
	if len(p.Args) > 0 {
		return nil, "", fmt.Errorf("plugin %q: args: the built-in %s driver takes no arguments", p.Name, p.Name)
	}
	if p.Remain == nil {
		return nil, "", nil
	}
	content, diags := p.Remain.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "config"}}})
	if diags.HasErrors() {
		return nil, "", diagError(diags)
	}
	if len(content.Blocks) == 0 {
		return nil, "", nil
	}
	if len(content.Blocks) > 1 {
		return nil, "", fmt.Errorf("%s: plugin %q: only one config block is allowed", rangeString(content.Blocks[1].DefRange), p.Name)
	}
	blk := content.Blocks[0]
	body, ok := blk.Body.(*hclsyntax.Body)
	if !ok {
		return nil, "", fmt.Errorf("%s: plugin %q: the config block must be written in HCL native syntax", rangeString(blk.DefRange), p.Name)
	}
	m, err := p.bodyMap(body)
	if err != nil {
		return nil, "", err
	}
	raw, err = json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	return raw, rangeString(blk.DefRange), nil
}

// bodyMap turns an HCL body into plain values: attributes by value, each
// block (given once, unlabelled) as a nested map.
func (p *PluginConfig) bodyMap(body *hclsyntax.Body) (map[string]any, error) {
	out := map[string]any{}
	for name, a := range body.Attributes {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		if !v.IsWhollyKnown() || v.IsNull() {
			return nil, fmt.Errorf("%s: plugin %q: config %s: the value must be known and not null", rangeString(a.Expr.Range()), p.Name, name)
		}
		raw, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return nil, fmt.Errorf("%s: plugin %q: config %s: %w", rangeString(a.Expr.Range()), p.Name, name, err)
		}
		var gv any
		if err := json.Unmarshal(raw, &gv); err != nil {
			return nil, err
		}
		out[name] = gv
	}
	for _, b := range body.Blocks {
		if len(b.Labels) > 0 {
			return nil, fmt.Errorf("%s: plugin %q: config block %s takes no labels", rangeString(b.LabelRanges[0]), p.Name, b.Type)
		}
		if _, dup := out[b.Type]; dup {
			return nil, fmt.Errorf("%s: plugin %q: config %s is given twice", rangeString(b.TypeRange), p.Name, b.Type)
		}
		m, err := p.bodyMap(b.Body)
		if err != nil {
			return nil, err
		}
		out[b.Type] = m
	}
	return out, nil
}

// dockerEnv is the environment that hands the docker stanza's config to
// the built-in docker plugin at launch.
func dockerEnv(plugins []*PluginConfig) []string {
	for _, p := range plugins {
		if p.Name != dockerDriver {
			continue
		}
		raw, _, err := p.dockerConfig()
		if err != nil || raw == nil {
			return nil // refused at parse time
		}
		return []string{nomadDrivers[dockerDriver].configEnv + "=" + string(raw)}
	}
	return nil
}

package jobspec

import (
	"sort"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// configBody decodes a task's config block into the map a driver receives.
//
// The schema belongs to the driver, not to the parser, so every attribute
// is taken as written and converted with goValue (integral numbers become
// int, others float64; lists []any; objects map[string]any). Nested blocks,
// as older drivers use them (`port_map { http = 8080 }`), become:
//
//   - a map[string]any when the block type appears once, and
//   - a []any of map[string]any, in source order, when it repeats.
//
// Labelled blocks inside config are refused: no driver drover ships needs
// them, and guessing a shape for them would bind drivers to an accident.
func (p *parser) configBody(body hcl.Body) map[string]any {
	p.configDepth++
	defer func() { p.configDepth-- }()
	out := map[string]any{}
	syn := p.syntaxOf(body)
	if syn == nil {
		return out
	}
	if p.configDepth > structs.MaxTaskConfigDepth {
		p.errorf(syn.SrcRange, "Nesting too deep",
			"Config blocks nest %d levels below the task; exceeds limit %s (a task config may nest %d).",
			p.configDepth, structs.DepthLimit(), structs.MaxTaskConfigDepth)
		return out
	}

	// The schema is the body's own shape: its attributes, and its block
	// types, those that dynamic blocks make included. Reading it through
	// body (not syn) expands those dynamic blocks.
	schema := &hcl.BodySchema{}
	for name := range syn.Attributes {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: name})
	}
	types := map[string]bool{}
	for _, b := range syn.Blocks {
		typ := b.Type
		if typ == "dynamic" {
			if len(b.Labels) != 1 {
				continue // dynblock reports it
			}
			typ = b.Labels[0]
		} else if len(b.Labels) > 0 {
			p.errorf(b.LabelRanges[0], "Unsupported config block",
				"Blocks inside config take no labels; write %s { … } or %s = { … }.", b.Type, b.Type)
			continue
		}
		if attr, dup := syn.Attributes[typ]; dup {
			p.errorf(b.TypeRange, "Duplicate config key",
				"%q is already set as an attribute at %s.", typ, posString(attr.NameRange))
			continue
		}
		if !types[typ] {
			types[typ] = true
			schema.Blocks = append(schema.Blocks, hcl.BlockHeaderSchema{Type: typ})
		}
	}
	content, _, diags := body.PartialContent(schema)
	p.diags = append(p.diags, diags...)

	names := make([]string, 0, len(content.Attributes))
	for n := range content.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		attr := content.Attributes[name]
		v, ok := p.value(attr.Expr)
		if !ok {
			continue
		}
		g, err := goValue(v)
		if err != nil {
			p.errorf(attr.Expr.Range(), "Unsupported config value", "config key %q: %v.", name, err)
			continue
		}
		if !p.checkConfigValue(attr.Expr.Range(), name, g) {
			continue
		}
		out[name] = g
	}

	var order []string
	blocks := map[string][]*hcl.Block{}
	for _, b := range content.Blocks {
		if len(b.Labels) > 0 {
			p.errorf(b.LabelRanges[0], "Unsupported config block",
				"Blocks inside config take no labels; write %s { … } or %s = { … }.", b.Type, b.Type)
			continue
		}
		if _, seen := blocks[b.Type]; !seen {
			order = append(order, b.Type)
		}
		blocks[b.Type] = append(blocks[b.Type], b)
	}
	for _, name := range order {
		bs := blocks[name]
		if len(bs) == 1 {
			out[name] = p.configBody(bs[0].Body)
			continue
		}
		// The list the repeated blocks become is one level more.
		p.configDepth++
		list := make([]any, 0, len(bs))
		for _, b := range bs {
			list = append(list, p.configBody(b.Body))
		}
		p.configDepth--
		out[name] = list
	}
	return out
}

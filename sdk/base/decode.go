// Package base is the part of the plugin protocol every plugin kind shares
// (sdk/proto/base.proto): a plugin publishes the schema of its config
// block (ConfigSchema) and receives the decoded block (SetConfig) before it
// serves. This file is the agent's half: checking a schema, decoding an HCL
// body against it and finding a refused field's position in the body. The
// plugin author's half (a config struct with tags) is config.go.
package base

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/drover-org/drover/sdk/proto/basepb"
)

// Bounds on a schema, so a plugin cannot make the agent build an unbounded
// decoder.
const (
	MaxSpecFields = 256 // attributes and blocks in one schema, all levels
	MaxSpecDepth  = 8   // nesting of blocks
	MaxNameBytes  = 128 // one attribute or block name
	MaxTypeBytes  = 1024
)

// CheckSpec checks that spec is a schema the agent can decode against:
// names are HCL identifiers, unique in their body; types parse; defaults
// are JSON of their type; within the bounds above. A nil spec is valid (no
// config).
func CheckSpec(spec *basepb.Spec) error {
	fields := 0
	_, err := objectSpec(spec, "", 0, &fields)
	return err
}

// Decode decodes body (a plugin stanza's config block; nil: there is none)
// against spec and returns the config as JSON, every attribute and block of
// spec present (defaults filled in, absent optional ones null). Errors carry
// the position of the offending field in body. A nil spec (the plugin takes
// no config) decodes only an absent or empty body, to "{}".
func Decode(spec *basepb.Spec, body hcl.Body) ([]byte, hcl.Diagnostics) {
	fields := 0
	os, err := objectSpec(spec, "", 0, &fields)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid plugin config schema", Detail: err.Error()}}
	}
	if body == nil {
		body = hcl.EmptyBody()
	}
	v, diags := hcldec.Decode(body, os, nil)
	if diags.HasErrors() {
		return nil, diags
	}
	if !v.IsWhollyKnown() {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unknown config value",
			Detail: "every value of a plugin config must be known when the agent starts"}}
	}
	out, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unencodable config value", Detail: err.Error()}}
	}
	return out, nil
}

func objectSpec(spec *basepb.Spec, where string, depth int, fields *int) (hcldec.ObjectSpec, error) {
	os := hcldec.ObjectSpec{}
	if spec == nil {
		return os, nil
	}
	if depth > MaxSpecDepth {
		return nil, fmt.Errorf("%sblocks nest deeper than %d", where, MaxSpecDepth)
	}
	for _, a := range spec.GetAttributes() {
		name := a.GetName()
		if err := checkField(name, where, os, fields); err != nil {
			return nil, err
		}
		if len(a.GetType()) > MaxTypeBytes {
			return nil, fmt.Errorf("attribute %s%s: type is longer than %d bytes", where, name, MaxTypeBytes)
		}
		ty, err := ParseType(a.GetType())
		if err != nil {
			return nil, fmt.Errorf("attribute %s%s: type %q: %w", where, name, a.GetType(), err)
		}
		var s hcldec.Spec = &hcldec.AttrSpec{Name: name, Type: ty, Required: a.GetRequired()}
		if d := a.GetDefaultJson(); d != "" {
			if a.GetRequired() {
				return nil, fmt.Errorf("attribute %s%s: a required attribute has no default", where, name)
			}
			dv, err := ctyjson.Unmarshal([]byte(d), impliedType(ty, d))
			if err != nil {
				return nil, fmt.Errorf("attribute %s%s: default_json %s is not a %s: %w", where, name, d, a.GetType(), err)
			}
			s = &hcldec.DefaultSpec{Primary: s, Default: &hcldec.LiteralSpec{Value: dv}}
		}
		os[name] = s
	}
	for _, b := range spec.GetBlocks() {
		name := b.GetName()
		if err := checkField(name, where, os, fields); err != nil {
			return nil, err
		}
		nested, err := objectSpec(b.GetBody(), where+name+".", depth+1, fields)
		if err != nil {
			return nil, err
		}
		switch b.GetNesting() {
		case basepb.Block_NESTING_SINGLE:
			os[name] = &hcldec.BlockSpec{TypeName: name, Nested: nested, Required: b.GetRequired()}
		case basepb.Block_NESTING_LIST:
			if b.GetMaxItems() > 0 && b.GetMinItems() > b.GetMaxItems() {
				return nil, fmt.Errorf("block %s%s: min_items %d is above max_items %d", where, name, b.GetMinItems(), b.GetMaxItems())
			}
			os[name] = &hcldec.BlockTupleSpec{TypeName: name, Nested: nested,
				MinItems: int(b.GetMinItems()), MaxItems: int(b.GetMaxItems())}
		case basepb.Block_NESTING_MAP:
			os[name] = &hcldec.BlockObjectSpec{TypeName: name, LabelNames: []string{"name"}, Nested: nested}
		default:
			return nil, fmt.Errorf("block %s%s: unknown nesting %d", where, name, int32(b.GetNesting()))
		}
	}
	return os, nil
}

func checkField(name, where string, os hcldec.ObjectSpec, fields *int) error {
	if *fields++; *fields > MaxSpecFields {
		return fmt.Errorf("the schema has more than %d fields", MaxSpecFields)
	}
	if len(name) > MaxNameBytes {
		return fmt.Errorf("field %s%.32s...: the name is longer than %d bytes", where, name, MaxNameBytes)
	}
	if !hclsyntax.ValidIdentifier(name) {
		return fmt.Errorf("field %s%q: not a valid HCL identifier", where, name)
	}
	if _, dup := os[name]; dup {
		return fmt.Errorf("field %s%s: defined twice", where, name)
	}
	return nil
}

// ParseType parses an HCL type expression ("string", "list(number)",
// "object({a = string})", "any").
func ParseType(expr string) (cty.Type, error) {
	if strings.TrimSpace(expr) == "" {
		return cty.NilType, fmt.Errorf("the type is empty")
	}
	e, diags := hclsyntax.ParseExpression([]byte(expr), "type", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("%s", diags[0].Summary+": "+diags[0].Detail)
	}
	ty, diags := typeexpr.TypeConstraint(e)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("%s", diags[0].Summary+": "+diags[0].Detail)
	}
	return ty, nil
}

// impliedType is the type to read a default of constraint ty as: the
// constraint itself, or the JSON's own type where ty has "any" in it.
func impliedType(ty cty.Type, raw string) cty.Type {
	if !ty.HasDynamicTypes() {
		return ty
	}
	if t, err := ctyjson.ImpliedType([]byte(raw)); err == nil {
		return t
	}
	return ty
}

// FieldRange finds the position of path (a FieldError path: names joined
// by dots, list indexes as [0], map labels as ["label"]) in body decoded
// against spec. It returns the deepest part of the path it found, and def
// when body is nil or the first part is absent.
func FieldRange(spec *basepb.Spec, body hcl.Body, path string, def hcl.Range) hcl.Range {
	steps, err := splitPath(path)
	if err != nil || body == nil {
		return def
	}
	at := def
	for len(steps) > 0 && spec != nil && body != nil {
		content, _, _ := body.PartialContent(bodySchema(spec))
		name := steps[0].name
		steps = steps[1:]
		if a, ok := content.Attributes[name]; ok {
			return a.Expr.Range()
		}
		var bs *basepb.Block
		for _, b := range spec.GetBlocks() {
			if b.GetName() == name {
				bs = b
			}
		}
		if bs == nil {
			return at
		}
		var found *hcl.Block
		i := 0
		for _, b := range content.Blocks {
			if b.Type != name {
				continue
			}
			switch {
			case bs.GetNesting() == basepb.Block_NESTING_MAP:
				if len(steps) > 0 && steps[0].label != nil && len(b.Labels) == 1 && b.Labels[0] == *steps[0].label {
					found = b
				}
			case bs.GetNesting() == basepb.Block_NESTING_LIST && len(steps) > 0 && steps[0].index >= 0:
				if i == steps[0].index {
					found = b
				}
			default:
				if found == nil {
					found = b
				}
			}
			i++
		}
		if found == nil {
			return at
		}
		if len(steps) > 0 && (steps[0].index >= 0 || steps[0].label != nil) {
			steps = steps[1:]
		}
		at, spec, body = found.DefRange, bs.GetBody(), found.Body
	}
	return at
}

func bodySchema(spec *basepb.Spec) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, a := range spec.GetAttributes() {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: a.GetName()})
	}
	for _, b := range spec.GetBlocks() {
		h := hcl.BlockHeaderSchema{Type: b.GetName()}
		if b.GetNesting() == basepb.Block_NESTING_MAP {
			h.LabelNames = []string{"name"}
		}
		s.Blocks = append(s.Blocks, h)
	}
	return s
}

// pathStep is one part of a field path: a name, an index ([0]) or a label
// (["x"]). index is -1 for a name or label.
type pathStep struct {
	name  string
	index int
	label *string
}

func splitPath(path string) ([]pathStep, error) {
	var out []pathStep
	rest := path
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if strings.HasPrefix(rest, `["`) {
				// A quoted label may hold ']': find the closing quote.
				var label string
				dec := json.NewDecoder(strings.NewReader(rest[1:]))
				if err := dec.Decode(&label); err != nil {
					return nil, fmt.Errorf("path %q: bad label: %w", path, err)
				}
				n := int(dec.InputOffset()) + 1
				if n >= len(rest) || rest[n] != ']' {
					return nil, fmt.Errorf("path %q: unclosed [", path)
				}
				out = append(out, pathStep{index: -1, label: &label})
				rest = rest[n+1:]
				continue
			}
			if end < 0 {
				return nil, fmt.Errorf("path %q: unclosed [", path)
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil || i < 0 {
				return nil, fmt.Errorf("path %q: bad index %q", path, rest[1:end])
			}
			out = append(out, pathStep{index: i})
			rest = rest[end+1:]
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			out = append(out, pathStep{name: rest[:end], index: -1})
			rest = rest[end:]
		}
	}
	return out, nil
}

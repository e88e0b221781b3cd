package jobspec

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Typed attribute readers. Each takes the attribute (nil when absent, so
// callers can pass content.Attributes["x"] straight through), stores the
// decoded value through dst and reports a positioned error otherwise. A
// null value ("x = null") counts as absent. Conversions follow HCL's usual
// rules, as Nomad's decoder does: "3" is accepted for a number and true for
// a string.

// typed evaluates attr and converts it to ty; ok is false when the
// attribute is absent, null or wrong.
func (p *parser) typed(attr *hcl.Attribute, ty cty.Type, what string) (cty.Value, bool) {
	if attr == nil {
		return cty.NilVal, false
	}
	v, ok := p.value(attr.Expr)
	if !ok || v.IsNull() {
		return cty.NilVal, false
	}
	cv, err := convert.Convert(v, ty)
	if err != nil {
		p.errorf(attr.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: %s required, got %s.", attr.Name, what, v.Type().FriendlyName())
		return cty.NilVal, false
	}
	if cv.IsNull() {
		return cty.NilVal, false
	}
	return cv, true
}

func (p *parser) setString(attr *hcl.Attribute, dst *string) bool {
	v, ok := p.typed(attr, cty.String, "a string is")
	if ok {
		*dst = v.AsString()
	}
	return ok
}

func (p *parser) setBool(attr *hcl.Attribute, dst *bool) bool {
	v, ok := p.typed(attr, cty.Bool, "a bool is")
	if ok {
		*dst = v.True()
	}
	return ok
}

// setIntRange decodes a whole number within [lo, hi].
func (p *parser) setIntRange(attr *hcl.Attribute, lo, hi int64, dst func(int64)) bool {
	v, ok := p.typed(attr, cty.Number, "a number is")
	if !ok {
		return false
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact {
		p.errorf(attr.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: a whole number is required, got %s.", attr.Name, bf.Text('g', -1))
		return false
	}
	if i < lo || i > hi {
		p.errorf(attr.Expr.Range(), "Value out of range",
			"Attribute %q must be between %d and %d, got %d.", attr.Name, lo, hi, i)
		return false
	}
	dst(i)
	return true
}

func (p *parser) setInt(attr *hcl.Attribute, dst *int) bool {
	return p.setIntRange(attr, math.MinInt32, math.MaxInt32, func(i int64) { *dst = int(i) })
}

// setDuration accepts a Go duration string ("15s", "1h30m") or, as Nomad
// does, a whole number of nanoseconds.
func (p *parser) setDuration(attr *hcl.Attribute, dst *time.Duration) bool {
	if attr == nil {
		return false
	}
	v, ok := p.value(attr.Expr)
	if !ok || v.IsNull() {
		return false
	}
	switch v.Type() {
	case cty.String:
		d, err := time.ParseDuration(v.AsString())
		if err != nil {
			p.errorf(attr.Expr.Range(), "Invalid duration",
				"Attribute %q: %q is not a duration (write it like \"15s\", \"5m\" or \"24h\").", attr.Name, v.AsString())
			return false
		}
		*dst = d
		return true
	case cty.Number:
		bf := v.AsBigFloat()
		i, acc := bf.Int64()
		if !bf.IsInt() || acc != big.Exact {
			p.errorf(attr.Expr.Range(), "Invalid duration",
				"Attribute %q: a number is read as whole nanoseconds; prefer a string such as \"15s\".", attr.Name)
			return false
		}
		*dst = time.Duration(i)
		return true
	}
	p.errorf(attr.Expr.Range(), "Incorrect attribute value type",
		"Inappropriate value for attribute %q: a duration string such as \"15s\" is required, got %s.", attr.Name, v.Type().FriendlyName())
	return false
}

func (p *parser) setDurationPtr(attr *hcl.Attribute, dst **time.Duration) {
	var d time.Duration
	if p.setDuration(attr, &d) {
		*dst = &d
	}
}

func (p *parser) setStrings(attr *hcl.Attribute, dst *[]string) bool {
	v, ok := p.typed(attr, cty.List(cty.String), "a list of strings is")
	if !ok {
		return false
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, el := it.Element()
		if el.IsNull() {
			p.errorf(attr.Expr.Range(), "Incorrect attribute value type",
				"Inappropriate value for attribute %q: list elements must not be null.", attr.Name)
			return false
		}
		out = append(out, el.AsString())
	}
	*dst = out
	return true
}

// stringMapAttr decodes the attribute form of meta and env
// (`meta = { "a.b" = "x" }`), which allows keys that are not identifiers.
// Values of any primitive type become their string form, as Nomad stores
// meta.
func (p *parser) stringMapAttr(attr *hcl.Attribute) map[string]string {
	v, ok := p.value(attr.Expr)
	if !ok || v.IsNull() {
		return nil
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		p.errorf(attr.Expr.Range(), "Incorrect attribute value type",
			"Inappropriate value for attribute %q: a map of strings is required, got %s.", attr.Name, v.Type().FriendlyName())
		return nil
	}
	out := map[string]string{}
	for it := v.ElementIterator(); it.Next(); {
		k, el := it.Element()
		key := k.AsString()
		s, ok := p.primitiveString(el)
		if !ok {
			p.errorf(attr.Expr.Range(), "Incorrect attribute value type",
				"Inappropriate value for %s key %q: a string, number or bool is required, got %s.", attr.Name, key, el.Type().FriendlyName())
			continue
		}
		out[key] = s
	}
	return out
}

// stringMapBlock decodes the block form of meta and env: every attribute
// of the body is a key.
func (p *parser) stringMapBlock(block *hcl.Block) map[string]string {
	attrs, diags := block.Body.JustAttributes()
	p.diags = append(p.diags, diags...)
	// A body inside a dynamic block passes JustAttributes through to
	// its source, whose expressions cannot see the block's iterator;
	// reading the same names with Content gives the ones that can.
	schema := &hcl.BodySchema{}
	for name := range attrs {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: name})
	}
	if c, _, diags := block.Body.PartialContent(schema); !diags.HasErrors() {
		attrs = c.Attributes
	}
	out := map[string]string{}
	for _, name := range sortedAttrNames(attrs) {
		attr := attrs[name]
		v, ok := p.value(attr.Expr)
		if !ok {
			continue
		}
		s, ok := p.primitiveString(v)
		if !ok {
			p.errorf(attr.Expr.Range(), "Incorrect attribute value type",
				"Inappropriate value for %s key %q: a string, number or bool is required, got %s.", block.Type, name, v.Type().FriendlyName())
			continue
		}
		out[name] = s
	}
	return out
}

func (p *parser) primitiveString(v cty.Value) (string, bool) {
	if v.IsNull() {
		return "", true
	}
	if !v.Type().IsPrimitiveType() {
		return "", false
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil {
		return "", false
	}
	return s.AsString(), true
}

func sortedAttrNames(attrs hcl.Attributes) []string {
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// goValue converts an evaluated cty value into the plain Go values that a
// task's Config map holds: string, bool, int (integral numbers), float64,
// []any, map[string]any and nil.
func goValue(v cty.Value) (any, error) {
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsKnown() {
		return nil, fmt.Errorf("value is not known")
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return v.AsString(), nil
	case ty == cty.Bool:
		return v.True(), nil
	case ty == cty.Number:
		bf := v.AsBigFloat()
		if bf.IsInt() {
			if i, acc := bf.Int64(); acc == big.Exact && i >= math.MinInt && i <= math.MaxInt {
				return int(i), nil
			}
		}
		f, _ := bf.Float64()
		return f, nil
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		out := make([]any, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, el := it.Element()
			g, err := goValue(el)
			if err != nil {
				return nil, err
			}
			out = append(out, g)
		}
		return out, nil
	case ty.IsMapType() || ty.IsObjectType():
		out := make(map[string]any, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, el := it.Element()
			g, err := goValue(el)
			if err != nil {
				return nil, err
			}
			out[k.AsString()] = g
		}
		return out, nil
	}
	return nil, fmt.Errorf("values of type %s are not supported", ty.FriendlyName())
}

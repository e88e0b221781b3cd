// Package basetest checks a plugin's config schema over gRPC, whatever the
// plugin's kind and whatever language it is written in: the round trip the
// agent makes (ConfigSchema, Decode of a config block against the schema,
// SetConfig) must hold together. Every kind's conformance kit runs it
// (scheduler: conformance.RunConfig; gc: gctest.RunConfig); against a
// plugin binary, dial its socket and call
//
//	basetest.CheckConfig(t, base.NewClient(conn))
//
// The checks: the schema passes base.CheckSpec and is the same when asked
// twice; when nothing is required, an empty config block decodes to
// defaults SetConfig accepts, and each top-level attribute set explicitly
// to its default is accepted too; a value of the wrong type for an
// attribute is refused by Decode at the attribute's position; SetConfig of
// a config with a field the schema lacks returns a field error naming it;
// when something is required, SetConfig of an empty config is refused with
// a field error naming a required field. A plugin that takes no config
// (no Base service) passes. The plugin is left with its defaults when it
// has any.
package basetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/proto/basepb"
)

// TB is the part of testing.TB CheckConfig uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// UnknownField is the field the unknown-field check adds to a config.
const UnknownField = "drover_conformance_unknown_field"

// PluginName is the plugin name the checks send with SetConfig.
const PluginName = "basetest"

// CheckConfig runs Check against c and reports every failure with
// t.Errorf.
func CheckConfig(t TB, c *base.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, f := range Check(ctx, c) {
		t.Errorf("config conformance: %s", f)
	}
}

// Check runs the checks against c and returns the failures, each a
// sentence saying what happened and what the rule wants; none means the
// plugin's config conforms.
func Check(ctx context.Context, c *base.Client) []string {
	var out []string
	fail := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	spec, err := c.ConfigSchema(ctx)
	if errors.Is(err, base.ErrNoConfig) {
		return nil
	}
	if err != nil {
		fail("ConfigSchema returned %v; it must answer", err)
		return out
	}
	if err := base.CheckSpec(spec); err != nil {
		fail("the schema is one the agent cannot decode against: %v", err)
		return out
	}
	if again, err := c.ConfigSchema(ctx); err != nil || !proto.Equal(again, spec) {
		fail("ConfigSchema answered differently when asked again (%v); the schema must not change during the life of the process", err)
	}

	set := func(what string, js []byte) []*basepb.FieldError {
		errs, err := c.SetConfig(ctx, js, PluginName)
		if err != nil {
			fail("SetConfig of %s (%s) returned %v; a config the agent decoded must be judged, with field errors for what is refused", what, js, err)
			return nil
		}
		return errs
	}

	required := requiredFields(spec)
	var defaults []byte
	if len(required) == 0 {
		js, diags := base.Decode(spec, nil)
		if diags.HasErrors() {
			fail("an empty config block does not decode although nothing is required: %v", diags)
		} else if errs := set("an empty config block", js); len(errs) > 0 {
			fail("SetConfig refused the defaults (an empty config block, nothing required): %s; the defaults must be a config the plugin accepts", base.FieldErrors(errs))
		} else {
			defaults = js
		}
		for _, a := range spec.GetAttributes() {
			if a.GetDefaultJson() == "" {
				continue
			}
			src, err := attrSource(a.GetName(), a.GetType(), a.GetDefaultJson())
			if err != nil {
				fail("attribute %s: default_json %s cannot be written as HCL: %v", a.GetName(), a.GetDefaultJson(), err)
				continue
			}
			js, diags := decode(spec, src)
			if diags.HasErrors() {
				fail("attribute %s set to its default (%s) does not decode: %v", a.GetName(), strings.TrimSpace(src), diags)
				continue
			}
			if errs := set("attribute "+a.GetName()+" at its default", js); len(errs) > 0 {
				fail("SetConfig refused attribute %s set to its default %s: %s; every default must be accepted", a.GetName(), a.GetDefaultJson(), base.FieldErrors(errs))
			}
		}
	} else {
		errs := set("an empty config", []byte(`{}`))
		if !slices.ContainsFunc(errs, func(e *basepb.FieldError) bool { return slices.Contains(required, e.GetPath()) }) {
			fail("SetConfig of an empty config ({}) returned %s; it must be refused with a field error naming a required field (%s)",
				describe(errs), strings.Join(required, ", "))
		}
	}

	for _, a := range spec.GetAttributes() {
		wrong, ok := wrongValue(a.GetType())
		if !ok {
			continue
		}
		src := a.GetName() + " = " + wrong + "\n"
		_, diags := decode(spec, src)
		if !diags.HasErrors() {
			fail("attribute %s of type %s: Decode accepted the wrong-typed value %s", a.GetName(), a.GetType(), wrong)
			continue
		}
		// The value starts after `name = `.
		at := func(d *hcl.Diagnostic) bool {
			return d.Subject != nil && d.Subject.Start.Line == 1 && d.Subject.Start.Column >= len(a.GetName())+4
		}
		if !slices.ContainsFunc(diags, at) {
			fail("attribute %s of type %s: Decode refused the wrong-typed value %s but not at the attribute's position: %v", a.GetName(), a.GetType(), wrong, diags)
		}
	}

	obj := map[string]json.RawMessage{}
	if defaults != nil {
		if err := json.Unmarshal(defaults, &obj); err != nil {
			fail("the decoded defaults %s are not a JSON object: %v", defaults, err)
		}
	}
	obj[UnknownField] = json.RawMessage(`1`)
	js, _ := json.Marshal(obj) // raw JSON values always marshal
	errs := set("a config with an unknown field", js)
	if !slices.ContainsFunc(errs, func(e *basepb.FieldError) bool { return e.GetPath() == UnknownField }) {
		fail("SetConfig of a config with the unknown field %s returned %s; it must be refused with a field error whose path is %s",
			UnknownField, describe(errs), UnknownField)
	}

	if defaults != nil {
		// Leave the plugin as the agent would with an empty block.
		if errs := set("an empty config block", defaults); len(errs) > 0 {
			fail("SetConfig refused the defaults after other configs: %s", base.FieldErrors(errs))
		}
	}
	return out
}

// requiredFields lists spec's top-level required attributes and blocks.
func requiredFields(spec *basepb.Spec) []string {
	var out []string
	for _, a := range spec.GetAttributes() {
		if a.GetRequired() {
			out = append(out, a.GetName())
		}
	}
	for _, b := range spec.GetBlocks() {
		if b.GetRequired() || b.GetMinItems() > 0 {
			out = append(out, b.GetName())
		}
	}
	return out
}

func describe(errs []*basepb.FieldError) string {
	if len(errs) == 0 {
		return "no field errors (accepted)"
	}
	return "field errors [" + base.FieldErrors(errs).Error() + "]"
}

func decode(spec *basepb.Spec, src string) ([]byte, hcl.Diagnostics) {
	f, diags := hclsyntax.ParseConfig([]byte(src), "config.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	return base.Decode(spec, f.Body)
}

// attrSource writes `name = <value>` for the JSON value raw of HCL type
// typ.
func attrSource(name, typ, raw string) (string, error) {
	ty, err := base.ParseType(typ)
	if err != nil {
		return "", err
	}
	if ty.HasDynamicTypes() {
		if ty, err = ctyjson.ImpliedType([]byte(raw)); err != nil {
			return "", err
		}
	}
	v, err := ctyjson.Unmarshal([]byte(raw), ty)
	if err != nil {
		return "", err
	}
	f := hclwrite.NewEmptyFile()
	f.Body().SetAttributeValue(name, v)
	return string(f.Bytes()), nil
}

// wrongValue is an HCL value no value of type typ converts from, or false
// when every value converts (string takes numbers and bools, any takes
// all).
func wrongValue(typ string) (string, bool) {
	ty, err := base.ParseType(typ)
	if err != nil || ty == cty.DynamicPseudoType {
		return "", false
	}
	switch {
	case ty == cty.String:
		return `{ not_a_string = true }`, true
	case ty == cty.Number:
		return `"not-a-number"`, true
	case ty == cty.Bool:
		return `"not-a-bool"`, true
	case ty.IsListType(), ty.IsSetType(), ty.IsTupleType():
		return `"not-a-list"`, true
	case ty.IsMapType(), ty.IsObjectType():
		return `"not-an-object"`, true
	}
	return "", false
}

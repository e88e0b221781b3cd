package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
)

// MaxNamespaceFileBytes bounds a namespace specification file. The largest
// valid namespace (structs.MaxNamespaceMetaEntries entries of the longest
// key and value, the longest description) is about 75 KB of HCL.
const MaxNamespaceFileBytes = 256 << 10

// nomadOnlyNamespaceFields are parts of Nomad's namespace specification
// drover does not model: a file setting one is refused rather than
// applied without it.
var nomadOnlyNamespaceFields = []string{"quota", "capabilities", "node_pool_config", "vault", "consul"}

// namespaceSpecs parses namespace specification files (specFormat).
var namespaceSpecs = specFormat[*structs.Namespace]{
	what: "namespace", maxBytes: MaxNamespaceFileBytes, parseJSON: parseNamespaceJSON, parseHCL: parseNamespaceHCL,
	name: func(v *structs.Namespace) string { return v.Name }, validate: func(v *structs.Namespace) error { return v.Validate() },
}

// readNamespaceFile reads a namespace specification from path, or from standard
// input for "-" (namespaceSpecs.read).
func readNamespaceFile(in io.Reader, path string) (*structs.Namespace, error) {
	return namespaceSpecs.read(in, path)
}

// parseNamespaceSpec parses a namespace specification (namespaceSpecs.parse).
func parseNamespaceSpec(filename string, src []byte) (*structs.Namespace, error) {
	return namespaceSpecs.parse(filename, src)
}

var namespaceSpecSchema = func() *hcl.BodySchema {
	s := &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "name", Required: true}, {Name: "description"}, {Name: "meta"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "meta"}},
	}
	for _, f := range nomadOnlyNamespaceFields {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: f})
		s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: f})
	}
	return s
}()

func parseNamespaceHCL(filename string, src []byte) (*structs.Namespace, error) {
	if diags := hclguard.Check(filename, src); diags.HasErrors() {
		return nil, diagError(diags)
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	content, diags := file.Body.Content(namespaceSpecSchema)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	ns := &structs.Namespace{}
	for _, f := range nomadOnlyNamespaceFields {
		if a, ok := content.Attributes[f]; ok {
			return nil, diagError(errDiag(a.NameRange, "Unsupported argument", fmt.Sprintf("drover does not model a namespace's %s.", f)))
		}
	}
	if a, ok := content.Attributes["name"]; ok {
		if ns.Name, diags = stringAttr(a); diags.HasErrors() {
			return nil, diagError(diags)
		}
	}
	if a, ok := content.Attributes["description"]; ok {
		if ns.Description, diags = stringAttr(a); diags.HasErrors() {
			return nil, diagError(diags)
		}
	}
	var metaSeen *hcl.Range
	if a, ok := content.Attributes["meta"]; ok {
		metaSeen = a.NameRange.Ptr()
		if ns.Meta, diags = stringMapAttr(a); diags.HasErrors() {
			return nil, diagError(diags)
		}
	}
	for _, b := range content.Blocks {
		if b.Type != "meta" {
			return nil, diagError(errDiag(b.DefRange, "Unsupported block type", fmt.Sprintf("drover does not model a namespace's %s.", b.Type)))
		}
		if metaSeen != nil {
			return nil, diagError(errDiag(b.DefRange, "Duplicate meta block",
				fmt.Sprintf("A meta block was already defined at %s; a namespace has one.", metaSeen)))
		}
		metaSeen = b.DefRange.Ptr()
		attrs, diags := b.Body.JustAttributes()
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		ns.Meta = make(map[string]string, len(attrs))
		for k, a := range attrs {
			v, diags := stringAttr(a)
			if diags.HasErrors() {
				return nil, diagError(diags)
			}
			ns.Meta[k] = v
		}
	}
	return ns, nil
}

// stringAttr evaluates an attribute that must be a literal string (no
// variables or functions exist here).
func stringAttr(a *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return "", diags
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", errDiag(a.Expr.Range(), "Incorrect attribute value type",
			fmt.Sprintf("%s must be a string.", a.Name))
	}
	return v.AsString(), nil
}

// stringMapAttr evaluates `meta = { k = "v" }`, the form for keys that
// are not identifiers.
func stringMapAttr(a *hcl.Attribute) (map[string]string, hcl.Diagnostics) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return nil, diags
	}
	bad := errDiag(a.Expr.Range(), "Incorrect attribute value type", fmt.Sprintf("%s must be an object of strings.", a.Name))
	if v.IsNull() || !v.IsWhollyKnown() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		return nil, bad
	}
	out := make(map[string]string, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, bad
		}
		out[k.AsString()] = e.AsString()
	}
	return out, nil
}

func errDiag(rng hcl.Range, summary, detail string) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: rng.Ptr()}}
}

// diagError joins error diagnostics, each as file:line:col: message, in
// the order of their positions.
func diagError(diags hcl.Diagnostics) error {
	var errs []*hcl.Diagnostic
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			errs = append(errs, d)
		}
	}
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i].Subject, errs[j].Subject
		return a != nil && b != nil && a.Start.Byte < b.Start.Byte
	})
	lines := make([]string, 0, len(errs))
	for _, d := range errs {
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if s := d.Subject; s != nil {
			msg = fmt.Sprintf("%s:%d:%d: %s", s.Filename, s.Start.Line, s.Start.Column, msg)
		}
		lines = append(lines, msg)
	}
	return errors.New(strings.Join(lines, "\n"))
}

// namespaceJSON is the API object, with Nomad's fields drover does not
// model accepted only when empty (null, "", {} or []).
type namespaceJSON struct {
	Name        string
	Description string
	Meta        map[string]string
	CreateIndex uint64
	ModifyIndex uint64

	Quota                 json.RawMessage
	Capabilities          json.RawMessage
	NodePoolConfiguration json.RawMessage
	VaultConfiguration    json.RawMessage
	ConsulConfiguration   json.RawMessage
	Hash                  json.RawMessage
}

func parseNamespaceJSON(filename string, src []byte) (*structs.Namespace, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	var in namespaceJSON
	if err := dec.Decode(&in); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("%s: %s", jsonPos(filename, src, se.Offset-1), err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("%s: %s", jsonPos(filename, src, te.Offset), err)
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%s: unexpected end of JSON", jsonPos(filename, src, int64(len(src))))
		default:
			return nil, fmt.Errorf("%s: %s", jsonPos(filename, src, dec.InputOffset()), err)
		}
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: text after the namespace object", jsonPos(filename, src, dec.InputOffset()))
	}
	for name, raw := range map[string]json.RawMessage{
		"Quota": in.Quota, "Capabilities": in.Capabilities, "NodePoolConfiguration": in.NodePoolConfiguration,
		"VaultConfiguration": in.VaultConfiguration, "ConsulConfiguration": in.ConsulConfiguration,
	} {
		switch strings.TrimSpace(string(raw)) {
		case "", "null", `""`, "{}", "[]":
		default:
			return nil, fmt.Errorf("%s: drover does not model a namespace's %s", filename, name)
		}
	}
	return &structs.Namespace{Name: in.Name, Description: in.Description, Meta: in.Meta}, nil
}

// jsonPos names a byte offset of src as file:line:col, columns in bytes
// from 1.
func jsonPos(filename string, src []byte, offset int64) string {
	if offset > int64(len(src)) {
		offset = int64(len(src))
	}
	if offset < 0 {
		offset = 0
	}
	before := src[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(offset) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("%s:%d:%d", filename, line, col)
}

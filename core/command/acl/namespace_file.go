package acl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
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
var namespaceSpecs = cli.SpecFormat[*structs.Namespace]{
	What: "namespace", MaxBytes: MaxNamespaceFileBytes, ParseJSON: parseNamespaceJSON, ParseHCL: parseNamespaceHCL,
	Name: func(v *structs.Namespace) string { return v.Name }, Validate: func(v *structs.Namespace) error { return v.Validate() },
}

// readNamespaceFile reads a namespace specification from path, or from standard
// input for "-" (namespaceSpecs.read).
func readNamespaceFile(in io.Reader, path string) (*structs.Namespace, error) {
	return namespaceSpecs.Read(in, path)
}

// parseNamespaceSpec parses a namespace specification (namespaceSpecs.parse).
func parseNamespaceSpec(filename string, src []byte) (*structs.Namespace, error) {
	return namespaceSpecs.Parse(filename, src)
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
		return nil, cli.DiagError(diags)
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	content, diags := file.Body.Content(namespaceSpecSchema)
	if diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	ns := &structs.Namespace{}
	for _, f := range nomadOnlyNamespaceFields {
		if a, ok := content.Attributes[f]; ok {
			return nil, cli.DiagError(cli.ErrDiag(a.NameRange, "Unsupported argument", fmt.Sprintf("drover does not model a namespace's %s.", f)))
		}
	}
	if a, ok := content.Attributes["name"]; ok {
		if ns.Name, diags = cli.StringAttr(a); diags.HasErrors() {
			return nil, cli.DiagError(diags)
		}
	}
	if a, ok := content.Attributes["description"]; ok {
		if ns.Description, diags = cli.StringAttr(a); diags.HasErrors() {
			return nil, cli.DiagError(diags)
		}
	}
	var metaSeen *hcl.Range
	if a, ok := content.Attributes["meta"]; ok {
		metaSeen = a.NameRange.Ptr()
		if ns.Meta, diags = cli.StringMapAttr(a); diags.HasErrors() {
			return nil, cli.DiagError(diags)
		}
	}
	for _, b := range content.Blocks {
		if b.Type != "meta" {
			return nil, cli.DiagError(cli.ErrDiag(b.DefRange, "Unsupported block type", fmt.Sprintf("drover does not model a namespace's %s.", b.Type)))
		}
		if metaSeen != nil {
			return nil, cli.DiagError(cli.ErrDiag(b.DefRange, "Duplicate meta block",
				fmt.Sprintf("A meta block was already defined at %s; a namespace has one.", metaSeen)))
		}
		metaSeen = b.DefRange.Ptr()
		attrs, diags := b.Body.JustAttributes()
		if diags.HasErrors() {
			return nil, cli.DiagError(diags)
		}
		ns.Meta = make(map[string]string, len(attrs))
		for k, a := range attrs {
			v, diags := cli.StringAttr(a)
			if diags.HasErrors() {
				return nil, cli.DiagError(diags)
			}
			ns.Meta[k] = v
		}
	}
	return ns, nil
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
			return nil, fmt.Errorf("%s: %s", cli.JSONPos(filename, src, se.Offset-1), err)
		case errors.As(err, &te):
			return nil, fmt.Errorf("%s: %s", cli.JSONPos(filename, src, te.Offset), err)
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%s: unexpected end of JSON", cli.JSONPos(filename, src, int64(len(src))))
		default:
			return nil, fmt.Errorf("%s: %s", cli.JSONPos(filename, src, dec.InputOffset()), err)
		}
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: text after the namespace object", cli.JSONPos(filename, src, dec.InputOffset()))
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

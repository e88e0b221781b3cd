package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// MaxNodePoolFileBytes bounds a node pool specification file; the largest
// valid pool (structs.MaxNodePoolMetaEntries of the longest key and value)
// is about 75 KB of HCL.
const MaxNodePoolFileBytes = 256 << 10

// nodePoolSpecs parses node pool specification files (specFormat).
var nodePoolSpecs = cli.SpecFormat[*structs.NodePool]{
	What: "node pool", MaxBytes: MaxNodePoolFileBytes, ParseJSON: parseNodePoolJSON, ParseHCL: parseNodePoolHCL,
	Name: func(v *structs.NodePool) string { return v.Name }, Validate: func(v *structs.NodePool) error { return v.Validate() },
}

// readNodePoolFile reads a node pool specification from path, or from standard
// input for "-" (nodePoolSpecs.read).
func readNodePoolFile(in io.Reader, path string) (*structs.NodePool, error) {
	return nodePoolSpecs.Read(in, path)
}

var (
	nodePoolFileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "node_pool", LabelNames: []string{"name"}}}}
	nodePoolBodySchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "description"}, {Name: "meta"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "meta"}, {Type: "scheduler_config"}},
	}
	nodePoolSchedSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "scheduler_algorithm"}, {Name: "memory_oversubscription"}},
	}
)

func parseNodePoolHCL(filename string, src []byte) (*structs.NodePool, error) {
	if diags := hclguard.Check(filename, src); diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	top, diags := file.Body.Content(nodePoolFileSchema)
	if diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	switch len(top.Blocks) {
	case 0:
		return nil, cli.DiagError(cli.ErrDiag(file.Body.MissingItemRange(), "Missing node_pool block",
			`The file must hold one node_pool "<name>" { ... } block.`))
	case 1:
	default:
		return nil, cli.DiagError(cli.ErrDiag(top.Blocks[1].DefRange, "Duplicate node_pool block",
			fmt.Sprintf("A node_pool block was already defined at %s; a file holds one.", top.Blocks[0].DefRange)))
	}
	blk := top.Blocks[0]
	p := &structs.NodePool{Name: blk.Labels[0]}
	if !structs.ValidNodePoolName(p.Name) {
		return nil, cli.DiagError(cli.ErrDiag(blk.LabelRanges[0], "Invalid node pool name",
			fmt.Sprintf("%q: must be 1 to 128 letters, digits, '-' or '_'.", p.Name)))
	}
	content, diags := blk.Body.Content(nodePoolBodySchema)
	if diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	if a, ok := content.Attributes["description"]; ok {
		if p.Description, diags = cli.StringAttr(a); diags.HasErrors() {
			return nil, cli.DiagError(diags)
		}
	}
	var metaSeen, schedSeen *hcl.Range
	if a, ok := content.Attributes["meta"]; ok {
		metaSeen = a.NameRange.Ptr()
		if p.Meta, diags = cli.StringMapAttr(a); diags.HasErrors() {
			return nil, cli.DiagError(diags)
		}
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "meta":
			if metaSeen != nil {
				return nil, cli.DiagError(cli.ErrDiag(b.DefRange, "Duplicate meta block",
					fmt.Sprintf("A meta block was already defined at %s; a node pool has one.", metaSeen)))
			}
			metaSeen = b.DefRange.Ptr()
			attrs, diags := b.Body.JustAttributes()
			if diags.HasErrors() {
				return nil, cli.DiagError(diags)
			}
			p.Meta = make(map[string]string, len(attrs))
			for k, a := range attrs {
				v, diags := cli.StringAttr(a)
				if diags.HasErrors() {
					return nil, cli.DiagError(diags)
				}
				p.Meta[k] = v
			}
		case "scheduler_config":
			if schedSeen != nil {
				return nil, cli.DiagError(cli.ErrDiag(b.DefRange, "Duplicate scheduler_config block",
					fmt.Sprintf("A scheduler_config block was already defined at %s; a node pool has one.", schedSeen)))
			}
			schedSeen = b.DefRange.Ptr()
			sc, err := parseNodePoolSched(b.Body)
			if err != nil {
				return nil, err
			}
			p.SchedulerConfiguration = sc
		}
	}
	return p, nil
}

func parseNodePoolSched(body hcl.Body) (*structs.NodePoolSchedulerConfiguration, error) {
	content, diags := body.Content(nodePoolSchedSchema)
	if diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	sc := &structs.NodePoolSchedulerConfiguration{}
	if a, ok := content.Attributes["scheduler_algorithm"]; ok {
		if sc.SchedulerAlgorithm, diags = cli.StringAttr(a); diags.HasErrors() {
			return nil, cli.DiagError(diags)
		}
		switch sc.SchedulerAlgorithm {
		case structs.SchedulerAlgorithmBinpack, structs.SchedulerAlgorithmSpread:
		default:
			return nil, cli.DiagError(cli.ErrDiag(a.Expr.Range(), "Invalid scheduler_algorithm",
				fmt.Sprintf("%q: must be %q or %q.", sc.SchedulerAlgorithm, structs.SchedulerAlgorithmBinpack, structs.SchedulerAlgorithmSpread)))
		}
	}
	if a, ok := content.Attributes["memory_oversubscription"]; ok {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, cli.DiagError(diags)
		}
		var on bool
		switch {
		case !v.IsNull() && v.IsKnown() && v.Type() == cty.String && v.AsString() == "enabled":
			on = true
		case !v.IsNull() && v.IsKnown() && v.Type() == cty.String && v.AsString() == "disabled":
		case !v.IsNull() && v.IsKnown() && v.Type() == cty.Bool:
			on = v.True()
		default:
			return nil, cli.DiagError(cli.ErrDiag(a.Expr.Range(), "Invalid memory_oversubscription",
				`memory_oversubscription must be "enabled" or "disabled".`))
		}
		sc.MemoryOversubscriptionEnabled = &on
	}
	return sc, nil
}

// nodePoolJSON is the API object; unknown fields are refused.
type nodePoolJSON struct {
	Name                   string
	Description            string
	Meta                   map[string]string
	SchedulerConfiguration *structs.NodePoolSchedulerConfiguration
	CreateIndex            uint64
	ModifyIndex            uint64
}

func parseNodePoolJSON(filename string, src []byte) (*structs.NodePool, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	var in nodePoolJSON
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
		return nil, fmt.Errorf("%s: text after the node pool object", cli.JSONPos(filename, src, dec.InputOffset()))
	}
	return &structs.NodePool{Name: in.Name, Description: in.Description, Meta: in.Meta, SchedulerConfiguration: in.SchedulerConfiguration}, nil
}

package volume

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// MaxVolumeFileBytes bounds a volume specification file. The largest valid
// volume (every map at its entry bound, every topology at its segment
// bound) is under 1 MiB of HCL; real ones are a few hundred bytes.
const MaxVolumeFileBytes = 1 << 20

// readVolumeFile reads a volume specification from path, or from standard
// input for "-", bounded by MaxVolumeFileBytes, and parses it.
func readVolumeFile(in io.Reader, path string) (*structs.CSIVolume, error) {
	src, err := cli.ReadInput(in, path, MaxVolumeFileBytes)
	if err != nil {
		return nil, fmt.Errorf("reading volume file: %w", err)
	}
	name := path
	if path == "-" {
		name = "<stdin>"
	}
	return parseVolumeSpec(name, src)
}

// parseVolumeSpec parses Nomad's volume specification: HCL, or JSON (the
// API object) when the file name ends in .json or the text starts with
// "{". Errors name the file, line and column. Only CSI volumes exist.
func parseVolumeSpec(filename string, src []byte) (*structs.CSIVolume, error) {
	if strings.HasSuffix(filename, ".json") || bytes.HasPrefix(bytes.TrimLeft(src, " \t\r\n"), []byte("{")) {
		var v structs.CSIVolume
		dec := json.NewDecoder(bytes.NewReader(src))
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %s", cli.JSONPos(filename, src, dec.InputOffset()), err)
		}
		if v.ID == "" {
			return nil, fmt.Errorf("%s: the volume has no ID", filename)
		}
		return &v, nil
	}
	if diags := hclguard.Check(filename, src); diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	v, diags := decodeVolumeBody(file.Body)
	if diags.HasErrors() {
		return nil, cli.DiagError(diags)
	}
	return v, nil
}

var volumeSpecSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "id", Required: true}, {Name: "name"}, {Name: "type", Required: true}, {Name: "namespace"},
		{Name: "external_id"}, {Name: "plugin_id", Required: true},
		{Name: "capacity_min"}, {Name: "capacity_max"}, {Name: "clone_id"}, {Name: "snapshot_id"},
		{Name: "secrets"}, {Name: "parameters"}, {Name: "context"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "capability"}, {Type: "mount_options"}, {Type: "secrets"}, {Type: "parameters"}, {Type: "context"},
		{Type: "topology_request"},
	},
}

func decodeVolumeBody(body hcl.Body) (*structs.CSIVolume, hcl.Diagnostics) {
	content, diags := body.Content(volumeSpecSchema)
	if diags.HasErrors() {
		return nil, diags
	}
	v := &structs.CSIVolume{}
	strs := map[string]*string{"id": &v.ID, "name": &v.Name, "namespace": &v.Namespace, "external_id": &v.ExternalID,
		"plugin_id": &v.PluginID, "clone_id": &v.CloneID, "snapshot_id": &v.SnapshotID}
	var typ string
	strs["type"] = &typ
	for name, dst := range strs {
		if a, ok := content.Attributes[name]; ok {
			if *dst, diags = cli.StringAttr(a); diags.HasErrors() {
				return nil, diags
			}
		}
	}
	if typ != "csi" {
		a := content.Attributes["type"]
		return nil, cli.ErrDiag(a.Expr.Range(), "Unsupported volume type",
			fmt.Sprintf("type is %q; drover registers CSI volumes only (type = \"csi\").", typ))
	}
	if v.Name == "" {
		v.Name = v.ID
	}
	for name, dst := range map[string]*int64{"capacity_min": &v.RequestedCapacityMin, "capacity_max": &v.RequestedCapacityMax} {
		a, ok := content.Attributes[name]
		if !ok {
			continue
		}
		s, d := cli.StringAttr(a)
		if d.HasErrors() {
			return nil, d
		}
		n, err := parseBytes(s)
		if err != nil {
			return nil, cli.ErrDiag(a.Expr.Range(), "Invalid capacity", fmt.Sprintf("%s: %v.", name, err))
		}
		*dst = n
	}
	maps := map[string]*map[string]string{"secrets": &v.Secrets, "parameters": &v.Parameters, "context": &v.Context}
	seen := map[string]*hcl.Range{}
	for name, dst := range maps {
		if a, ok := content.Attributes[name]; ok {
			seen[name] = a.NameRange.Ptr()
			if *dst, diags = cli.StringMapAttr(a); diags.HasErrors() {
				return nil, diags
			}
		}
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "secrets", "parameters", "context":
			if prev := seen[b.Type]; prev != nil {
				return nil, cli.ErrDiag(b.DefRange, "Duplicate "+b.Type, fmt.Sprintf("%s was already set at %s.", b.Type, prev))
			}
			seen[b.Type] = b.DefRange.Ptr()
			m, d := blockStringMap(b)
			if d.HasErrors() {
				return nil, d
			}
			*maps[b.Type] = m
		case "capability":
			c, d := decodeCapability(b)
			if d.HasErrors() {
				return nil, d
			}
			v.RequestedCapabilities = append(v.RequestedCapabilities, c)
		case "mount_options":
			if v.MountOptions != nil {
				return nil, cli.ErrDiag(b.DefRange, "Duplicate mount_options block", "A volume has one mount_options block.")
			}
			mo, d := decodeMountOptions(b.Body)
			if d.HasErrors() {
				return nil, d
			}
			v.MountOptions = mo
		case "topology_request":
			if v.RequestedTopologies != nil {
				return nil, cli.ErrDiag(b.DefRange, "Duplicate topology_request block", "A volume has one topology_request block.")
			}
			tr, d := decodeTopologyRequest(b.Body)
			if d.HasErrors() {
				return nil, d
			}
			v.RequestedTopologies = tr
		}
	}
	if len(v.RequestedCapabilities) == 0 {
		return nil, cli.ErrDiag(body.MissingItemRange(), "Missing capability block",
			"A volume needs at least one capability block (access_mode, attachment_mode).")
	}
	return v, nil
}

func blockStringMap(b *hcl.Block) (map[string]string, hcl.Diagnostics) {
	attrs, diags := b.Body.JustAttributes()
	if diags.HasErrors() {
		return nil, diags
	}
	out := make(map[string]string, len(attrs))
	for k, a := range attrs {
		s, d := cli.StringAttr(a)
		if d.HasErrors() {
			return nil, d
		}
		out[k] = s
	}
	return out, nil
}

var capabilitySchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "access_mode", Required: true}, {Name: "attachment_mode", Required: true}}}

func decodeCapability(b *hcl.Block) (*structs.CSIVolumeCapability, hcl.Diagnostics) {
	content, diags := b.Body.Content(capabilitySchema)
	if diags.HasErrors() {
		return nil, diags
	}
	access, d := cli.StringAttr(content.Attributes["access_mode"])
	if d.HasErrors() {
		return nil, d
	}
	if !structs.CSIVolumeAccessMode(access).Valid() {
		return nil, cli.ErrDiag(content.Attributes["access_mode"].Expr.Range(), "Invalid access_mode",
			fmt.Sprintf("%q is not one of single-node-reader-only, single-node-writer, multi-node-reader-only, "+
				"multi-node-single-writer, multi-node-multi-writer.", access))
	}
	attach, d := cli.StringAttr(content.Attributes["attachment_mode"])
	if d.HasErrors() {
		return nil, d
	}
	if !structs.CSIVolumeAttachmentMode(attach).Valid() {
		return nil, cli.ErrDiag(content.Attributes["attachment_mode"].Expr.Range(), "Invalid attachment_mode",
			fmt.Sprintf("%q is not one of file-system, block-device.", attach))
	}
	return &structs.CSIVolumeCapability{AccessMode: structs.CSIVolumeAccessMode(access),
		AttachmentMode: structs.CSIVolumeAttachmentMode(attach)}, nil
}

var mountOptionsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "fs_type"}, {Name: "mount_flags"}}}

func decodeMountOptions(body hcl.Body) (*structs.CSIMountOptions, hcl.Diagnostics) {
	content, diags := body.Content(mountOptionsSchema)
	if diags.HasErrors() {
		return nil, diags
	}
	mo := &structs.CSIMountOptions{}
	if a, ok := content.Attributes["fs_type"]; ok {
		if mo.FSType, diags = cli.StringAttr(a); diags.HasErrors() {
			return nil, diags
		}
	}
	if a, ok := content.Attributes["mount_flags"]; ok {
		val, d := a.Expr.Value(nil)
		if d.HasErrors() {
			return nil, d
		}
		bad := cli.ErrDiag(a.Expr.Range(), "Incorrect attribute value type", "mount_flags must be a list of strings.")
		if val.IsNull() || !val.IsWhollyKnown() || !(val.Type().IsListType() || val.Type().IsTupleType()) {
			return nil, bad
		}
		for it := val.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() || e.Type().FriendlyName() != "string" {
				return nil, bad
			}
			mo.MountFlags = append(mo.MountFlags, e.AsString())
		}
	}
	return mo, nil
}

var (
	topologyRequestSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "required"}, {Type: "preferred"}}}
	topologyListSchema    = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "topology"}}}
	topologySchema        = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "segments"}},
		Blocks: []hcl.BlockHeaderSchema{{Type: "segments"}}}
)

func decodeTopologyRequest(body hcl.Body) (*structs.CSITopologyRequest, hcl.Diagnostics) {
	content, diags := body.Content(topologyRequestSchema)
	if diags.HasErrors() {
		return nil, diags
	}
	tr := &structs.CSITopologyRequest{}
	for _, b := range content.Blocks {
		list, d := b.Body.Content(topologyListSchema)
		if d.HasErrors() {
			return nil, d
		}
		var topos []*structs.CSITopology
		for _, tb := range list.Blocks {
			tc, d := tb.Body.Content(topologySchema)
			if d.HasErrors() {
				return nil, d
			}
			t := &structs.CSITopology{}
			if a, ok := tc.Attributes["segments"]; ok {
				if t.Segments, d = cli.StringMapAttr(a); d.HasErrors() {
					return nil, d
				}
			}
			for _, sb := range tc.Blocks {
				if t.Segments, d = blockStringMap(sb); d.HasErrors() {
					return nil, d
				}
			}
			if len(t.Segments) == 0 {
				return nil, cli.ErrDiag(tb.DefRange, "Empty topology", "A topology needs segments.")
			}
			topos = append(topos, t)
		}
		if b.Type == "required" {
			tr.Required = append(tr.Required, topos...)
		} else {
			tr.Preferred = append(tr.Preferred, topos...)
		}
	}
	return tr, nil
}

// parseBytes reads a size as Nomad's volume files write it: a number and
// an optional unit, decimal (k, kb, m, mb, g, gb, t, tb) or binary (kib,
// mib, gib, tib), case-insensitive, with optional space ("10GiB", "1 G").
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !(unicode.IsDigit(r) || r == '.') })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || f < 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. \"10GiB\", \"500MB\")", s)
	}
	mult := map[string]float64{"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40}
	m, ok := mult[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q in %q", unit, s)
	}
	out := f * m
	if out > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(out), nil
}

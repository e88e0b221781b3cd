package jobspec

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// A group's `volume "<name>" { … }`, a task's `volume_mount { … }` and
// `csi_plugin { … }`. Values the parser can point at (types and modes) are
// checked here with their position; the rest is structs' validation.

var volumeAttrs = []string{"type", "source", "read_only", "access_mode", "attachment_mode", "per_alloc", "sticky"}

var volumeBlocks = []blockKind{{name: "mount_options"}}

func (p *parser) volumes(bs hcl.Blocks) map[string]*structs.VolumeRequest {
	if len(bs) == 0 {
		return nil
	}
	out := make(map[string]*structs.VolumeRequest, len(bs))
	for _, b := range bs {
		v := &structs.VolumeRequest{Name: b.Labels[0]}
		attrs, blocks := p.content(b.Body, volumeAttrs, volumeBlocks)
		if p.setString(attrs["type"], &v.Type) && v.Type != structs.VolumeTypeCSI && v.Type != structs.VolumeTypeHost {
			p.errorf(attrs["type"].Expr.Range(), "Unsupported volume type",
				"type is %q; a volume is a CSI volume (type = \"csi\") or a client's host volume (type = \"host\").", v.Type)
		} else if attrs["type"] == nil {
			p.errorf(b.DefRange, "Missing required argument", "A volume block needs a type (type = \"csi\" or \"host\").")
		}
		if !p.setString(attrs["source"], &v.Source) {
			p.errorf(b.DefRange, "Missing required argument", "A volume block needs a source: the ID of a registered CSI volume or the name of a client's host volume.")
		}
		p.setBool(attrs["read_only"], &v.ReadOnly)
		p.setBool(attrs["per_alloc"], &v.PerAlloc)
		p.setBool(attrs["sticky"], &v.Sticky)
		var access, attach string
		if p.setString(attrs["access_mode"], &access) && !structs.CSIVolumeAccessMode(access).Valid() {
			p.errorf(attrs["access_mode"].Expr.Range(), "Invalid access_mode",
				"%q is not one of single-node-reader-only, single-node-writer, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer.", access)
		}
		if p.setString(attrs["attachment_mode"], &attach) && !structs.CSIVolumeAttachmentMode(attach).Valid() {
			p.errorf(attrs["attachment_mode"].Expr.Range(), "Invalid attachment_mode", "%q is not one of file-system, block-device.", attach)
		}
		v.AccessMode, v.AttachmentMode = structs.CSIVolumeAccessMode(access), structs.CSIVolumeAttachmentMode(attach)
		if mb := first(blocks, "mount_options"); mb != nil {
			mo := &structs.CSIMountOptions{}
			ma, _ := p.content(mb.Body, []string{"fs_type", "mount_flags"}, nil)
			p.setString(ma["fs_type"], &mo.FSType)
			p.setStrings(ma["mount_flags"], &mo.MountFlags)
			v.MountOptions = mo
		}
		out[v.Name] = v
	}
	return out
}

var volumeMountAttrs = []string{"volume", "destination", "read_only", "propagation_mode", "selinux_label"}

func (p *parser) volumeMounts(bs hcl.Blocks) []*structs.VolumeMount {
	var out []*structs.VolumeMount
	for _, b := range bs {
		m := &structs.VolumeMount{}
		attrs, _ := p.content(b.Body, volumeMountAttrs, nil)
		if !p.setString(attrs["volume"], &m.Volume) {
			p.errorf(b.DefRange, "Missing required argument", "A volume_mount block needs a volume: the name of a group volume.")
		}
		if !p.setString(attrs["destination"], &m.Destination) {
			p.errorf(b.DefRange, "Missing required argument", "A volume_mount block needs a destination.")
		}
		p.setBool(attrs["read_only"], &m.ReadOnly)
		p.setString(attrs["propagation_mode"], &m.PropagationMode)
		p.setString(attrs["selinux_label"], &m.SELinuxLabel)
		out = append(out, m)
	}
	return out
}

var csiPluginAttrs = []string{"id", "type", "mount_dir", "stage_publish_base_dir", "health_timeout"}

func (p *parser) csiPlugin(b *hcl.Block) *structs.TaskCSIPluginConfig {
	c := &structs.TaskCSIPluginConfig{}
	attrs, _ := p.content(b.Body, csiPluginAttrs, nil)
	if !p.setString(attrs["id"], &c.ID) {
		p.errorf(b.DefRange, "Missing required argument", "A csi_plugin block needs an id.")
	}
	var typ string
	if p.setString(attrs["type"], &typ) {
		switch structs.CSIPluginType(typ) {
		case structs.CSIPluginTypeNode, structs.CSIPluginTypeController, structs.CSIPluginTypeMonolith:
		default:
			p.errorf(attrs["type"].Expr.Range(), "Invalid csi_plugin type", "type must be \"node\", \"controller\" or \"monolith\", got %q.", typ)
		}
	} else {
		p.errorf(b.DefRange, "Missing required argument", "A csi_plugin block needs a type (node, controller or monolith).")
	}
	c.Type = structs.CSIPluginType(typ)
	p.setString(attrs["mount_dir"], &c.MountDir)
	p.setString(attrs["stage_publish_base_dir"], &c.StagePublishBaseDir)
	p.setDuration(attrs["health_timeout"], &c.HealthTimeout)
	return c
}

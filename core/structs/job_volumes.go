package structs

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CSIVolumeAccessMode is how many nodes may use a volume and how.
type CSIVolumeAccessMode string

// Access modes, Nomad's names.
const (
	CSIVolumeAccessModeUnknown               CSIVolumeAccessMode = ""
	CSIVolumeAccessModeSingleNodeReader      CSIVolumeAccessMode = "single-node-reader-only"
	CSIVolumeAccessModeSingleNodeWriter      CSIVolumeAccessMode = "single-node-writer"
	CSIVolumeAccessModeMultiNodeReader       CSIVolumeAccessMode = "multi-node-reader-only"
	CSIVolumeAccessModeMultiNodeSingleWriter CSIVolumeAccessMode = "multi-node-single-writer"
	CSIVolumeAccessModeMultiNodeMultiWriter  CSIVolumeAccessMode = "multi-node-multi-writer"
)

// CSIVolumeAttachmentMode is how a volume is presented to a task.
type CSIVolumeAttachmentMode string

// Attachment modes, Nomad's names.
const (
	CSIVolumeAttachmentModeUnknown     CSIVolumeAttachmentMode = ""
	CSIVolumeAttachmentModeBlockDevice CSIVolumeAttachmentMode = "block-device"
	CSIVolumeAttachmentModeFilesystem  CSIVolumeAttachmentMode = "file-system"
)

// CSIMountOptions are the file system and flags a volume is mounted with.
type CSIMountOptions struct {
	FSType     string   `codec:",omitempty" bound:"id"`
	MountFlags []string `codec:",omitempty"`
}

// The volume types a group's volume block may name, Nomad's names: a CSI
// volume registered with the servers, or a host volume a client's agent
// config declares (`client { host_volume "<name>" { … } }`).
const (
	VolumeTypeCSI  = "csi"
	VolumeTypeHost = "host"
)

// Bounds on a group's volumes and a task's mounts.
const (
	MaxVolumesPerGroup   = 32
	MaxMountsPerTask     = 32
	MaxVolumePathBytes   = 1024
	DefaultCSIMountDir   = "/csi"
	DefaultCSIStageDir   = "/local/csi"
	DefaultCSIHealthTime = 30 * time.Second
)

// VolumeRequest is a group's `volume "<name>" { … }` block: the volume
// the group's allocations claim.
type VolumeRequest struct {
	Name           string                  `codec:",omitempty" bound:"id"`
	Type           string                  `codec:",omitempty" bound:"id"`
	Source         string                  `codec:",omitempty"`
	ReadOnly       bool                    `codec:",omitempty"`
	AccessMode     CSIVolumeAccessMode     `codec:",omitempty" bound:"id"`
	AttachmentMode CSIVolumeAttachmentMode `codec:",omitempty" bound:"id"`
	MountOptions   *CSIMountOptions        `codec:",omitempty"`
	PerAlloc       bool                    `codec:",omitempty"`
	Sticky         bool                    `codec:",omitempty"`
}

// VolumeID is the ID of the volume an allocation named allocName claims:
// the source, or with per_alloc the source suffixed with the alloc's
// index ("data[2]"), as in Nomad.
func (v *VolumeRequest) VolumeID(allocName string) string {
	if !v.PerAlloc {
		return v.Source
	}
	return v.Source + "[" + strconv.Itoa(int(AllocIndex(allocName))) + "]"
}

// AllocIndex is the index in an allocation name "job.group[3]" (0 when
// there is none).
func AllocIndex(name string) uint {
	i := strings.LastIndexByte(name, '[')
	if i < 0 || !strings.HasSuffix(name, "]") {
		return 0
	}
	n, err := strconv.ParseUint(name[i+1:len(name)-1], 10, 32)
	if err != nil {
		return 0
	}
	return uint(n)
}

// VolumeMount is a task's `volume_mount { … }`: where a group volume
// appears in the task.
type VolumeMount struct {
	Volume          string `codec:",omitempty" bound:"id"`
	Destination     string `codec:",omitempty"`
	ReadOnly        bool   `codec:",omitempty"`
	PropagationMode string `codec:",omitempty" bound:"id"`
	SELinuxLabel    string `codec:",omitempty" bound:"id"`
}

// CSIPluginType is what a task's CSI plugin serves.
type CSIPluginType string

// CSI plugin types, Nomad's names.
const (
	CSIPluginTypeNode       CSIPluginType = "node"
	CSIPluginTypeController CSIPluginType = "controller"
	CSIPluginTypeMonolith   CSIPluginType = "monolith"
)

// TaskCSIPluginConfig is a task's `csi_plugin { … }`: the task runs a CSI
// driver whose socket the client finds in MountDir.
type TaskCSIPluginConfig struct {
	ID                  string        `codec:",omitempty" bound:"id"`
	Type                CSIPluginType `codec:",omitempty" bound:"id"`
	MountDir            string        `codec:",omitempty"`
	StagePublishBaseDir string        `codec:",omitempty"`
	HealthTimeout       time.Duration `codec:",omitempty"`
}

// HasNode and HasController say which services the plugin runs.
func (c *TaskCSIPluginConfig) HasNode() bool {
	return c.Type == CSIPluginTypeNode || c.Type == CSIPluginTypeMonolith
}

func (c *TaskCSIPluginConfig) HasController() bool {
	return c.Type == CSIPluginTypeController || c.Type == CSIPluginTypeMonolith
}

func (c *TaskCSIPluginConfig) canonicalize() {
	if c.MountDir == "" {
		c.MountDir = DefaultCSIMountDir
	}
	if c.StagePublishBaseDir == "" {
		c.StagePublishBaseDir = DefaultCSIStageDir
	}
	if c.HealthTimeout == 0 {
		c.HealthTimeout = DefaultCSIHealthTime
	}
}

func (c *TaskCSIPluginConfig) validate(l *errList, where string) {
	where += ": csi_plugin"
	if !ValidCSIID(c.ID) {
		l.add("%s: id %q must be 1 to %d bytes of letters, digits and _ . -", where, c.ID, MaxCSIVolumeIDBytes)
	}
	switch c.Type {
	case CSIPluginTypeNode, CSIPluginTypeController, CSIPluginTypeMonolith:
	default:
		l.add("%s: type %q is not one of node, controller, monolith", where, c.Type)
	}
	for name, p := range map[string]string{"mount_dir": c.MountDir, "stage_publish_base_dir": c.StagePublishBaseDir} {
		if !path.IsAbs(p) || len(p) > MaxVolumePathBytes || strings.Contains(p, "..") {
			l.add("%s: %s %q must be an absolute path without ..", where, name, p)
		}
	}
	md := path.Clean(c.MountDir)
	if sd := path.Clean(c.StagePublishBaseDir); sd == md || strings.HasPrefix(sd, md+"/") {
		l.add("%s: stage_publish_base_dir %q must not be inside mount_dir %q", where, c.StagePublishBaseDir, c.MountDir)
	}
	if c.HealthTimeout < 0 {
		l.add("%s: health_timeout must not be negative", where)
	}
}

// validateVolumes checks a group's volume blocks and its tasks' mounts.
func (tg *TaskGroup) validateVolumes(l *errList, where string) {
	if len(tg.Volumes) > MaxVolumesPerGroup {
		l.add("%s: %d volumes, more than %d", where, len(tg.Volumes), MaxVolumesPerGroup)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(tg.Volumes)) {
		v := tg.Volumes[name]
		w := fmt.Sprintf("%s: volume %q", where, name)
		if v == nil {
			l.add("%s: null is not allowed", w)
			continue
		}
		if v.Name != "" && v.Name != name {
			l.add("%s: name %q does not match the block's label", w, v.Name)
		}
		switch v.Type {
		case VolumeTypeCSI:
		case VolumeTypeHost:
			v.validateHost(l, w, tg)
			continue
		default:
			l.add("%s: type %q is not one of csi, host", w, v.Type)
			continue
		}
		switch {
		case v.Source == "":
			l.add("%s: source is required", w)
		case !ValidCSIID(v.Source):
			l.add("%s: source %q must be a volume ID (letters, digits and _ . - [ ], at most %d bytes)", w, v.Source, MaxCSIVolumeIDBytes)
		}
		if !v.AccessMode.Valid() {
			l.add("%s: access_mode %q is not one of %s", w, v.AccessMode, accessModeNames)
		}
		if !v.AttachmentMode.Valid() {
			l.add("%s: attachment_mode %q is not one of file-system, block-device", w, v.AttachmentMode)
		}
		if !v.ReadOnly && v.AccessMode.Valid() && !v.AccessMode.Writer() {
			l.add("%s: access_mode %q is read-only; set read_only = true", w, v.AccessMode)
		}
		if mo := v.MountOptions; mo != nil {
			if len(mo.FSType) > MaxCSIMountFlagBytes || len(mo.MountFlags) > MaxCSIMountFlags {
				l.add("%s: mount_options exceed %d flags of %d bytes", w, MaxCSIMountFlags, MaxCSIMountFlagBytes)
			}
		}
	}
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		w := fmt.Sprintf("%s: task %q", where, t.Name)
		if len(t.VolumeMounts) > MaxMountsPerTask {
			l.add("%s: %d volume_mount blocks, more than %d", w, len(t.VolumeMounts), MaxMountsPerTask)
			continue
		}
		dests := map[string]bool{}
		for i, m := range t.VolumeMounts {
			mw := fmt.Sprintf("%s: volume_mount %d", w, i+1)
			if m == nil {
				l.add("%s: null is not allowed", mw)
				continue
			}
			v, ok := tg.Volumes[m.Volume]
			switch {
			case m.Volume == "":
				l.add("%s: volume is required", mw)
			case !ok:
				l.add("%s: volume %q is not a volume of the group", mw, m.Volume)
			case v != nil && v.ReadOnly && !m.ReadOnly:
				l.add("%s: volume %q is read_only in the group; the mount must be read_only too", mw, m.Volume)
			}
			switch d := m.Destination; {
			case d == "":
				l.add("%s: destination is required", mw)
			case len(d) > MaxVolumePathBytes || strings.Contains(d, "\x00"):
				l.add("%s: destination is not a usable path", mw)
			case dests[path.Clean(d)]:
				l.add("%s: destination %q is mounted twice", mw, d)
			case path.Clean("/"+d) == "/":
				l.add("%s: destination %q is the task's root; mount a directory beneath it", mw, d)
			case strings.HasPrefix(strings.TrimLeft(path.Clean("/"+d), "/"), ".drover"):
				l.add("%s: destination %q: names beginning with .drover are the drivers' own files in a task directory", mw, d)
			}
			dests[path.Clean(m.Destination)] = true
			switch m.PropagationMode {
			case "", "private", "host-to-task", "bidirectional":
			default:
				l.add("%s: propagation_mode %q is not one of private, host-to-task, bidirectional", mw, m.PropagationMode)
			}
		}
		if t.CSIPluginConfig != nil {
			t.CSIPluginConfig.validate(l, w)
		}
	}
}

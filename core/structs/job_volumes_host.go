package structs

import (
	"regexp"
	"sync"
)

// Host volumes: a directory of a client node, declared in its agent
// config (`client { host_volume "<name>" { path, read_only } }`),
// fingerprinted onto the node as HostVolumes and asked for by a group's
// `volume "<alias>" { type = "host" source = "<name>" }`.

// MaxHostVolumesPerNode bounds the host volumes one client declares.
const MaxHostVolumesPerNode = 256

// MaxHostVolumeNameBytes bounds a host volume's name.
const MaxHostVolumeNameBytes = 128

// ClientHostVolumeConfig is one host volume of a node, as Nomad's node
// JSON shows it: HostVolumes {"<name>": {"Name", "Path", "ReadOnly"}}.
type ClientHostVolumeConfig struct {
	Name     string `codec:",omitempty" bound:"id"`
	Path     string `codec:",omitempty"`
	ReadOnly bool   `codec:",omitempty"`
}

// Copy returns a copy of c.
func (c *ClientHostVolumeConfig) Copy() *ClientHostVolumeConfig {
	if c == nil {
		return nil
	}
	d := *c
	return &d
}

// hostVolumeNameRe is the rule for host volume names: letters, digits and
// _ . - plus [ ] for the per-allocation volumes per_alloc asks for
// ("data[0]").
var hostVolumeNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_.\-\[\]]+$`) })

// ValidHostVolumeName reports whether name is a valid host volume name.
func ValidHostVolumeName(name string) bool {
	return len(name) <= MaxHostVolumeNameBytes && hostVolumeNameRe().MatchString(name)
}

// ValidateHostVolumes bounds the host volumes a node reports, before they
// reach Raft.
func (n *Node) ValidateHostVolumes() error {
	if len(n.HostVolumes) > MaxHostVolumesPerNode {
		return NewError(ErrInvalid, "Node HostVolumes: %d host volumes, more than %d", len(n.HostVolumes), MaxHostVolumesPerNode)
	}
	for name, v := range n.HostVolumes {
		switch {
		case !ValidHostVolumeName(name):
			return NewError(ErrInvalid, "Node HostVolumes: name %q must be 1 to %d bytes of letters, digits and _ . - [ ]", name, MaxHostVolumeNameBytes)
		case v == nil:
			return NewError(ErrInvalid, "Node HostVolumes %q: null is not allowed", name)
		case v.Name != "" && v.Name != name:
			return NewError(ErrInvalid, "Node HostVolumes %q: Name %q does not match its key", name, v.Name)
		case len(v.Path) == 0 || len(v.Path) > MaxVolumePathBytes || v.Path[0] != '/':
			return NewError(ErrInvalid, "Node HostVolumes %q: Path must be an absolute path of at most %d bytes", name, MaxVolumePathBytes)
		}
	}
	return nil
}

// HostVolumesEqual reports whether two nodes' host volumes are the same.
func HostVolumesEqual(a, b map[string]*ClientHostVolumeConfig) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || (v == nil) != (w == nil) || v != nil && *v != *w {
			return false
		}
	}
	return true
}

func copyHostVolumes(m map[string]*ClientHostVolumeConfig) map[string]*ClientHostVolumeConfig {
	if m == nil {
		return nil
	}
	c := make(map[string]*ClientHostVolumeConfig, len(m))
	for k, v := range m {
		c[k] = v.Copy()
	}
	return c
}

// validateHost checks a group's host volume request, Nomad's rules: a
// source naming a host volume; no CSI access or attachment mode, no mount
// options; per_alloc not with canaries (two allocations of one index
// would share the volume).
func (v *VolumeRequest) validateHost(l *errList, w string, tg *TaskGroup) {
	switch {
	case v.Source == "":
		l.add("%s: source is required", w)
	case !ValidHostVolumeName(v.Source):
		l.add("%s: source %q must be a host volume name (letters, digits and _ . - [ ], at most %d bytes)", w, v.Source, MaxHostVolumeNameBytes)
	}
	if v.AccessMode != "" {
		l.add("%s: host volumes cannot have an access_mode (%q); it is for CSI volumes", w, v.AccessMode)
	}
	if v.AttachmentMode != "" {
		l.add("%s: host volumes cannot have an attachment_mode (%q); it is for CSI volumes", w, v.AttachmentMode)
	}
	if v.MountOptions != nil {
		l.add("%s: host volumes cannot have mount_options; they are for CSI volumes", w)
	}
	if v.Sticky {
		l.add("%s: host volumes cannot be sticky; sticky is for CSI volumes", w)
	}
	if v.PerAlloc && tg.Update != nil && tg.Update.Canary > 0 {
		l.add("%s: volume cannot be per_alloc when canaries are in use", w)
	}
}

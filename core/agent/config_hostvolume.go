package agent

import (
	"os"
	"path/filepath"

	"github.com/drover-org/drover/core/structs"
)

// HostVolumeConfig is a client's `host_volume "<name>" { path, read_only }`
// block (Nomad's): a directory of this node that jobs mount with a group
// `volume { type = "host" source = "<name>" }`.
type HostVolumeConfig struct {
	Name     string `hcl:"name,label"`
	Path     string `hcl:"path"`
	ReadOnly bool   `hcl:"read_only,optional"`
}

// mergeHostVolumes overlays b's host volumes on a's: a later file's block
// of the same name replaces the earlier one, as Nomad merges them.
func mergeHostVolumes(a, b []*HostVolumeConfig) []*HostVolumeConfig {
	if len(b) == 0 {
		return a
	}
	out := make([]*HostVolumeConfig, 0, len(a)+len(b))
	for _, v := range a {
		replaced := false
		for _, w := range b {
			replaced = replaced || w != nil && v != nil && w.Name == v.Name
		}
		if !replaced {
			out = append(out, v)
		}
	}
	for _, w := range b {
		c := *w
		out = append(out, &c)
	}
	return out
}

// validateHostVolumes checks the host_volume blocks: a valid, unique name
// and an absolute path that exists and is a directory now (the client
// binds it into tasks; a volume whose directory is missing would fail
// every allocation placed for it).
func (c *ClientConfig) validateHostVolumes(p *problems) {
	if len(c.HostVolumes) > structs.MaxHostVolumesPerNode {
		p.add("client.host_volume", "at most %d host volumes (got %d)", structs.MaxHostVolumesPerNode, len(c.HostVolumes))
		return
	}
	seen := map[string]bool{}
	for _, v := range c.HostVolumes {
		key := "client.host_volume." + v.Name
		switch {
		case !structs.ValidHostVolumeName(v.Name):
			p.add(key, "name %q must be 1 to %d bytes of letters, digits and _ . - [ ]", v.Name, structs.MaxHostVolumeNameBytes)
			continue
		case seen[v.Name]:
			p.add(key, "host volume %q is declared twice", v.Name)
			continue
		}
		seen[v.Name] = true
		key += ".path"
		switch {
		case v.Path == "":
			p.add(key, "required: the host directory the volume mounts")
		case len(v.Path) > structs.MaxVolumePathBytes:
			p.add(key, "at most %d bytes", structs.MaxVolumePathBytes)
		case !filepath.IsAbs(v.Path):
			p.add(key, "%q must be an absolute path", v.Path)
		default:
			fi, err := os.Stat(v.Path)
			switch {
			case err != nil:
				p.add(key, "%q must exist: %v", v.Path, err)
			case !fi.IsDir():
				p.add(key, "%q must be a directory", v.Path)
			}
		}
	}
}

// hostVolumes is the node's HostVolumes map; nil without host volumes.
func (c *ClientConfig) hostVolumes() map[string]*structs.ClientHostVolumeConfig {
	if len(c.HostVolumes) == 0 {
		return nil
	}
	out := make(map[string]*structs.ClientHostVolumeConfig, len(c.HostVolumes))
	for _, v := range c.HostVolumes {
		out[v.Name] = &structs.ClientHostVolumeConfig{Name: v.Name, Path: filepath.Clean(v.Path), ReadOnly: v.ReadOnly}
	}
	return out
}

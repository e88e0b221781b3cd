package client

import (
	"github.com/drover-org/drover/core/structs"
)

// hostVolumesOfNode is the node's HostVolumes fingerprint: the agent
// config's host_volume blocks, as Nomad reports them.
func (c *Client) hostVolumesOfNode() map[string]*structs.ClientHostVolumeConfig {
	if len(c.cfg.HostVolumes) == 0 {
		return nil
	}
	out := make(map[string]*structs.ClientHostVolumeConfig, len(c.cfg.HostVolumes))
	for name, v := range c.cfg.HostVolumes {
		c := v.Copy()
		c.Name = name
		out[name] = c
	}
	return out
}

package feasible

import (
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// ReasonHostVolumes is the filter reason of a node that lacks a host
// volume the group asks for, or has it only read-only for a read-write
// request: Nomad's wording, which `job status` shows under its
// placement failures.
const ReasonHostVolumes = "missing compatible host volumes"

// VolumeTypeHost is the volume type placed by the node's host volumes.
const VolumeTypeHost = "host"

// HostVolumeChecker filters nodes that lack a group's host volumes.
type HostVolumeChecker struct {
	reqs     []*schedulerpb.VolumeRequest
	perAlloc bool
}

var _ Checker = (*HostVolumeChecker)(nil)

// NewHostVolumeChecker returns the checker of tg's host volume requests,
// or nil when the group asks for none.
func NewHostVolumeChecker(tg *schedulerpb.TaskGroup) *HostVolumeChecker {
	c := &HostVolumeChecker{}
	for _, v := range tg.GetVolumes() {
		if v.GetType() != VolumeTypeHost {
			continue
		}
		c.reqs = append(c.reqs, v)
		c.perAlloc = c.perAlloc || v.GetPerAlloc()
	}
	if len(c.reqs) == 0 {
		return nil
	}
	return c
}

// Check implements Checker for the allocation of index 0.
func (c *HostVolumeChecker) Check(n *schedulerpb.Node) (bool, string) {
	return c.CheckIndex(n, 0)
}

// CheckIndex checks the node for the allocation of index idx (per_alloc
// requests name "<source>[<idx>]"): every requested volume must be on the
// node, and a read-write request needs a volume the client did not
// configure read_only.
func (c *HostVolumeChecker) CheckIndex(n *schedulerpb.Node, idx int) (bool, string) {
	have := n.GetHostVolumes()
	for _, r := range c.reqs {
		v, ok := have[VolumeID(r, idx)]
		if !ok || v == nil || v.GetReadOnly() && !r.GetReadOnly() {
			return false, ReasonHostVolumes
		}
	}
	return true, ""
}

package structs

// LegacyResources is a node's capacity in the shape of Nomad's pre-0.9
// Resources block, which Nomad still serves beside NodeResources as the
// node's Resources and Reserved fields. Nomad 1.6's CLI reads them (node
// status subtracts Reserved from Resources through pointers it never
// checks), so every number is present in the JSON even when zero: the
// type has no omitempty tags on purpose.
type LegacyResources struct {
	CPU         int
	Cores       int
	MemoryMB    int
	MemoryMaxMB int
	DiskMB      int
	IOPS        int
	Networks    []*NetworkResource
	// Devices is always null on a node, as Nomad writes it.
	Devices []*RequestedDevice
}

// LegacyResources derives the node's legacy Resources and Reserved
// blocks from NodeResources and ReservedResources. Both are always
// non-nil, so a reader that dereferences them without a check (as Nomad's
// CLI does) never fails on a node that fingerprinted nothing yet. The
// networks are shared with the node, which callers must not change.
// Cores stays 0, as on Nomad's nodes (it is a task's reserved cores; a
// node's cores are in NodeResources), see
// reference/nomad-json-samples/node.json.
func (n *Node) LegacyResources() (resources, reserved *LegacyResources) {
	resources, reserved = &LegacyResources{}, &LegacyResources{}
	if nr := n.NodeResources; nr != nil {
		resources.CPU = int(nr.Cpu.CpuShares)
		resources.MemoryMB = int(nr.Memory.MemoryMB)
		resources.DiskMB = int(nr.Disk.DiskMB)
		resources.Networks = nr.Networks
	}
	if rr := n.ReservedResources; rr != nil {
		reserved.CPU = int(rr.Cpu.CpuShares)
		reserved.MemoryMB = int(rr.Memory.MemoryMB)
		reserved.DiskMB = int(rr.Disk.DiskMB)
	}
	return resources, reserved
}

package structs

import "time"

// Node is a client machine that runs allocations.
type Node struct {
	ID                    string                 `codec:",omitempty" bound:"id"`
	SecretID              string                 `codec:",omitempty" bound:"id"`
	Datacenter            string                 `codec:",omitempty" bound:"id"`
	Name                  string                 `codec:",omitempty"`
	HTTPAddr              string                 `codec:",omitempty"`
	Attributes            map[string]string      `codec:",omitempty"`
	NodeResources         *NodeResources         `codec:",omitempty"`
	ReservedResources     *NodeReservedResources `codec:",omitempty"`
	Meta                  map[string]string      `codec:",omitempty"`
	NodeClass             string                 `codec:",omitempty" bound:"id"`
	NodePool              string                 `codec:",omitempty" bound:"id"`
	ComputedClass         string                 `codec:",omitempty"`
	DrainStrategy         *DrainStrategy         `codec:",omitempty"`
	SchedulingEligibility string                 `codec:",omitempty" bound:"id"`
	Status                string                 `codec:",omitempty" bound:"id"`
	StatusDescription     string                 `codec:",omitempty"`
	StatusUpdatedAt       int64                  `codec:",omitempty"`
	Events                []*NodeEvent           `codec:",omitempty"`
	Drivers               map[string]*DriverInfo `codec:",omitempty"`
	LastDrain             *DrainMetadata         `codec:",omitempty"`
	// CSI plugin instances on the node, by plugin ID, from fingerprints.
	CSIControllerPlugins map[string]*CSIInfo `codec:",omitempty"`
	CSINodePlugins       map[string]*CSIInfo `codec:",omitempty"`
	CreateIndex          uint64              `codec:",omitempty"`
	ModifyIndex          uint64              `codec:",omitempty"`

	// The client's host volumes (agent config host_volume), by name.
	HostVolumes map[string]*ClientHostVolumeConfig `codec:",omitempty"`
}

// NodeResources is a node's total capacity.
type NodeResources struct {
	Cpu      NodeCpuResources    `codec:",omitempty"`
	Memory   NodeMemoryResources `codec:",omitempty"`
	Disk     NodeDiskResources   `codec:",omitempty"`
	Networks []*NetworkResource  `codec:",omitempty"`
	// The range dynamic ports are picked from (0: Nomad's defaults).
	MinDynamicPort int `codec:",omitempty"`
	MaxDynamicPort int `codec:",omitempty"`
}

// NodeCpuResources is CPU capacity in MHz.
type NodeCpuResources struct {
	CpuShares          int64    `codec:",omitempty"`
	TotalCpuCores      uint16   `codec:",omitempty"`
	ReservableCpuCores []uint16 `codec:",omitempty"`
}

// NodeMemoryResources is memory in MB.
type NodeMemoryResources struct{ MemoryMB int64 }

// NodeDiskResources is disk in MB.
type NodeDiskResources struct{ DiskMB int64 }

// NodeReservedResources is capacity withheld from scheduling.
type NodeReservedResources struct {
	Cpu      NodeReservedCpuResources     `codec:",omitempty"`
	Memory   NodeReservedMemoryResources  `codec:",omitempty"`
	Disk     NodeReservedDiskResources    `codec:",omitempty"`
	Networks NodeReservedNetworkResources `codec:",omitempty"`
}

// NodeReservedCpuResources in MHz.
type NodeReservedCpuResources struct{ CpuShares int64 }

// NodeReservedMemoryResources in MB.
type NodeReservedMemoryResources struct{ MemoryMB int64 }

// NodeReservedDiskResources in MB.
type NodeReservedDiskResources struct{ DiskMB int64 }

// DriverInfo is a driver's fingerprint on a node.
type DriverInfo struct {
	Attributes        map[string]string `codec:",omitempty"`
	Detected          bool              `codec:",omitempty"`
	Healthy           bool              `codec:",omitempty"`
	HealthDescription string            `codec:",omitempty"`
	UpdateTime        time.Time         `codec:",omitempty"`
}

// NodeEvent is a notable change of a node.
type NodeEvent struct {
	Message     string            `codec:",omitempty"`
	Subsystem   string            `codec:",omitempty"`
	Details     map[string]string `codec:",omitempty"`
	Timestamp   time.Time         `codec:",omitempty"`
	CreateIndex uint64            `codec:",omitempty"`
}

// DrainStrategy is a drain in progress.
type DrainStrategy struct {
	DrainSpec
	ForceDeadline time.Time `codec:",omitempty"`
	StartedAt     time.Time `codec:",omitempty"`
}

// DrainSpec is what a user asks of a drain.
type DrainSpec struct {
	Deadline         time.Duration `codec:",omitempty"`
	IgnoreSystemJobs bool          `codec:",omitempty"`
}

// DrainMetadata records the last drain.
type DrainMetadata struct {
	StartedAt time.Time         `codec:",omitempty"`
	UpdatedAt time.Time         `codec:",omitempty"`
	Status    string            `codec:",omitempty"`
	Meta      map[string]string `codec:",omitempty"`
}

// Ready reports whether new work may be placed on the node.
func (n *Node) Ready() bool {
	return n.Status == NodeStatusReady && n.DrainStrategy == nil && n.SchedulingEligibility == NodeSchedulingEligible
}

// TerminalStatus reports whether the node is down.
func (n *Node) TerminalStatus() bool { return n.Status == NodeStatusDown }

// Capacity returns node resources minus reserved resources.
func (n *Node) Capacity() Resources {
	var r Resources
	if n.NodeResources != nil {
		r.CPU = int(n.NodeResources.Cpu.CpuShares)
		r.MemoryMB = int(n.NodeResources.Memory.MemoryMB)
		r.DiskMB = int(n.NodeResources.Disk.DiskMB)
	}
	if rr := n.ReservedResources; rr != nil {
		r.CPU -= int(rr.Cpu.CpuShares)
		r.MemoryMB -= int(rr.Memory.MemoryMB)
		r.DiskMB -= int(rr.Disk.DiskMB)
	}
	return r
}

// Copy returns a copy safe to modify at the top level and in its maps.
func (n *Node) Copy() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Attributes = copyMap(n.Attributes)
	c.Meta = copyMap(n.Meta)
	if n.Drivers != nil {
		c.Drivers = make(map[string]*DriverInfo, len(n.Drivers))
		for k, v := range n.Drivers {
			c.Drivers[k] = v
		}
	}
	if n.DrainStrategy != nil {
		d := *n.DrainStrategy
		c.DrainStrategy = &d
	}
	c.Events = append([]*NodeEvent(nil), n.Events...)
	c.CSIControllerPlugins = copyCSIInfos(n.CSIControllerPlugins)
	c.CSINodePlugins = copyCSIInfos(n.CSINodePlugins)
	c.HostVolumes = copyHostVolumes(n.HostVolumes)
	return &c
}

func copyCSIInfos(m map[string]*CSIInfo) map[string]*CSIInfo {
	if m == nil {
		return nil
	}
	c := make(map[string]*CSIInfo, len(m))
	for k, v := range m {
		c[k] = v.Copy()
	}
	return c
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// NodeListStub is the row of GET /v1/nodes.
type NodeListStub struct {
	Address               string                 `codec:",omitempty"`
	ID                    string                 `codec:",omitempty"`
	Attributes            map[string]string      `codec:",omitempty"`
	Datacenter            string                 `codec:",omitempty"`
	Name                  string                 `codec:",omitempty"`
	NodeClass             string                 `codec:",omitempty"`
	NodePool              string                 `codec:",omitempty"`
	Version               string                 `codec:",omitempty"`
	Drain                 bool                   `codec:",omitempty"`
	SchedulingEligibility string                 `codec:",omitempty"`
	Status                string                 `codec:",omitempty"`
	StatusDescription     string                 `codec:",omitempty"`
	Drivers               map[string]*DriverInfo `codec:",omitempty"`
	LastDrain             *DrainMetadata         `codec:",omitempty"`
	// NodeResources and ReservedResources are set only when the list is
	// asked for them (GET /v1/nodes?resources=true, as Nomad).
	NodeResources     *NodeResources         `json:",omitempty" codec:",omitempty"`
	ReservedResources *NodeReservedResources `json:",omitempty" codec:",omitempty"`
	CreateIndex       uint64                 `codec:",omitempty"`
	ModifyIndex       uint64                 `codec:",omitempty"`
}

// Stub summarises the node for list endpoints.
func (n *Node) Stub() *NodeListStub {
	return &NodeListStub{
		Address: n.HTTPAddr, ID: n.ID, Datacenter: n.Datacenter, Name: n.Name, NodeClass: n.NodeClass,
		NodePool: n.NodePool, Version: n.Attributes["drover.version"], Drain: n.DrainStrategy != nil,
		SchedulingEligibility: n.SchedulingEligibility, Status: n.Status, StatusDescription: n.StatusDescription,
		Drivers: n.Drivers, LastDrain: n.LastDrain, CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
	}
}

package structs

import "time"

// Node is a client machine that runs allocations.
type Node struct {
	ID                    string
	SecretID              string
	Datacenter            string
	Name                  string
	HTTPAddr              string
	Attributes            map[string]string
	NodeResources         *NodeResources
	ReservedResources     *NodeReservedResources
	Meta                  map[string]string
	NodeClass             string
	NodePool              string
	ComputedClass         string
	DrainStrategy         *DrainStrategy
	SchedulingEligibility string
	Status                string
	StatusDescription     string
	StatusUpdatedAt       int64
	Events                []*NodeEvent
	Drivers               map[string]*DriverInfo
	LastDrain             *DrainMetadata
	CreateIndex           uint64
	ModifyIndex           uint64
}

// NodeResources is a node's total capacity.
type NodeResources struct {
	Cpu    NodeCpuResources
	Memory NodeMemoryResources
	Disk   NodeDiskResources
}

// NodeCpuResources is CPU capacity in MHz.
type NodeCpuResources struct {
	CpuShares          int64
	TotalCpuCores      uint16
	ReservableCpuCores []uint16
}

// NodeMemoryResources is memory in MB.
type NodeMemoryResources struct{ MemoryMB int64 }

// NodeDiskResources is disk in MB.
type NodeDiskResources struct{ DiskMB int64 }

// NodeReservedResources is capacity withheld from scheduling.
type NodeReservedResources struct {
	Cpu    NodeReservedCpuResources
	Memory NodeReservedMemoryResources
	Disk   NodeReservedDiskResources
}

// NodeReservedCpuResources in MHz.
type NodeReservedCpuResources struct{ CpuShares int64 }

// NodeReservedMemoryResources in MB.
type NodeReservedMemoryResources struct{ MemoryMB int64 }

// NodeReservedDiskResources in MB.
type NodeReservedDiskResources struct{ DiskMB int64 }

// DriverInfo is a driver's fingerprint on a node.
type DriverInfo struct {
	Attributes        map[string]string
	Detected          bool
	Healthy           bool
	HealthDescription string
	UpdateTime        time.Time
}

// NodeEvent is a notable change of a node.
type NodeEvent struct {
	Message     string
	Subsystem   string
	Details     map[string]string
	Timestamp   time.Time
	CreateIndex uint64
}

// DrainStrategy is a drain in progress.
type DrainStrategy struct {
	DrainSpec
	ForceDeadline time.Time
	StartedAt     time.Time
}

// DrainSpec is what a user asks of a drain.
type DrainSpec struct {
	Deadline         time.Duration
	IgnoreSystemJobs bool
}

// DrainMetadata records the last drain.
type DrainMetadata struct {
	StartedAt time.Time
	UpdatedAt time.Time
	Status    string
	Meta      map[string]string
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
	return &c
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
	Address               string
	ID                    string
	Attributes            map[string]string
	Datacenter            string
	Name                  string
	NodeClass             string
	NodePool              string
	Version               string
	Drain                 bool
	SchedulingEligibility string
	Status                string
	StatusDescription     string
	Drivers               map[string]*DriverInfo
	LastDrain             *DrainMetadata
	CreateIndex           uint64
	ModifyIndex           uint64
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

package agent

import (
	"fmt"

	"github.com/drover-org/drover/core/structs"
)

// validateNetwork checks the client's network settings: ports in range,
// a dynamic range that holds at least one port, reserved ports that parse.
func (c *ClientConfig) validateNetwork() error {
	// Each port's range is checked with every other setting's bounds.
	lo, hi := c.MinDynamicPort, c.MaxDynamicPort
	if lo == 0 {
		lo = structs.DefaultMinDynamicPort
	}
	if hi == 0 {
		hi = structs.DefaultMaxDynamicPort
	}
	if lo > hi && lo <= structs.MaxPort && hi >= structs.MinPort {
		return fmt.Errorf("client.min_dynamic_port: %d is above max_dynamic_port %d", lo, hi)
	}
	if r := c.Reserved; r != nil {
		if _, err := structs.ParsePortRanges(r.ReservedPorts); err != nil {
			return fmt.Errorf("client.reserved.reserved_ports: %v", err)
		}
	}
	return c.validateBridge()
}

// reservedResources is the node's reservation; nil without a reserved
// block.
func (c *ClientConfig) reservedResources() *structs.NodeReservedResources {
	r := c.Reserved
	if r == nil {
		return nil
	}
	return &structs.NodeReservedResources{
		Cpu:      structs.NodeReservedCpuResources{CpuShares: int64(r.CPU)},
		Memory:   structs.NodeReservedMemoryResources{MemoryMB: int64(r.MemoryMB)},
		Disk:     structs.NodeReservedDiskResources{DiskMB: int64(r.DiskMB)},
		Networks: structs.NodeReservedNetworkResources{ReservedHostPorts: r.ReservedPorts},
	}
}

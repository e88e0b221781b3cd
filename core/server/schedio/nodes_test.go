package schedio

import (
	"slices"
	"testing"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// The scheduler sees only a node's detected and healthy drivers, so a
// docker driver whose engine is gone (undetected) or failing (unhealthy)
// takes the node out of placement for docker tasks; the feasibility
// checker then filters it as "missing drivers".
func TestSchedulerInputDriversHealthyOnly(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drivers map[string]*structs.DriverInfo
		want    []string
	}{
		{"healthy docker", map[string]*structs.DriverInfo{
			"docker": {Detected: true, Healthy: true}, "raw_exec": {Detected: true, Healthy: true}}, []string{"docker", "raw_exec"}},
		{"engine unreachable", map[string]*structs.DriverInfo{
			"docker":   {Detected: false, Healthy: false, HealthDescription: "Failed to connect to the docker engine"},
			"raw_exec": {Detected: true, Healthy: true}}, []string{"raw_exec"}},
		{"detected but unhealthy", map[string]*structs.DriverInfo{
			"docker": {Detected: true, Healthy: false}, "raw_exec": {Detected: true, Healthy: true}}, []string{"raw_exec"}},
		{"nil entry", map[string]*structs.DriverInfo{"docker": nil}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := staticNodeToPB(&structs.Node{ID: "n1", Drivers: tc.drivers}).GetDrivers()
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("drivers = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNodeNetworkToPB: the request tells a node's address, dynamic range
// and reserved ports; a node with no address has no network, and a
// reserved list that does not parse reserves nothing.
func TestNodeNetworkToPB(t *testing.T) {
	withNet := func(ip, reserved string) *structs.Node {
		n := &structs.Node{NodeResources: &structs.NodeResources{MinDynamicPort: 20000, MaxDynamicPort: 32000,
			Networks: []*structs.NetworkResource{nil, {IP: ip}}}}
		if reserved != "" {
			n.ReservedResources = &structs.NodeReservedResources{Networks: structs.NodeReservedNetworkResources{ReservedHostPorts: reserved}}
		}
		return n
	}
	cases := []struct {
		name string
		node *structs.Node
		want *pb.NodeNetwork
	}{
		{"no resources", &structs.Node{}, nil},
		{"no address", withNet("", "22"), nil},
		{"address and range", withNet("10.0.0.1", ""), &pb.NodeNetwork{Ip: "10.0.0.1", MinDynamicPort: 20000, MaxDynamicPort: 32000}},
		{"reserved ports", withNet("10.0.0.1", "22,8000-8100"), &pb.NodeNetwork{Ip: "10.0.0.1", MinDynamicPort: 20000, MaxDynamicPort: 32000,
			ReservedPorts: []*pb.PortRange{{From: 22, To: 22}, {From: 8000, To: 8100}}}},
		{"reserved list that does not parse", withNet("10.0.0.1", "22,x"), &pb.NodeNetwork{Ip: "10.0.0.1", MinDynamicPort: 20000, MaxDynamicPort: 32000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeNetworkToPB(tc.node); got.String() != tc.want.String() {
				t.Errorf("network = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestNodeCache: a node's static record is rebuilt when the node changes
// (its ModifyIndex moves), and reused while it does not.
func TestNodeCache(t *testing.T) {
	c := NewNodeCache()
	n := testNode("a")
	n.ModifyIndex = 5
	first := c.get(n)
	if again := c.get(n); again != first {
		t.Error("unchanged node: record rebuilt")
	}
	changed := n.Copy()
	changed.ModifyIndex, changed.Datacenter = 6, "dc2"
	if got := c.get(changed); got == first || got.GetDatacenter() != "dc2" {
		t.Errorf("changed node: record %v, want rebuilt with dc2", got)
	}
}

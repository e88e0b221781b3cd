package schedio

import (
	"strings"
	"testing"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// TestPlacedPorts: the ports a plugin hands out become the alloc's
// networks and mappings, and ports the group did not ask for are refused.
func TestPlacedPorts(t *testing.T) {
	tg := &structs.TaskGroup{Name: "g", Networks: []*structs.NetworkResource{{Mode: "host",
		ReservedPorts: []structs.Port{{Label: "http", Value: 8080, To: 80}}, DynamicPorts: []structs.Port{{Label: "dyn"}}}}}
	ok := []*pb.AllocatedPort{{Label: "http", Value: 8080, HostIp: "10.0.0.1"}, {Label: "dyn", Value: 23456, HostIp: "10.0.0.1"}}
	nets, maps, err := placedPorts(tg, ok)
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) != 1 || nets[0].IP != "10.0.0.1" || nets[0].ReservedPorts[0].To != 80 || nets[0].DynamicPorts[0].Value != 23456 {
		t.Errorf("networks = %+v", nets[0])
	}
	if len(maps) != 2 || maps[0] != (structs.AllocatedPortMapping{Label: "http", Value: 8080, To: 80, HostIP: "10.0.0.1"}) {
		t.Errorf("mappings = %+v", maps)
	}
	bad := []struct {
		name  string
		ports []*pb.AllocatedPort
		want  string
	}{
		{"missing", ok[:1], "asks for 2 ports, the plan gives 1"},
		{"unknown label", []*pb.AllocatedPort{ok[0], {Label: "x", Value: 1}}, `port "x" is not asked for`},
		{"given twice", []*pb.AllocatedPort{ok[0], ok[0]}, `port "http" is not asked for, or given twice`},
		{"out of range", []*pb.AllocatedPort{ok[0], {Label: "dyn", Value: 70000}}, "value 70000 is outside 1-65535"},
		{"static moved", []*pb.AllocatedPort{{Label: "http", Value: 81}, ok[1]}, `static port "http" is 8080, the plan gives 81`},
	}
	for _, tc := range bad {
		if _, _, err := placedPorts(tg, tc.ports); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
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

// TestAllocPortsToPB: a live alloc's ports are held; a finished one's are
// free again.
func TestAllocPortsToPB(t *testing.T) {
	held := func(client string) *structs.Allocation {
		return &structs.Allocation{DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: client,
			AllocatedResources: &structs.AllocatedResources{Shared: structs.AllocatedSharedResources{
				Ports: []structs.AllocatedPortMapping{{Label: "http", Value: 8080, To: 80, HostIP: "10.0.0.1"}}}}}
	}
	cases := []struct {
		name  string
		alloc *structs.Allocation
		want  int
	}{
		{"running", held(structs.AllocClientStatusRunning), 1},
		{"pending", held(structs.AllocClientStatusPending), 1},
		{"complete", held(structs.AllocClientStatusComplete), 0},
		{"no resources", &structs.Allocation{ClientStatus: structs.AllocClientStatusRunning}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := allocPortsToPB(tc.alloc)
			if len(got) != tc.want {
				t.Fatalf("ports = %v, want %d", got, tc.want)
			}
			if tc.want == 1 && got[0].String() != (&pb.AllocatedPort{Label: "http", Value: 8080, To: 80, HostIp: "10.0.0.1"}).String() {
				t.Errorf("port = %v", got[0])
			}
		})
	}
}

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

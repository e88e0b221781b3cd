package server

import (
	"strings"
	"testing"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

func withPorts(a *structs.Allocation, ports ...int) *structs.Allocation {
	for _, p := range ports {
		a.AllocatedResources.Shared.Ports = append(a.AllocatedResources.Shared.Ports, structs.AllocatedPortMapping{Label: "http", Value: p, HostIP: "10.0.0.1"})
	}
	return a
}

// TestEvaluateNodePlanPorts: the applier re-checks ports against the
// latest state and rejects a node whose plan would hold a port twice, or
// one the node reserves, as it rejects an over-committed one.
func TestEvaluateNodePlanPorts(t *testing.T) {
	reserve := func(ports string) func(*structs.Node) {
		return func(n *structs.Node) {
			n.ReservedResources = &structs.NodeReservedResources{Networks: structs.NodeReservedNetworkResources{ReservedHostPorts: ports}}
		}
	}
	cases := []struct {
		name   string
		build  func(p *planStore, plan *structs.Plan) string
		reason string // "" fits
	}{
		{"port held by a live alloc", func(p *planStore, plan *structs.Plan) string {
			n := p.node(nil)
			p.alloc(n, 100, 64, func(a *structs.Allocation) { withPorts(a, 8080) })
			plan.NodeAllocation[n.ID] = []*structs.Allocation{withPorts(newPlanAlloc(p.job, n.ID, 100, 64), 8080)}
			return n.ID
		}, "network: port collision http=8080"},
		{"two placements of one plan", func(p *planStore, plan *structs.Plan) string {
			n := p.node(nil)
			plan.NodeAllocation[n.ID] = []*structs.Allocation{
				withPorts(newPlanAlloc(p.job, n.ID, 100, 64), 25000), withPorts(newPlanAlloc(p.job, n.ID, 100, 64), 25000)}
			return n.ID
		}, "network: port collision http=25000"},
		{"the holder is stopped by the plan", func(p *planStore, plan *structs.Plan) string {
			n := p.node(nil)
			a := p.alloc(n, 100, 64, func(a *structs.Allocation) { withPorts(a, 8080) })
			plan.NodeUpdate[n.ID] = []*structs.Allocation{stopOf(a, "")}
			plan.NodeAllocation[n.ID] = []*structs.Allocation{withPorts(newPlanAlloc(p.job, n.ID, 100, 64), 8080)}
			return n.ID
		}, ""},
		{"the holder finished", func(p *planStore, plan *structs.Plan) string {
			n := p.node(nil)
			p.alloc(n, 100, 64, func(a *structs.Allocation) { withPorts(a, 8080); a.ClientStatus = structs.AllocClientStatusComplete })
			plan.NodeAllocation[n.ID] = []*structs.Allocation{withPorts(newPlanAlloc(p.job, n.ID, 100, 64), 8080)}
			return n.ID
		}, ""},
		{"an in-place update keeps its port", func(p *planStore, plan *structs.Plan) string {
			n := p.node(nil)
			a := p.alloc(n, 100, 64, func(a *structs.Allocation) { withPorts(a, 8080) })
			plan.NodeAllocation[n.ID] = []*structs.Allocation{withPorts(resized(a, 200, 64), 8080)}
			return n.ID
		}, ""},
		{"reserved by the node", func(p *planStore, plan *structs.Plan) string {
			n := p.node(reserve("22,8000-8100"))
			plan.NodeAllocation[n.ID] = []*structs.Allocation{withPorts(newPlanAlloc(p.job, n.ID, 100, 64), 8080)}
			return n.ID
		}, "network: reserved port collision http=8080"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanStore(t)
			plan := newPlan(p.job)
			nodeID := tc.build(p, plan)
			fit, reason := evaluateNodePlan(p.snapshot(), plan, nodeID)
			if fit != (tc.reason == "") || reason != tc.reason {
				t.Fatalf("evaluateNodePlan = (%v, %q), want reason %q", fit, reason, tc.reason)
			}
		})
	}
}

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

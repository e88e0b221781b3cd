package planapply

import (
	"testing"

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
			fit, reason := evaluateNode(p.snapshot(), plan, nodeID)
			if fit != (tc.reason == "") || reason != tc.reason {
				t.Fatalf("evaluateNode = (%v, %q), want reason %q", fit, reason, tc.reason)
			}
		})
	}
}

package schedio

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// TestExplainFailures: a group that found no node to evaluate is told the
// job's pool, how many of its nodes could take work, and which of the
// job's datacenters hold none of them; a group that evaluated nodes keeps
// the plugin's metrics.
func TestExplainFailures(t *testing.T) {
	node := func(name, dc, pool string, edit func(*structs.Node)) *structs.Node {
		n := testNode(name)
		n.Datacenter, n.NodePool = dc, pool
		n.Status, n.SchedulingEligibility = structs.NodeStatusReady, structs.NodeSchedulingEligible
		if edit != nil {
			edit(n)
		}
		return n
	}
	cases := []struct {
		name       string
		nodes      []*structs.Node
		pool       string
		evaluated  int
		wantPool   string
		wantInPool int
		wantDCs    map[string]int
	}{
		{"empty pool", nil, "", 0, structs.NodePoolDefault, 0, nil},
		{"a datacenter without nodes", []*structs.Node{node("a", "dc1", structs.NodePoolDefault, nil)}, "", 0,
			structs.NodePoolDefault, 1, map[string]int{"dc2": 0}},
		{"down, ineligible and draining nodes do not count", []*structs.Node{
			node("a", "dc1", "gpu", func(n *structs.Node) { n.Status = structs.NodeStatusDown }),
			node("b", "dc1", "gpu", func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible }),
			node("c", "dc2", "gpu", func(n *structs.Node) { n.DrainStrategy = &structs.DrainStrategy{} }),
		}, "gpu", 0, "gpu", 0, nil},
		{"nodes were evaluated: left alone", []*structs.Node{node("a", "dc1", structs.NodePoolDefault, nil)}, "", 2, "", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.nodes(tc.nodes...)
			job := testJob("web", "batch")
			job.Namespace, job.NodePool, job.Datacenters = structs.DefaultNamespace, tc.pool, []string{"dc1", "dc2"}
			f.jobs(job)
			m := &structs.AllocMetric{NodesEvaluated: tc.evaluated}
			if err := ExplainFailures(f.snapshot(), job.Namespace, job.ID, nil, map[string]*structs.AllocMetric{"g": m}); err != nil {
				t.Fatal(err)
			}
			if m.NodePool != tc.wantPool || m.NodesInPool != tc.wantInPool || len(m.NodesAvailable) != len(tc.wantDCs) {
				t.Fatalf("metric = pool %q in pool %d available %v, want %q %d %v", m.NodePool, m.NodesInPool, m.NodesAvailable, tc.wantPool, tc.wantInPool, tc.wantDCs)
			}
			for dc, n := range tc.wantDCs {
				if got, ok := m.NodesAvailable[dc]; !ok || got != n {
					t.Errorf("available[%s] = %d (%v), want %d", dc, got, ok, n)
				}
			}
		})
	}
}

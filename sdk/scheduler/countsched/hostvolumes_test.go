package countsched

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// TestHostVolumePlacement: a count group asking for a host volume goes to
// the one node that has it; without such a node the group fails with every
// node filtered as "missing compatible host volumes", the metric `job
// status` shows. A per_alloc group puts each index on the node
// holding "<source>[<index>]".
func TestHostVolumePlacement(t *testing.T) {
	for _, tc := range []struct {
		name     string
		perAlloc bool
		vols     map[int]string // node index → its host volume name
		want     map[string]string
		failed   bool
	}{
		// A host volume is shared: both allocations go to the one node.
		{name: "one node has it", vols: map[int]string{1: "data"}},
		{name: "no node has it", vols: map[int]string{1: "other"}, failed: true},
		{name: "per_alloc", perAlloc: true, vols: map[int]string{0: "data[1]", 2: "data[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := conformance.NewBuilder("count").Nodes(3).Group("g", 2).Edit(func(r *schedulerpb.ScheduleRequest) {
				for _, tg := range r.GetJob().GetTaskGroups() {
					if tg.GetName() == "g" {
						tg.Volumes = []*schedulerpb.VolumeRequest{{Name: "v", Type: "host", Source: "data", PerAlloc: tc.perAlloc}}
					}
				}
				for i, n := range r.GetNodes() {
					if name, ok := tc.vols[i]; ok {
						n.HostVolumes = map[string]*schedulerpb.HostVolume{name: {}}
					}
				}
			}).Request()
			nodeOf := map[string]int{}
			for i, n := range req.GetNodes() {
				nodeOf[n.GetId()] = i
			}
			for name, cfg := range map[string]Config{"batch-like": {NoJobAntiAffinity: true}, "service-like": {PaceUpdates: true}} {
				resp := Schedule(req, cfg).Response
				placed := 0
				for _, p := range resp.GetPlan().GetNodeAllocation() {
					if p.GetTaskGroup() != "g" {
						continue
					}
					placed++
					ni := nodeOf[p.GetNodeId()]
					want := "data"
					if tc.perAlloc {
						want = feasible.VolumeID(&schedulerpb.VolumeRequest{Source: "data", PerAlloc: true}, feasible.AllocIndex(p.GetName()))
					}
					if tc.vols[ni] != want {
						t.Errorf("%s: %s placed on node %d, which has %q, not %q", name, p.GetName(), ni, tc.vols[ni], want)
					}
				}
				failed := resp.GetFailedTgAllocs()["g"]
				if tc.failed {
					if placed != 0 || failed == nil || failed.GetConstraintFiltered()[feasible.ReasonHostVolumes] != 3 {
						t.Errorf("%s: placed %d, failed %v; want none placed, 3 nodes filtered for %q", name, placed, failed, feasible.ReasonHostVolumes)
					}
				} else if placed != 2 || failed != nil {
					t.Errorf("%s: placed %d, failed %v; want both placed", name, placed, failed)
				}
			}
		})
	}
}

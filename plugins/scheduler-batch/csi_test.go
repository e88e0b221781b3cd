package batch

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// TestCSIVolumes: a batch group places by CSI volume, per alloc index, and
// two allocations of one plan do not both take a single-writer volume.
func TestCSIVolumes(t *testing.T) {
	const writerReason = "CSI volume vol is unschedulable or has exhausted its available writer claims"
	vol := func(id string) *schedulerpb.CSIVolume {
		return &schedulerpb.CSIVolume{Namespace: conformance.Namespace, Id: id, PluginId: "hp", Schedulable: true,
			ReadSchedulable: true, WriteSchedulable: true, HasFreeReadClaims: true, HasFreeWriteClaims: true}
	}
	for _, tc := range []struct {
		name    string
		perAll  bool
		vols    []*schedulerpb.CSIVolume
		placed  int
		failure string
	}{
		{name: "single writer, count 2: one placed", vols: []*schedulerpb.CSIVolume{vol("vol")}, placed: 1, failure: writerReason},
		{name: "per_alloc: each index its volume", perAll: true, vols: []*schedulerpb.CSIVolume{vol("vol[0]"), vol("vol[1]")}, placed: 2},
		{name: "per_alloc: index 1 missing", perAll: true, vols: []*schedulerpb.CSIVolume{vol("vol[0]")}, placed: 1,
			failure: "missing CSI volume(s) vol[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := conformance.NewBuilder(JobType).Nodes(3).Group("g", 2).Edit(func(r *schedulerpb.ScheduleRequest) {
				for _, tg := range r.GetJob().GetTaskGroups() {
					if tg.GetName() != "g" {
						continue // "web" claims nothing
					}
					tg.Volumes = []*schedulerpb.VolumeRequest{{Name: "data", Type: "csi", Source: "vol",
						AccessMode: "single-node-writer", AttachmentMode: "file-system", PerAlloc: tc.perAll}}
				}
				for _, n := range r.GetNodes() {
					n.CsiNodePlugins = []*schedulerpb.CSINodePlugin{{PluginId: "hp", Healthy: true}}
				}
				r.CsiVolumes = tc.vols
			}).Request()
			resp, err := New().Schedule(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, a := range resp.GetPlan().GetNodeAllocation() {
				if a.GetTaskGroup() == "g" {
					n++
				}
			}
			if n != tc.placed {
				t.Fatalf("placed %d of g, want %d", n, tc.placed)
			}
			m := resp.GetFailedTgAllocs()["g"]
			if tc.failure == "" {
				if m != nil {
					t.Fatalf("failed = %v", m)
				}
				return
			}
			if m.GetConstraintFiltered()[tc.failure] == 0 {
				t.Fatalf("failed metric = %v, want reason %q", m, tc.failure)
			}
		})
	}
}

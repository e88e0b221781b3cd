package nodesched

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// TestCSIFilterReasons: a sysbatch group with a CSI volume goes only to the
// nodes with the healthy node plugin; the others are filtered with the CSI
// reasons, and a single-node-writer volume takes one node only.
func TestCSIFilterReasons(t *testing.T) {
	withVolume := func(mode string) func(*schedulerpb.Job) {
		return func(j *schedulerpb.Job) {
			j.TaskGroups[0].Volumes = []*schedulerpb.VolumeRequest{{Name: "data", Type: "csi", Source: "vol",
				AccessMode: mode, AttachmentMode: "file-system"}}
		}
	}
	plugin := func(healthy bool) func(*schedulerpb.Node) {
		return func(n *schedulerpb.Node) {
			n.CsiNodePlugins = []*schedulerpb.CSINodePlugin{{PluginId: "hp", Healthy: healthy}}
		}
	}
	vol := func(mode string) *schedulerpb.CSIVolume {
		return &schedulerpb.CSIVolume{Namespace: "default", Id: "vol", PluginId: "hp", Schedulable: true,
			ReadSchedulable: true, WriteSchedulable: true, HasFreeReadClaims: true, HasFreeWriteClaims: true, AccessMode: mode}
	}
	for _, tc := range []struct {
		name     string
		engine   *Engine
		mode     string
		placed   int
		filtered map[string]int32
	}{
		{name: "sysbatch multi-writer", engine: sysbatchEngine(), mode: "multi-node-multi-writer", placed: 2,
			filtered: map[string]int32{
				"CSI plugin hp is unhealthy on client n3": 1,
				"CSI plugin hp is missing from client n4": 1,
			}},
		{name: "system single-node writer", engine: systemEngine(), mode: "single-node-writer", placed: 1,
			filtered: map[string]int32{
				"CSI volume vol is unschedulable or has exhausted its available writer claims": 1,
				"CSI plugin hp is unhealthy on client n3":                                      1,
				"CSI plugin hp is missing from client n4":                                      1,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ := "sysbatch"
			if !tc.engine.opts.Sysbatch {
				typ = "system"
			}
			req := tReq(tJob(typ, withVolume(tc.mode)), []*schedulerpb.Node{
				tNode("n1", plugin(true)), tNode("n2", plugin(true)), tNode("n3", plugin(false)), tNode("n4"),
			})
			req.CsiVolumes = []*schedulerpb.CSIVolume{vol(tc.mode)}
			out, err := tc.engine.Run(req)
			if err != nil {
				t.Fatal(err)
			}
			allocs := out.Response.GetPlan().GetNodeAllocation()
			if len(allocs) != tc.placed {
				t.Fatalf("placed %d, want %d", len(allocs), tc.placed)
			}
			for _, a := range allocs {
				if a.GetNodeId() != "n1" && a.GetNodeId() != "n2" {
					t.Errorf("placed on %s, which lacks the healthy plugin", a.GetNodeId())
				}
			}
			got := out.Filtered["g"].GetConstraintFiltered()
			if len(got) != len(tc.filtered) {
				t.Fatalf("filtered = %v, want %v", got, tc.filtered)
			}
			for k, v := range tc.filtered {
				if got[k] != v {
					t.Errorf("filtered[%q] = %d, want %d (all: %v)", k, got[k], v, got)
				}
			}
			if len(out.Response.GetFailedTgAllocs()) != 0 {
				t.Errorf("failed = %v, want none: some node took the group", out.Response.GetFailedTgAllocs())
			}
		})
	}
}

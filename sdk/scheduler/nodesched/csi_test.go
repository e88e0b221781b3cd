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

// TestCSISingleWriterHeldBySystemAlloc: the job's running alloc on n1 holds
// a single-node-writer volume, so a node that joins later is filtered
// rather than given a second writer; a destructive update on n1 replaces
// the alloc there (its claim no longer blocks once the plan stops it).
func TestCSISingleWriterHeldBySystemAlloc(t *testing.T) {
	withVolume := func(j *schedulerpb.Job) {
		j.TaskGroups[0].Volumes = []*schedulerpb.VolumeRequest{{Name: "data", Type: "csi", Source: "vol",
			AccessMode: "single-node-writer", AttachmentMode: "file-system"}}
	}
	plugin := func(n *schedulerpb.Node) {
		n.CsiNodePlugins = []*schedulerpb.CSINodePlugin{{PluginId: "hp", Healthy: true}}
	}
	vol := &schedulerpb.CSIVolume{Namespace: "default", Id: "vol", PluginId: "hp", Schedulable: true,
		ReadSchedulable: true, WriteSchedulable: true, AccessMode: "single-node-writer",
		WriteClaims: []*schedulerpb.CSIVolumeClaim{{AllocId: "a1", JobId: "j", NodeId: "n1"}}}
	const reason = "CSI volume vol is unschedulable or has exhausted its available writer claims"

	j := tJob("system", withVolume)
	req := tReq(j, []*schedulerpb.Node{tNode("n1", plugin), tNode("n2", plugin)}, tAlloc("a1", "n1"))
	req.CsiVolumes = []*schedulerpb.CSIVolume{vol}
	out, err := systemEngine().Run(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Response.GetPlan().GetNodeAllocation()); n != 0 {
		t.Fatalf("placed %d, want none: n2 may not take a second writer", n)
	}
	if got := out.Filtered["g"].GetConstraintFiltered()[reason]; got != 1 {
		t.Errorf("filtered = %v, want n2 for the writer reason", out.Filtered["g"].GetConstraintFiltered())
	}

	// A destructive update on n1: the old alloc is stopped by the plan and
	// its replacement takes the volume on n1; n2 stays filtered because
	// the replacement's claim is now the plan's.
	old := tOld(j, true)
	withVolume(old)
	req = withVersions(tReq(j, []*schedulerpb.Node{tNode("n1", plugin), tNode("n2", plugin)}, tAlloc("a1", "n1", at(10))), old)
	req.CsiVolumes = []*schedulerpb.CSIVolume{vol}
	out, err = systemEngine().Run(req)
	if err != nil {
		t.Fatal(err)
	}
	placed := out.Response.GetPlan().GetNodeAllocation()
	if len(placed) != 1 || placed[0].GetNodeId() != "n1" {
		t.Fatalf("placed = %v, want the replacement on n1 only", placed)
	}
}

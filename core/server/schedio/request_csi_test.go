package schedio

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// TestScheduleInputCSI: the schedule request carries the volumes the job's
// groups name (per_alloc: one per index), with plugin facts and claims and
// no secrets, and each node's instance of their plugins.
func TestScheduleInputCSI(t *testing.T) {
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	idx := uint64(100)
	next := func() uint64 { idx++; return idx }
	n1, n2, n3 := testNode("a"), testNode("b"), testNode("c")
	n1.CSINodePlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true, NodeInfo: &structs.CSINodeInfo{
		ID: "csi-a", MaxVolumes: 4, AccessibleTopology: &structs.CSITopology{Segments: map[string]string{"zone": "a"}}}}}
	n2.CSINodePlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: false, NodeInfo: &structs.CSINodeInfo{ID: "csi-b"}}}
	n3.CSINodePlugins = map[string]*structs.CSIInfo{"other-plugin": {PluginID: "other-plugin", Healthy: true, NodeInfo: &structs.CSINodeInfo{ID: "x"}}}
	for _, n := range []*structs.Node{n1, n2, n3} {
		n.Status, n.SchedulingEligibility, n.NodePool = structs.NodeStatusReady, structs.NodeSchedulingEligible, "default"
		if err := st.UpsertNode(next(), n); err != nil {
			t.Fatal(err)
		}
	}
	capab := []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	vol := func(id string) *structs.CSIVolume {
		return &structs.CSIVolume{ID: id, Namespace: "default", PluginID: "hp", RequestedCapabilities: capab,
			Secrets: map[string]string{"password": "hunter2"}, Parameters: map[string]string{"p": "v"},
			Topologies: []*structs.CSITopology{{Segments: map[string]string{"zone": "a"}}}}
	}
	if err := st.UpsertCSIVolumes(next(), []*structs.CSIVolume{vol("data"), vol("pa[0]"), vol("pa[5]"), vol("unrelated")}); err != nil {
		t.Fatal(err)
	}
	// Another job's alloc on node a writes "data".
	other := testJob("other", "batch")
	other.Namespace = "default"
	if err := st.UpsertJob(next(), other); err != nil {
		t.Fatal(err)
	}
	oa := &structs.Allocation{ID: "11111111-0000-0000-0000-000000000000", Namespace: "default", JobID: "other", Job: other,
		NodeID: n1.ID, TaskGroup: "g", Name: "other.g[0]", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning}
	if err := st.UpsertAllocs(next(), []*structs.Allocation{oa}); err != nil {
		t.Fatal(err)
	}
	if err := st.CSIVolumeClaims(next(), []*structs.CSIVolumeClaimRequest{{Namespace: "default", VolumeID: "data", Claim: &structs.CSIVolumeClaim{
		AllocationID: oa.ID, NodeID: n1.ID, Mode: structs.CSIVolumeClaimWrite, State: structs.CSIVolumeClaimStateTaken,
		AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}); err != nil {
		t.Fatal(err)
	}

	job := testJob("db", "batch")
	job.Namespace, job.NodePool = "default", "default"
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"d": {Name: "d", Type: structs.VolumeTypeCSI, Source: "data",
		AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	pa := testJob("db", "batch").TaskGroups[0]
	pa.Name, pa.Count = "pa", 2
	pa.Volumes = map[string]*structs.VolumeRequest{"p": {Name: "p", Type: structs.VolumeTypeCSI, Source: "pa", PerAlloc: true,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	job.TaskGroups = append(job.TaskGroups, pa)

	cache := NewNodeCache()
	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ev := &structs.Evaluation{ID: "ev", Namespace: "default", JobID: job.ID, Type: job.Type, Priority: 50}
	req, err := BuildRequest(snap, cache, ev, job, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	if got := req.GetJob().GetTaskGroups()[0].GetVolumes(); len(got) != 1 || got[0].GetSource() != "data" || got[0].GetType() != "csi" ||
		got[0].GetAccessMode() != "multi-node-multi-writer" || got[0].GetAttachmentMode() != "file-system" {
		t.Errorf("group volumes = %v", got)
	}
	if got := req.GetJob().GetTaskGroups()[1].GetVolumes(); len(got) != 1 || !got[0].GetPerAlloc() {
		t.Errorf("per_alloc group volumes = %v", got)
	}
	// data and pa[0]; pa[1] does not exist, pa[5] is past the count and
	// "unrelated" is named by no group.
	var ids []string
	for _, v := range req.GetCsiVolumes() {
		ids = append(ids, v.GetId())
	}
	if len(ids) != 2 || ids[0] != "data" || ids[1] != "pa[0]" {
		t.Fatalf("volumes = %v, want [data pa[0]]", ids)
	}
	data := req.GetCsiVolumes()[0]
	if data.GetPluginId() != "hp" || !data.GetSchedulable() || !data.GetWriteSchedulable() || !data.GetReadSchedulable() {
		t.Errorf("plugin facts = %v", data)
	}
	if data.GetAccessMode() != "multi-node-multi-writer" || data.GetAttachmentMode() != "file-system" {
		t.Errorf("modes = %q %q", data.GetAccessMode(), data.GetAttachmentMode())
	}
	if wc := data.GetWriteClaims(); len(wc) != 1 || wc[0].GetAllocId() != oa.ID || wc[0].GetJobId() != "other" || wc[0].GetNodeId() != n1.ID {
		t.Errorf("write claims = %v", wc)
	}
	if len(data.GetTopologies()) != 1 || data.GetTopologies()[0].GetSegments()["zone"] != "a" {
		t.Errorf("topologies = %v", data.GetTopologies())
	}
	if b := data.String(); strings.Contains(b, "hunter2") || strings.Contains(b, "password") {
		t.Errorf("volume carries secrets: %s", b)
	}

	byID := map[string]int{}
	for i, n := range req.GetNodes() {
		byID[n.GetId()] = i
	}
	p1 := req.GetNodes()[byID[n1.ID]].GetCsiNodePlugins()
	if len(p1) != 1 || p1[0].GetPluginId() != "hp" || !p1[0].GetHealthy() || p1[0].GetMaxVolumes() != 4 ||
		p1[0].GetAccessibleTopology()["zone"] != "a" || p1[0].GetVolumesInUse() != 1 {
		t.Errorf("node a plugins = %v", p1)
	}
	p2 := req.GetNodes()[byID[n2.ID]].GetCsiNodePlugins()
	if len(p2) != 1 || p2[0].GetHealthy() || p2[0].GetVolumesInUse() != 0 {
		t.Errorf("node b plugins = %v", p2)
	}
	if p3 := req.GetNodes()[byID[n3.ID]].GetCsiNodePlugins(); len(p3) != 0 {
		t.Errorf("node c lists plugins no volume uses: %v", p3)
	}

	// A job without volumes gets no CSI part.
	plain := testJob("plain", "batch")
	plain.Namespace, plain.NodePool = "default", "default"
	req, err = BuildRequest(snap, cache, ev, plain, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(req.GetCsiVolumes()) != 0 || len(req.GetNodes()[0].GetCsiNodePlugins()) != 0 {
		t.Errorf("plain job request has CSI facts")
	}
}

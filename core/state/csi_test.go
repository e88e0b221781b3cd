package state

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

func csiPluginNode(plugins ...string) *structs.Node {
	n := mockNode()
	n.CSINodePlugins = map[string]*structs.CSIInfo{}
	for _, p := range plugins {
		n.CSINodePlugins[p] = &structs.CSIInfo{PluginID: p, Healthy: true, NodeInfo: &structs.CSINodeInfo{ID: "csi-" + n.ID[:8]}}
	}
	return n
}

func csiTestVol(id, plugin string) *structs.CSIVolume {
	return &structs.CSIVolume{ID: id, Namespace: structs.DefaultNamespace, PluginID: plugin, ExternalID: "ext-" + id,
		RequestedCapabilities: []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}
}

// A node's fingerprint builds the plugin; a plugin no node reports is
// deleted, unless a volume names it.
func TestCSIPluginsFoldFromNodes(t *testing.T) {
	s := testStore(t)
	a, b := csiPluginNode("hp"), csiPluginNode("hp", "other")
	must(t, s.UpsertNode(10, a))
	must(t, s.UpsertNode(11, b))
	p, err := s.CSIPluginByID(nil, "hp")
	must(t, err)
	if p == nil || p.NodesHealthy != 2 || len(p.Nodes) != 2 {
		t.Fatalf("plugin hp: %+v", p)
	}
	// b stops reporting "other": it is gone; a turns unhealthy.
	b2 := b.Copy()
	delete(b2.CSINodePlugins, "other")
	must(t, s.UpsertNode(12, b2))
	if p, _ := s.CSIPluginByID(nil, "other"); p != nil {
		t.Errorf("plugin other survived its last node: %+v", p)
	}
	a2 := a.Copy()
	a2.CSINodePlugins["hp"].Healthy = false
	must(t, s.UpsertNode(13, a2))
	if p, _ := s.CSIPluginByID(nil, "hp"); p.NodesHealthy != 1 || len(p.Nodes) != 2 {
		t.Errorf("after a turned unhealthy: healthy %d of %d", p.NodesHealthy, len(p.Nodes))
	}
	// A volume keeps its plugin when the last node goes.
	must(t, s.UpsertCSIVolumes(14, []*structs.CSIVolume{csiTestVol("v", "hp")}))
	must(t, s.DeleteNode(15, []string{a.ID, b.ID}))
	p, _ = s.CSIPluginByID(nil, "hp")
	if p == nil || len(p.Nodes) != 0 || p.NodesHealthy != 0 {
		t.Fatalf("plugin named by a volume after its nodes left: %+v", p)
	}
	v, err := s.CSIVolumeByID(nil, "default", "v")
	must(t, err)
	if v.Schedulable {
		t.Error("a volume whose plugin has no nodes is schedulable")
	}
	if err := s.DeleteCSIPlugins(16, []string{"hp"}); !errors.Is(err, structs.ErrConflict) {
		t.Errorf("deleting a plugin in use: %v", err)
	}
}

// A snapshot keeps volumes with their claims (which the API hides) and
// plugins; a restored store answers the same.
func TestCSISnapshotKeepsClaims(t *testing.T) {
	s := testStore(t)
	n := csiPluginNode("hp")
	must(t, s.UpsertNode(10, n))
	job := storedJob(t, s, 11, mockJob("system"))
	alloc := mockAlloc(job, n.ID)
	alloc.ClientStatus = structs.AllocClientStatusRunning
	must(t, s.UpsertAllocs(12, []*structs.Allocation{alloc}))
	must(t, s.UpsertCSIVolumes(13, []*structs.CSIVolume{csiTestVol("v", "hp")}))
	claim := &structs.CSIVolumeClaim{AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite, ExternalNodeID: "csi-node",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		PublishContext: map[string]string{"device": "/dev/x"}}
	must(t, s.CSIVolumeClaims(14, []*structs.CSIVolumeClaimRequest{{Namespace: "default", VolumeID: "v", Claim: claim}}))

	out := roundTrip(t, s)
	v, err := out.CSIVolumeByID(nil, "default", "v")
	must(t, err)
	if v == nil {
		t.Fatal("volume lost")
	}
	c := v.WriteClaims[alloc.ID]
	if c == nil || c.NodeID != n.ID || c.ExternalVolumeID != "ext-v" || c.ExternalNodeID != "csi-node" ||
		c.PublishContext["device"] != "/dev/x" || c.State != structs.CSIVolumeClaimStateTaken {
		t.Fatalf("restored claim: %+v", c)
	}
	if v.WriteAllocs[alloc.ID] == nil || v.AccessMode != structs.CSIVolumeAccessModeSingleNodeWriter || !v.Schedulable {
		t.Errorf("restored volume: allocs %v, mode %q, schedulable %v", v.WriteAllocs, v.AccessMode, v.Schedulable)
	}
	p, err := out.CSIPluginByID(nil, "hp")
	must(t, err)
	if p == nil || p.Nodes[n.ID] == nil || p.NodesHealthy != 1 {
		t.Errorf("restored plugin: %+v", p)
	}
	for _, table := range []string{TableCSIVolumes, TableCSIPlugins} {
		if s.Index(table) != out.Index(table) || out.Index(table) == 0 {
			t.Errorf("index of %s: %d, restored %d", table, s.Index(table), out.Index(table))
		}
	}

	// The same claim again is idempotent; a second writer is refused and
	// changes nothing.
	must(t, s.CSIVolumeClaims(15, []*structs.CSIVolumeClaimRequest{{Namespace: "default", VolumeID: "v", Claim: claim}}))
	other := mockAlloc(job, n.ID)
	other.ClientStatus = structs.AllocClientStatusRunning
	must(t, s.UpsertAllocs(16, []*structs.Allocation{other}))
	second := claim.Copy()
	second.AllocationID = other.ID
	before, _ := s.CSIVolumeRaw(nil, "default", "v")
	if err := s.CSIVolumeClaims(17, []*structs.CSIVolumeClaimRequest{{Namespace: "default", VolumeID: "v", Claim: second}}); err == nil {
		t.Fatal("a second single-node writer was accepted")
	}
	after, _ := s.CSIVolumeRaw(nil, "default", "v")
	if after.ModifyIndex != before.ModifyIndex || len(after.WriteClaims) != 1 {
		t.Errorf("a refused claim changed the volume: index %d → %d, %d write claims", before.ModifyIndex, after.ModifyIndex, len(after.WriteClaims))
	}
	// In use: deregistration is refused, forced or not, while the writer runs.
	for _, force := range []bool{false, true} {
		if err := s.DeleteCSIVolumes(18, "default", []string{"v"}, force); !errors.Is(err, structs.ErrConflict) {
			t.Errorf("deregister in use (force %v): %v", force, err)
		}
	}
}

// The volume watcher's read: what was written after an index, deletions
// firing the watch.
func TestCSIVolumesModifiedAfter(t *testing.T) {
	s := testStore(t)
	must(t, s.UpsertCSIVolumes(10, []*structs.CSIVolume{csiTestVol("a", "hp"), csiTestVol("b", "hp")}))
	must(t, s.UpsertCSIVolumes(12, []*structs.CSIVolume{csiTestVol("c", "hp")}))
	must(t, s.CSIVolumeClaims(14, []*structs.CSIVolumeClaimRequest{{Namespace: "default", VolumeID: "a",
		Claim: &structs.CSIVolumeClaim{AllocationID: "x", State: structs.CSIVolumeClaimStateReadyToFree}}}))
	ids := func(after uint64) []string {
		vs, idx, err := s.CSIVolumesModifiedAfter(memdb.NewWatchSet(), after)
		must(t, err)
		if idx != 14 {
			t.Errorf("table index %d, want 14", idx)
		}
		var out []string
		for _, v := range vs {
			out = append(out, v.ID)
		}
		return out
	}
	for _, tc := range []struct {
		after uint64
		want  string
	}{{0, "[b c a]"}, {10, "[c a]"}, {12, "[a]"}, {14, "[]"}} {
		if got := fmt.Sprint(ids(tc.after)); got != tc.want {
			t.Errorf("after %d: %s, want %s", tc.after, got, tc.want)
		}
	}
	ws := memdb.NewWatchSet()
	if _, _, err := s.CSIVolumesModifiedAfter(ws, 14); err != nil {
		t.Fatal(err)
	}
	must(t, s.DeleteCSIVolumes(15, "default", []string{"b"}, false))
	if ws.Watch(time.After(5 * time.Second)) {
		t.Fatal("a deletion did not fire the watch")
	}
}

// A plugin's expected counts come from the jobs that run it: their
// allocations to run, as controllers and nodes by the task's plugin type,
// none once the job is stopped.
func TestCSIPluginExpectedFromJobs(t *testing.T) {
	s := testStore(t)
	must(t, s.UpsertNode(9, csiPluginNode("hp")))
	mono := mockJob("system")
	mono.TaskGroups[0].Tasks[0].CSIPluginConfig = &structs.TaskCSIPluginConfig{ID: "hp", Type: structs.CSIPluginTypeMonolith}
	mono = storedJob(t, s, 10, mono)
	ctrl := mockJob("service")
	ctrl.TaskGroups[0].Tasks[0].CSIPluginConfig = &structs.TaskCSIPluginConfig{ID: "hp", Type: structs.CSIPluginTypeController}
	ctrl = storedJob(t, s, 11, ctrl)
	other := storedJob(t, s, 12, mockJob("service"))

	a1, a2, a3 := mockAlloc(mono, "n1"), mockAlloc(mono, "n2"), mockAlloc(ctrl, "n1")
	must(t, s.UpsertAllocs(13, []*structs.Allocation{a1, a2, a3, mockAlloc(other, "n1")}))
	expected := func() (int, int) {
		p, err := s.CSIPluginByID(nil, "hp")
		must(t, err)
		ps, err := s.CSIPlugins(nil, "h")
		must(t, err)
		if len(ps) != 1 || ps[0].ControllersExpected != p.ControllersExpected || ps[0].NodesExpected != p.NodesExpected {
			t.Fatalf("the list and the read disagree: %+v vs %+v", ps, p)
		}
		return p.ControllersExpected, p.NodesExpected
	}
	if c, n := expected(); c != 3 || n != 2 {
		t.Fatalf("expected controllers %d nodes %d, want 3 and 2", c, n)
	}
	done := a2.Copy()
	done.ClientStatus = structs.AllocClientStatusComplete
	must(t, s.UpdateAllocsFromClient(14, []*structs.Allocation{done}))
	if c, n := expected(); c != 2 || n != 1 {
		t.Fatalf("after an alloc ended: controllers %d nodes %d, want 2 and 1", c, n)
	}
	stopped := ctrl.Copy()
	stopped.Stop = true
	must(t, s.UpsertJob(15, stopped))
	if c, n := expected(); c != 1 || n != 1 {
		t.Fatalf("after the controller job stopped: controllers %d nodes %d, want 1 and 1", c, n)
	}
	// The stored plugin is left alone.
	raw, err := first[*structs.CSIPlugin](s, nil, TableCSIPlugins, "id", "hp")
	must(t, err)
	if raw.ControllersExpected != 0 || raw.NodesExpected != 0 {
		t.Errorf("the stored plugin was changed: %+v", raw)
	}
}

// A claim that no client will release writes its volume, so that the
// volume watcher (which wakes on writes of the volumes table) frees it:
// its allocation ends while its node is down (lost), its node goes down,
// or the allocation is reaped. An allocation that ends on a live node
// leaves the volume to its client's release.
func TestCSIClaimsLeftToTheWatcherWriteTheirVolume(t *testing.T) {
	s := testStore(t)
	n1, n2 := csiPluginNode("hp"), csiPluginNode("hp")
	must(t, s.UpsertNode(10, n1))
	must(t, s.UpsertNode(11, n2))
	withVolume := func(index uint64, vol string) *structs.Job {
		j := mockJob("system")
		j.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Name: "data", Type: structs.VolumeTypeCSI, Source: vol,
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
		return storedJob(t, s, index, j)
	}
	jobV, jobW := withVolume(12, "v"), withVolume(13, "w")
	a1, a2 := mockAlloc(jobV, n1.ID), mockAlloc(jobW, n2.ID)
	a1.ClientStatus, a2.ClientStatus = structs.AllocClientStatusRunning, structs.AllocClientStatusRunning
	must(t, s.UpsertAllocs(14, []*structs.Allocation{a1, a2}))
	must(t, s.UpsertCSIVolumes(15, []*structs.CSIVolume{csiTestVol("v", "hp"), csiTestVol("w", "hp"), csiTestVol("idle", "hp")}))
	claim := func(a *structs.Allocation, vol string) *structs.CSIVolumeClaimRequest {
		return &structs.CSIVolumeClaimRequest{Namespace: "default", VolumeID: vol, Claim: &structs.CSIVolumeClaim{
			AllocationID: a.ID, Mode: structs.CSIVolumeClaimWrite,
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	}
	must(t, s.CSIVolumeClaims(16, []*structs.CSIVolumeClaimRequest{claim(a1, "v"), claim(a2, "w")}))

	indexes := func() (v, w, idle uint64) {
		t.Helper()
		var out [3]uint64
		for i, id := range []string{"v", "w", "idle"} {
			vol, err := s.CSIVolumeRaw(nil, "default", id)
			must(t, err)
			out[i] = vol.ModifyIndex
		}
		return out[0], out[1], out[2]
	}
	check := func(what string, wantV, wantW uint64) {
		t.Helper()
		v, w, idle := indexes()
		if v != wantV || w != wantW || idle != 15 {
			t.Errorf("%s: volume indexes v %d, w %d, idle %d; want %d, %d, 15", what, v, w, idle, wantV, wantW)
		}
	}

	// a1 ends on its live node: its client releases the claim itself.
	done := a1.Copy()
	done.ClientStatus = structs.AllocClientStatusComplete
	must(t, s.UpdateAllocsFromClient(17, []*structs.Allocation{done}))
	check("an alloc ended on a live node", 16, 16)

	// n1 goes down with the ended a1's claim unreleased.
	must(t, s.UpdateNodeStatus(18, n1.ID, structs.NodeStatusDown, 0, nil))
	check("the node of an ended claimer went down", 18, 16)

	// n2 goes down under the running a2, which the scheduler then marks
	// lost: both write w.
	must(t, s.UpdateNodeStatus(19, n2.ID, structs.NodeStatusDown, 0, nil))
	check("the node of a running claimer went down", 18, 19)
	lost := a2.Copy()
	lost.DesiredStatus, lost.ClientStatus = structs.AllocDesiredStatusStop, structs.AllocClientStatusLost
	must(t, s.UpsertAllocs(20, []*structs.Allocation{lost}))
	check("a claimer lost on its down node", 18, 20)

	// Reaped: a1 still claims v, a2's claim is freed first.
	free := claim(a2, "w")
	free.Claim.State = structs.CSIVolumeClaimStateReadyToFree
	must(t, s.CSIVolumeClaims(21, []*structs.CSIVolumeClaimRequest{free}))
	must(t, s.DeleteEval(22, nil, []string{a1.ID, a2.ID}))
	check("claimers reaped", 22, 21)

	// A deleted node's claims are the watcher's too.
	must(t, s.UpsertNode(23, n1.Copy()))
	a3 := mockAlloc(jobW, n1.ID)
	a3.ClientStatus = structs.AllocClientStatusRunning
	must(t, s.UpsertAllocs(24, []*structs.Allocation{a3}))
	must(t, s.CSIVolumeClaims(25, []*structs.CSIVolumeClaimRequest{claim(a3, "w")}))
	must(t, s.DeleteNode(26, []string{n1.ID}))
	check("the node of a claimer deleted", 22, 26)
}

// The scheduler's read of a volume has the same plugin facts and claims
// as the API's, without the expected counts it does not use.
func TestCSIVolumeForPlacement(t *testing.T) {
	s := testStore(t)
	must(t, s.UpsertNode(9, csiPluginNode("hp")))
	plug := mockJob("system")
	plug.TaskGroups[0].Tasks[0].CSIPluginConfig = &structs.TaskCSIPluginConfig{ID: "hp", Type: structs.CSIPluginTypeNode}
	plug = storedJob(t, s, 10, plug)
	must(t, s.UpsertAllocs(11, []*structs.Allocation{mockAlloc(plug, "n1")}))
	must(t, s.UpsertCSIVolumes(12, []*structs.CSIVolume{csiTestVol("v", "hp")}))
	api, err := s.CSIVolumeByID(nil, "default", "v")
	must(t, err)
	placed, err := s.CSIVolumeForPlacement(nil, "default", "v")
	must(t, err)
	if api.NodesExpected != 1 || placed.NodesExpected != 0 {
		t.Fatalf("expected nodes: API %d (want 1), placement %d (want 0)", api.NodesExpected, placed.NodesExpected)
	}
	if placed.Schedulable != api.Schedulable || placed.NodesHealthy != api.NodesHealthy || !placed.Schedulable {
		t.Fatalf("placement facts %+v differ from the API's %+v", placed, api)
	}
	raw, err := s.CSIVolumesByPluginRaw(nil, "hp")
	must(t, err)
	if len(raw) != 1 || raw[0].ID != "v" {
		t.Fatalf("volumes of hp: %+v", raw)
	}
}

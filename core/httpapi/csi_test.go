package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// addCSINode writes a ready node whose fingerprint reports a healthy node
// instance of plugin, and returns the node's ID.
func addCSINode(t testing.TB, st *state.StateStore, plugin string) string {
	t.Helper()
	id := uuid.NewString()
	n := &structs.Node{ID: id, SecretID: uuid.NewString(), Name: "csi-" + id[:8], Datacenter: "dc1", Status: structs.NodeStatusReady,
		CSINodePlugins: map[string]*structs.CSIInfo{plugin: {PluginID: plugin, Healthy: true, HealthDescription: "healthy",
			UpdateTime: time.Now().UTC(), Provider: "hostpath.csi.drover.dev", ProviderVersion: "1.0",
			NodeInfo: &structs.CSINodeInfo{ID: "csi-" + id[:8], MaxVolumes: 10}}}}
	if err := st.UpsertNode(st.LatestIndex()+1, n); err != nil {
		t.Fatal(err)
	}
	return id
}

func csiTestVolume(id, plugin string) *nomadapi.CSIVolume {
	return &nomadapi.CSIVolume{ID: id, Name: id, ExternalID: "ext-" + id, PluginID: plugin,
		RequestedCapabilities: []*nomadapi.CSIVolumeCapability{{
			AccessMode: nomadapi.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: nomadapi.CSIVolumeAttachmentModeFilesystem}},
		MountOptions: &nomadapi.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}},
		Secrets:      nomadapi.CSISecrets{"password": "hunter2"},
		Parameters:   map[string]string{"tier": "fast"},
	}
}

// The official client registers, reads, lists and deregisters volumes and
// reads plugins; secrets and mount flags never come back.
func TestCSIVolumesNomadAPI(t *testing.T) {
	srv := devServer(t, false)
	st := srv.State()
	nodeID := addCSINode(t, st, "hp")
	h := New(serverConfig(srv, Config{}))
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	vols := c.CSIVolumes()

	if _, err := vols.Register(csiTestVolume("vol1", "hp"), nil); err != nil {
		t.Fatalf("Register: %v", err)
	}
	got, meta, err := vols.Info("vol1", nil)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if meta.LastIndex == 0 || got.ModifyIndex == 0 || got.Namespace != "default" || got.ExternalID != "ext-vol1" {
		t.Errorf("Info: index %d, volume %+v", meta.LastIndex, got)
	}
	if got.Secrets["password"] != "[REDACTED]" {
		t.Errorf("secret came back as %q", got.Secrets["password"])
	}
	if got.MountOptions == nil || len(got.MountOptions.MountFlags) != 1 || got.MountOptions.MountFlags[0] != "[REDACTED]" {
		t.Errorf("mount flags came back as %+v", got.MountOptions)
	}
	if !got.Schedulable || got.NodesHealthy != 1 || got.Provider != "hostpath.csi.drover.dev" || got.PluginID != "hp" {
		t.Errorf("plugin facts: schedulable %v, nodes healthy %d, provider %q", got.Schedulable, got.NodesHealthy, got.Provider)
	}

	// A second registration updates; an identity change is refused and
	// leaves the volume as it was.
	upd := csiTestVolume("vol1", "hp")
	upd.Context = map[string]string{"zone": "a"}
	if _, err := vols.Register(upd, nil); err != nil {
		t.Fatalf("update: %v", err)
	}
	bad := csiTestVolume("vol1", "hp")
	bad.ExternalID = "other"
	if _, err := vols.Register(bad, nil); err == nil || !strings.Contains(err.Error(), "external_id cannot be updated") {
		t.Errorf("identity change: %v", err)
	}
	if _, err := vols.Register(csiTestVolume("vol2", "nosuch"), nil); err == nil || !strings.Contains(err.Error(), `no CSI plugin named "nosuch"`) {
		t.Errorf("unknown plugin: %v", err)
	}
	invalid := csiTestVolume("vol3", "hp")
	invalid.RequestedCapabilities[0].AccessMode = "sometimes"
	if _, err := vols.Register(invalid, nil); err == nil || !strings.Contains(err.Error(), `access_mode "sometimes"`) {
		t.Errorf("bad access mode: %v", err)
	}
	if v, err := st.CSIVolumeRaw(nil, "default", "vol1"); err != nil || v.ExternalID != "ext-vol1" || v.Context["zone"] != "a" {
		t.Errorf("stored volume after updates: %+v, %v", v, err)
	}

	list, _, err := vols.List(nil)
	if err != nil || len(list) != 1 || list[0].ID != "vol1" || !list[0].Schedulable {
		t.Fatalf("List: %v %+v", err, list)
	}
	// (The client's PluginList is a prefix query: plugin_id by hand.)
	for plugin, want := range map[string]int{"hp": 1, "other": 0} {
		var l []*nomadapi.CSIVolumeListStub
		if _, err := c.Raw().Query("/v1/volumes?type=csi&plugin_id="+plugin, &l, nil); err != nil || len(l) != want {
			t.Errorf("plugin_id=%s: %v, %d volumes, want %d", plugin, err, len(l), want)
		}
	}

	plugins, _, err := c.CSIPlugins().List(nil)
	if err != nil || len(plugins) != 1 || plugins[0].ID != "hp" || plugins[0].NodesHealthy != 1 {
		t.Fatalf("plugins: %v %+v", err, plugins)
	}
	p, _, err := c.CSIPlugins().Info("hp", nil)
	if err != nil || p.Nodes[nodeID] == nil || !p.Nodes[nodeID].Healthy || p.Nodes[nodeID].NodeInfo.ID == "" {
		t.Fatalf("plugin info: %v %+v", err, p)
	}
	if _, _, err := c.CSIPlugins().Info("nosuch", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing plugin: %v", err)
	}

	// A claim by a running allocation: the volume shows it, and refuses
	// deregistration, forced or not.
	alloc := &structs.Allocation{ID: uuid.NewString(), Namespace: "default", JobID: "j", TaskGroup: "g", NodeID: nodeID,
		Name: "j.g[0]", DesiredStatus: "run", ClientStatus: "running",
		Job: &structs.Job{ID: "j", Namespace: "default", Type: "system"}}
	if err := st.UpsertAllocs(st.LatestIndex()+1, []*structs.Allocation{alloc}); err != nil {
		t.Fatal(err)
	}
	claim := &structs.CSIVolumeClaim{AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
	if err := st.CSIVolumeClaims(st.LatestIndex()+1, []*structs.CSIVolumeClaimRequest{{Namespace: "default", VolumeID: "vol1", Claim: claim}}); err != nil {
		t.Fatal(err)
	}
	got, _, err = vols.Info("vol1", nil)
	if err != nil || len(got.WriteAllocs) != 1 || len(got.Allocations) != 1 || got.Allocations[0].ID != alloc.ID ||
		got.AccessMode != nomadapi.CSIVolumeAccessModeSingleNodeWriter {
		t.Fatalf("claimed volume: %v %+v", err, got)
	}
	for node, want := range map[string]int{nodeID: 1, uuid.NewString(): 0} {
		var onNode []*nomadapi.CSIVolumeListStub
		if _, err := c.Raw().Query("/v1/volumes?type=csi&node_id="+node, &onNode, nil); err != nil || len(onNode) != want {
			t.Errorf("node_id filter: %v, %d volumes, want %d", err, len(onNode), want)
		}
	}
	for _, force := range []bool{false, true} {
		if err := vols.Deregister("vol1", force, nil); err == nil || !strings.Contains(err.Error(), "volume in use: vol1") {
			t.Errorf("deregister in use (force %v): %v", force, err)
		}
	}

	// Once the allocation is terminal, a forced deregistration goes through.
	done := alloc.Copy()
	done.ClientStatus = "complete"
	if err := st.UpdateAllocsFromClient(st.LatestIndex()+1, []*structs.Allocation{done}); err != nil {
		t.Fatal(err)
	}
	if err := vols.Deregister("vol1", false, nil); err == nil {
		t.Error("unforced deregister of a volume with a past claim went through")
	}
	if err := vols.Deregister("vol1", true, nil); err != nil {
		t.Fatalf("forced deregister: %v", err)
	}
	if _, _, err := vols.Info("vol1", nil); err == nil || !strings.Contains(err.Error(), "volume not found") {
		t.Errorf("Info after deregister: %v", err)
	}
	if err := vols.Deregister("vol1", false, nil); err == nil || !strings.Contains(err.Error(), "volume not found") {
		t.Errorf("deregister missing: %v", err)
	}
}

// Volumes of one ID in two namespaces are two volumes.
func TestCSIVolumeNamespaces(t *testing.T) {
	w := newWorld(t, false)
	st := w.h.srv.State()
	addCSINode(t, st, "hp")
	for _, ns := range []string{"default", "team"} {
		v := csiTestVolume("data", "hp")
		v.ExternalID = "ext-" + ns
		status, body := w.do(callerMgmt, "PUT", "/v1/volume/csi/data?namespace="+ns, map[string]any{"Volumes": []any{v}})
		if status != 200 {
			t.Fatalf("register in %s: %d %s", ns, status, body)
		}
	}
	for _, ns := range []string{"default", "team"} {
		v, err := st.CSIVolumeRaw(nil, ns, "data")
		if err != nil || v == nil || v.ExternalID != "ext-"+ns {
			t.Errorf("volume in %s: %+v %v", ns, v, err)
		}
	}
	status, body := w.do(callerMgmt, "GET", "/v1/volumes?type=csi&namespace=*", nil)
	if status != 200 || strings.Count(string(body), `"ID":"data"`) != 2 {
		t.Errorf("list across namespaces: %d %s", status, body)
	}
	for path, want := range map[string]int{
		"/v1/volumes":           200,
		"/v1/volumes?type=host": 200,
		"/v1/volumes?type=nfs":  404,
		"/v1/plugins":           200,
	} {
		status, body := w.do(callerMgmt, "GET", path, nil)
		if status != want || (want == 200 && strings.TrimSpace(string(body)) != "[]") {
			t.Errorf("GET %s: %d %s, want %d and []", path, status, body, want)
		}
	}
	// The body's namespace must agree with the request's.
	v := csiTestVolume("data", "hp")
	v.Namespace = "default"
	if status, body := w.do(callerMgmt, "PUT", "/v1/volumes?namespace=team", map[string]any{"Volumes": []any{v}}); status != 400 {
		t.Errorf("namespace mismatch: %d %s", status, body)
	}
	if status, body := w.do(callerMgmt, "PUT", "/v1/volume/csi/other", map[string]any{"Volumes": []any{v}}); status != 400 ||
		!strings.Contains(string(body), "does not match") {
		t.Errorf("path mismatch: %d %s", status, body)
	}
	if status, body := w.do(callerMgmt, "DELETE", "/v1/volume/csi/data?force=maybe", nil); status != 400 {
		t.Errorf("bad force: %d %s", status, body)
	}
}

// csiMatrixCases adds a plugin and a volume "vol" in each of "default"
// and "team" to the ACL world and returns the CSI routes' cases: volumes
// need their namespace's csi-* capabilities (a register also plugin read),
// plugins the plugin policy.
func csiMatrixCases(w *aclWorld) []matrixCase {
	st := w.h.srv.State()
	addCSINode(w.t, st, "hp")
	for _, ns := range []string{"default", "team"} {
		v := &structs.CSIVolume{ID: "vol", Namespace: ns, PluginID: "hp", RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}
		if err := st.UpsertCSIVolumes(st.LatestIndex()+1, []*structs.CSIVolume{v}); err != nil {
			w.t.Fatal(err)
		}
	}
	body := func(ns string) map[string]any {
		return map[string]any{"Volumes": []any{map[string]any{"ID": "vol", "Namespace": ns, "PluginID": "hp",
			"RequestedCapabilities": []any{map[string]string{"AccessMode": "single-node-writer", "AttachmentMode": "file-system"}}}}}
	}
	return []matrixCase{
		{"GET /v1/volumes", "GET", "/v1/volumes?type=csi", nil, "---22"},
		{"GET /v1/volumes", "GET", "/v1/volumes?type=csi&namespace=team", nil, "--2-2"},
		{"GET /v1/volumes", "GET", "/v1/volumes?type=csi&namespace=*", nil, "22222"}, // filtered
		{"PUT /v1/volumes", "PUT", "/v1/volumes", body("default"), "----2"},
		{"POST /v1/volumes", "POST", "/v1/volumes", body("team"), "----2"}, // team write lacks plugin read
		{"GET /v1/volume/csi/{id}", "GET", "/v1/volume/csi/vol", nil, "---22"},
		{"GET /v1/volume/csi/{id}", "GET", "/v1/volume/csi/vol?namespace=team", nil, "--2-2"},
		{"GET /v1/volume/csi/{id}", "GET", "/v1/volume/csi/nosuch", nil, "---44"},
		{"PUT /v1/volume/csi/{id}", "PUT", "/v1/volume/csi/vol", body("default"), "----2"},
		{"POST /v1/volume/csi/{id}", "POST", "/v1/volume/csi/vol?namespace=team", body("team"), "----2"},
		{"DELETE /v1/volume/csi/{id}", "DELETE", "/v1/volume/csi/vol?namespace=team", nil, "--x-x"}, // then 404
		{"GET /v1/plugins", "GET", "/v1/plugins?type=csi", nil, "----2"},
		{"GET /v1/plugin/csi/{id}", "GET", "/v1/plugin/csi/hp", nil, "----2"},
		// The plugin has no controller: allowed callers get the server's refusal.
		{"PUT /v1/volume/csi/{id}/create", "PUT", "/v1/volume/csi/vol/create", body("default"), "----x"},
		{"POST /v1/volume/csi/{id}/create", "POST", "/v1/volume/csi/vol/create?namespace=team", body("team"), "----x"},
		{"DELETE /v1/volume/csi/{id}/delete", "DELETE", "/v1/volume/csi/vol/delete?namespace=team", nil, "--x-x"},
		{"DELETE /v1/volume/csi/{id}/detach", "DELETE", "/v1/volume/csi/vol/detach?namespace=team&node=n1", nil, "--x-x"},
	}
}

// A list across namespaces shows each caller only its namespaces' volumes.
func TestCSIVolumeListFiltered(t *testing.T) {
	w := newACLWorld(t)
	csiMatrixCases(w)
	for caller, want := range map[int]string{callerOtherNS: "team", callerReadOnly: "default", callerNone: "", callerMgmt: "default,team"} {
		status, body := w.do(caller, "GET", "/v1/volumes?type=csi&namespace=*", nil)
		var stubs []struct{ Namespace string }
		if status != 200 || json.Unmarshal(body, &stubs) != nil {
			t.Fatalf("%s: %d %s", callerNames[caller], status, body)
		}
		var got []string
		for _, s := range stubs {
			got = append(got, s.Namespace)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s sees %v, want %s", callerNames[caller], got, want)
		}
	}
}

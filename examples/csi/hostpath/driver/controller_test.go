package hostpath_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hostpath "github.com/drover-org/drover/examples/csi/hostpath/driver"
)

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func createReq(name string, required int64) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: required},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	}
}

func publishReq(volID, node string, mode csi.VolumeCapability_AccessMode_Mode) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: volID, NodeId: node, VolumeCapability: mountCap(mode)}
}

func mustCreate(t *testing.T, d *hostpath.Driver, name string) *csi.Volume {
	t.Helper()
	resp, err := d.CreateVolume(context.Background(), createReq(name, 1<<20))
	if err != nil {
		t.Fatalf("create volume %q: %v", name, err)
	}
	return resp.GetVolume()
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got code %s (%v), want %s", got, err, want)
	}
}

func publishedNodes(t *testing.T, d *hostpath.Driver, volID string) []string {
	t.Helper()
	resp, err := d.ControllerGetVolume(context.Background(), &csi.ControllerGetVolumeRequest{VolumeId: volID})
	if err != nil {
		t.Fatalf("get volume %s: %v", volID, err)
	}
	return resp.GetStatus().GetPublishedNodeIds()
}

// A restarted driver on the same state directory still knows its volumes and
// the nodes they are published to, and so still refuses what they forbid.
func TestStateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d1 := newDriver(t, dir, "node-b")
	vol := mustCreate(t, d1, "data")
	if _, err := d1.ControllerPublishVolume(ctx, publishReq(vol.GetVolumeId(), "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)); err != nil {
		t.Fatal(err)
	}

	d2 := newDriver(t, dir, "node-b")
	list, err := d2.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetEntries()) != 1 || list.GetEntries()[0].GetVolume().GetVolumeId() != vol.GetVolumeId() {
		t.Fatalf("after restart ListVolumes = %v, want the one volume %s", list.GetEntries(), vol.GetVolumeId())
	}
	if got := publishedNodes(t, d2, vol.GetVolumeId()); !slices.Equal(got, []string{"node-a"}) {
		t.Fatalf("after restart published nodes = %v, want [node-a]", got)
	}
	again, err := d2.CreateVolume(ctx, createReq("data", 1<<20))
	if err != nil || again.GetVolume().GetVolumeId() != vol.GetVolumeId() {
		t.Fatalf("after restart CreateVolume(data) = %v, %v; want the same volume %s", again, err, vol.GetVolumeId())
	}
	_, err = d2.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId()})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = d2.ControllerPublishVolume(ctx, publishReq(vol.GetVolumeId(), "node-b", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER))
	wantCode(t, err, codes.FailedPrecondition)

	if _, err := d2.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), NodeId: "node-a"}); err != nil {
		t.Fatal(err)
	}
	d3 := newDriver(t, dir, "node-b")
	if got := publishedNodes(t, d3, vol.GetVolumeId()); len(got) != 0 {
		t.Fatalf("after unpublish and restart published nodes = %v, want none", got)
	}
}

func TestSingleNodePublishToSecondNodeRefused(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, t.TempDir(), "node-b")
	for _, mode := range []csi.VolumeCapability_AccessMode_Mode{
		csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
	} {
		t.Run(mode.String(), func(t *testing.T) {
			vol := mustCreate(t, d, "single-"+mode.String())
			id := vol.GetVolumeId()
			resp, err := d.ControllerPublishVolume(ctx, publishReq(id, "node-a", mode))
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetPublishContext()["published_by"] != "hostpath" {
				t.Fatalf("publish context = %v, want published_by=hostpath", resp.GetPublishContext())
			}
			// The same publish again is idempotent.
			if _, err := d.ControllerPublishVolume(ctx, publishReq(id, "node-a", mode)); err != nil {
				t.Fatalf("repeated publish: %v", err)
			}
			_, err = d.ControllerPublishVolume(ctx, publishReq(id, "node-b", mode))
			wantCode(t, err, codes.FailedPrecondition)
			// A multi-node request is refused too while a single-node publish holds.
			_, err = d.ControllerPublishVolume(ctx, publishReq(id, "node-b", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER))
			wantCode(t, err, codes.FailedPrecondition)
			if got := publishedNodes(t, d, id); !slices.Equal(got, []string{"node-a"}) {
				t.Fatalf("published nodes = %v, want [node-a]", got)
			}
		})
	}
}

func TestMultiNodePublish(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, t.TempDir(), "node-b")
	id := mustCreate(t, d, "shared").GetVolumeId()
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := d.ControllerPublishVolume(ctx, publishReq(id, n, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)); err != nil {
			t.Fatalf("publish to %s: %v", n, err)
		}
	}
	if got := publishedNodes(t, d, id); !slices.Equal(got, []string{"node-a", "node-b"}) {
		t.Fatalf("published nodes = %v, want [node-a node-b]", got)
	}
	// Unpublishing with no node ID releases every node.
	if _, err := d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if got := publishedNodes(t, d, id); len(got) != 0 {
		t.Fatalf("published nodes after unpublish = %v, want none", got)
	}
}

func TestPublishErrors(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, t.TempDir())
	id := mustCreate(t, d, "v").GetVolumeId()
	swr := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	for _, tc := range []struct {
		name string
		req  *csi.ControllerPublishVolumeRequest
		want codes.Code
	}{
		{"no volume id", publishReq("", "node-a", swr), codes.InvalidArgument},
		{"no node id", publishReq(id, "", swr), codes.InvalidArgument},
		{"no capability", &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-a"}, codes.InvalidArgument},
		{"block", &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-a", VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: swr},
		}}, codes.InvalidArgument},
		{"unknown volume", publishReq("nope", "node-a", swr), codes.NotFound},
		{"unknown node", publishReq(id, "node-z", swr), codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.ControllerPublishVolume(ctx, tc.req)
			wantCode(t, err, tc.want)
		})
	}
	if _, err := d.ControllerPublishVolume(ctx, publishReq(id, "node-a", swr)); err != nil {
		t.Fatal(err)
	}
	ro := publishReq(id, "node-a", swr)
	ro.Readonly = true
	_, err := d.ControllerPublishVolume(ctx, ro)
	wantCode(t, err, codes.AlreadyExists)
	// Unpublishing an unknown volume, or from a node it is not on, is done already.
	for _, req := range []*csi.ControllerUnpublishVolumeRequest{{VolumeId: "nope", NodeId: "node-a"}, {VolumeId: id, NodeId: "node-z"}} {
		if _, err := d.ControllerUnpublishVolume(ctx, req); err != nil {
			t.Fatalf("unpublish %v: %v", req, err)
		}
	}
}

func TestMaxVolumesPerNode(t *testing.T) {
	ctx := context.Background()
	d, err := hostpath.New(hostpath.Config{NodeID: "node-a", StateDir: t.TempDir(), MaxVolumesPerNode: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, b := mustCreate(t, d, "a").GetVolumeId(), mustCreate(t, d, "b").GetVolumeId()
	swr := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	if _, err := d.ControllerPublishVolume(ctx, publishReq(a, "node-a", swr)); err != nil {
		t.Fatal(err)
	}
	_, err = d.ControllerPublishVolume(ctx, publishReq(b, "node-a", swr))
	wantCode(t, err, codes.ResourceExhausted)
}

func TestDeleteVolumeRefusedWhilePublished(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := newDriver(t, dir)
	id := mustCreate(t, d, "busy").GetVolumeId()
	if _, err := d.ControllerPublishVolume(ctx, publishReq(id, "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)); err != nil {
		t.Fatal(err)
	}
	_, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	wantCode(t, err, codes.FailedPrecondition)
	if _, err := os.Stat(filepath.Join(dir, "volumes", id)); err != nil {
		t.Fatalf("refused delete removed the volume's directory: %v", err)
	}
	if _, err := d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatalf("delete after unpublish: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes", id)); !os.IsNotExist(err) {
		t.Fatalf("volume directory still there after delete: %v", err)
	}
	// Deleting again, or an ID never seen, succeeds.
	for _, vid := range []string{id, "never-seen"} {
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vid}); err != nil {
			t.Fatalf("delete %s again: %v", vid, err)
		}
	}
	_, err = d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{})
	wantCode(t, err, codes.InvalidArgument)
}

func TestCreateVolumeIdempotent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := newDriver(t, dir)
	first := mustCreate(t, d, "idem")
	if first.GetCapacityBytes() != 1<<20 {
		t.Fatalf("capacity = %d, want %d", first.GetCapacityBytes(), 1<<20)
	}
	if seg := first.GetAccessibleTopology()[0].GetSegments(); seg[hostpath.TopologyKey] != "node-a" {
		t.Fatalf("topology = %v, want %s=node-a", seg, hostpath.TopologyKey)
	}
	for _, r := range []*csi.CapacityRange{nil, {RequiredBytes: 1 << 20}, {RequiredBytes: 1 << 10, LimitBytes: 1 << 21}} {
		req := createReq("idem", 0)
		req.CapacityRange = r
		resp, err := d.CreateVolume(ctx, req)
		if err != nil {
			t.Fatalf("create again with %v: %v", r, err)
		}
		if resp.GetVolume().GetVolumeId() != first.GetVolumeId() {
			t.Fatalf("create again with %v gave volume %s, want %s", r, resp.GetVolume().GetVolumeId(), first.GetVolumeId())
		}
	}
	for _, r := range []*csi.CapacityRange{{RequiredBytes: 2 << 20}, {LimitBytes: 1 << 10}} {
		req := createReq("idem", 0)
		req.CapacityRange = r
		_, err := d.CreateVolume(ctx, req)
		wantCode(t, err, codes.AlreadyExists)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "volumes"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("volumes directory holds %d entries (%v), want 1", len(entries), err)
	}
}

func TestCreateVolumeValidation(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, t.TempDir())
	block := createReq("blk", 0)
	block.VolumeCapabilities = []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	noCaps := createReq("nocaps", 0)
	noCaps.VolumeCapabilities = nil
	badRange := createReq("range", 0)
	badRange.CapacityRange = &csi.CapacityRange{RequiredBytes: 10, LimitBytes: 5}
	elsewhere := createReq("elsewhere", 0)
	elsewhere.AccessibilityRequirements = &csi.TopologyRequirement{
		Requisite: []*csi.Topology{{Segments: map[string]string{hostpath.TopologyKey: "node-z"}}},
	}
	for _, tc := range []struct {
		name string
		req  *csi.CreateVolumeRequest
		want codes.Code
	}{
		{"no name", createReq("", 0), codes.InvalidArgument},
		{"no capabilities", noCaps, codes.InvalidArgument},
		{"block", block, codes.InvalidArgument},
		{"required over limit", badRange, codes.OutOfRange},
		{"other node's topology", elsewhere, codes.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.CreateVolume(ctx, tc.req)
			wantCode(t, err, tc.want)
		})
	}
}

// Concurrent creates of one name make one volume: the controller's lock
// makes the name check and the record one step.
func TestConcurrentCreateOneVolume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := newDriver(t, dir)
	const n = 8
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := d.CreateVolume(ctx, createReq("race", 1<<20))
			if err != nil {
				t.Errorf("create: %v", err)
				return
			}
			ids[i] = resp.GetVolume().GetVolumeId()
		}()
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("concurrent creates returned different volumes: %v", ids)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "volumes"))
	if len(entries) != 1 {
		t.Fatalf("volumes directory holds %d entries, want 1", len(entries))
	}
}

func TestListVolumesPagination(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, t.TempDir())
	want := map[string]bool{}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		want[mustCreate(t, d, n).GetVolumeId()] = true
	}
	seen := map[string]bool{}
	token := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		resp, err := d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetEntries()) > 2 {
			t.Fatalf("page has %d entries, want at most 2", len(resp.GetEntries()))
		}
		for _, e := range resp.GetEntries() {
			id := e.GetVolume().GetVolumeId()
			if seen[id] {
				t.Fatalf("volume %s listed twice", id)
			}
			seen[id] = true
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
		// Deleting the volume a token points after keeps the token valid.
		last := resp.GetEntries()[len(resp.GetEntries())-1].GetVolume().GetVolumeId()
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: last}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("listed %d volumes, want %d", len(seen), len(want))
	}
	_, err := d.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "bogus"})
	wantCode(t, err, codes.Aborted)
	_, err = d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: -1})
	wantCode(t, err, codes.InvalidArgument)
}

func TestValidateVolumeCapabilities(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, t.TempDir())
	id := mustCreate(t, d, "v").GetVolumeId()
	ok, err := d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId:           id,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)},
	})
	if err != nil || ok.GetConfirmed() == nil {
		t.Fatalf("validate mount capability = %v, %v; want confirmed", ok, err)
	}
	blk, err := d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: id,
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	})
	if err != nil || blk.GetConfirmed() != nil || blk.GetMessage() == "" {
		t.Fatalf("validate block capability = %v, %v; want unconfirmed with a message", blk, err)
	}
	_, err = d.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "nope", VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	})
	wantCode(t, err, codes.NotFound)
}

func TestModes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	node, err := hostpath.New(hostpath.Config{NodeID: "node-a", StateDir: dir, Mode: hostpath.ModeNode})
	if err != nil {
		t.Fatal(err)
	}
	caps, err := node.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps.GetCapabilities() {
		if c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE {
			t.Fatal("node mode reports CONTROLLER_SERVICE")
		}
	}
	_, err = node.CreateVolume(ctx, createReq("x", 0))
	wantCode(t, err, codes.Unimplemented)

	ctrl, err := hostpath.New(hostpath.Config{NodeID: "node-a", StateDir: dir, Mode: hostpath.ModeController})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ctrl.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	wantCode(t, err, codes.Unimplemented)
	info, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || info.GetNodeId() != "node-a" || info.GetAccessibleTopology().GetSegments()[hostpath.TopologyKey] != "node-a" {
		t.Fatalf("NodeGetInfo = %v, %v", info, err)
	}
	if _, err := hostpath.ParseMode("both"); err == nil {
		t.Fatal("ParseMode accepted an unknown mode")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]hostpath.Config{
		"no node id":     {StateDir: t.TempDir()},
		"slash node id":  {NodeID: "a/b", StateDir: t.TempDir()},
		"no state dir":   {NodeID: "n"},
		"negative max":   {NodeID: "n", StateDir: t.TempDir(), MaxVolumesPerNode: -1},
		"bad known node": {NodeID: "n", StateDir: t.TempDir(), KnownNodes: []string{".."}},
		"unknown mode":   {NodeID: "n", StateDir: t.TempDir(), Mode: "both"},
	} {
		if _, err := hostpath.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "controller-state.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := hostpath.New(hostpath.Config{NodeID: "n", StateDir: dir}); err == nil {
		t.Error("New accepted a corrupt state file")
	}
}

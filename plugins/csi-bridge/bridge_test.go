package bridge

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/csibridge/csibridgetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func newTestBridge(t *testing.T, opts Options) *Bridge {
	b := New(nil, opts)
	t.Cleanup(b.Close)
	return b
}

var fsCap = csibridge.Capability{
	AccessMode: csibridge.AccessSingleNodeWriter, AttachmentMode: csibridge.AttachFileSystem,
	FSType: "ext4", MountFlags: []string{"noatime"},
}

func TestFingerprint(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name  string
		setup func(d *fakeDriver)
		svc   services
		want  csibridge.Fingerprint
	}{
		{
			name: "monolith",
			svc:  monolith,
			setup: func(d *fakeDriver) {
				d.pluginCaps = []csi.PluginCapability_Service_Type{
					csi.PluginCapability_Service_CONTROLLER_SERVICE,
					csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS,
				}
				d.ready = &yes
				d.ctrlCaps = []csi.ControllerServiceCapability_RPC_Type{
					csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
					csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
					csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
					csi.ControllerServiceCapability_RPC_GET_CAPACITY,
					csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
					csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH,
				}
				d.nodeCaps = []csi.NodeServiceCapability_RPC_Type{
					csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
					csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
				}
				d.maxVolumes = 7
				d.topology = map[string]string{"zone": "a"}
			},
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: true, HealthDescription: "healthy",
				HasController: true, HasNode: true,
				ControllerCaps: csibridge.ControllerCaps{CreateDelete: true, PublishUnpublish: true,
					ListVolumes: true, GetCapacity: true, ReadOnly: true, VolumeCondition: true},
				NodeCaps: csibridge.NodeCaps{StageUnstage: true, GetVolumeStats: true},
				NodeID:   "csi-node-1", MaxVolumes: 7, AccessibleTopology: map[string]string{"zone": "a"},
				RequiresTopologies: true,
			},
		},
		{
			name:  "node only",
			svc:   services{node: true},
			setup: func(d *fakeDriver) { d.pluginCaps = nil },
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: true, HealthDescription: "healthy",
				HasNode: true, NodeID: "csi-node-1",
			},
		},
		{
			// The plugin claims a controller it does not serve:
			// Unimplemented means absent.
			name: "node only, claiming a controller",
			svc:  services{node: true},
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: true, HealthDescription: "healthy",
				HasNode: true, NodeID: "csi-node-1",
			},
		},
		{
			name: "controller only",
			svc:  services{controller: true},
			setup: func(d *fakeDriver) {
				d.ctrlCaps = []csi.ControllerServiceCapability_RPC_Type{csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}
			},
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: true, HealthDescription: "healthy",
				HasController: true, ControllerCaps: csibridge.ControllerCaps{CreateDelete: true},
			},
		},
		{
			// Without the CONTROLLER_SERVICE plugin capability the
			// controller is not asked, even if it would answer.
			name:  "controller not advertised",
			svc:   monolith,
			setup: func(d *fakeDriver) { d.pluginCaps = nil },
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: true, HealthDescription: "healthy",
				HasNode: true, NodeID: "csi-node-1",
			},
		},
		{
			name:  "probe not ready",
			svc:   monolith,
			setup: func(d *fakeDriver) { d.ready = &no },
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: false,
				HealthDescription: "probe: the driver is not ready",
				HasController:     true, HasNode: true, NodeID: "csi-node-1",
			},
		},
		{
			name:  "probe fails",
			svc:   monolith,
			setup: func(d *fakeDriver) { d.probeErr = status.Error(codes.FailedPrecondition, "backend down") },
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: false,
				HealthDescription: "probe failed: FailedPrecondition: backend down",
				HasController:     true, HasNode: true, NodeID: "csi-node-1",
			},
		},
		{
			name:  "no node id",
			svc:   services{node: true},
			setup: func(d *fakeDriver) { d.nodeID = "" },
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: false,
				HealthDescription: "NodeGetInfo gave no node ID", HasNode: true,
			},
		},
		{
			name: "no services",
			svc:  services{},
			want: csibridge.Fingerprint{
				PluginName: "fake.csi.drover.io", Version: "9.8.7", Healthy: false,
				HealthDescription: "the driver serves neither the controller nor the node service",
			},
		},
	}
	b := newTestBridge(t, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newFakeDriver()
			if tt.setup != nil {
				tt.setup(d)
			}
			s := serve(t, d, tt.svc)
			fp, err := b.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: s.socket})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*fp, tt.want) {
				t.Fatalf("fingerprint\n%+v\nwant\n%+v", *fp, tt.want)
			}
		})
	}
}

// TestFingerprintErrors checks that a driver that fails the identity RPCs
// fails the fingerprint with the code's kind.
func TestFingerprintErrors(t *testing.T) {
	b := newTestBridge(t, Options{})
	d := newFakeDriver()
	s := serve(t, d, monolith)
	d.failNext("GetPluginInfo", status.Error(codes.Unavailable, "starting"))
	if _, err := b.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: s.socket}); !errors.Is(err, csibridge.ErrUnavailable) ||
		!strings.Contains(err.Error(), "GetPluginInfo: starting") {
		t.Fatalf("Fingerprint = %v, want ErrUnavailable naming GetPluginInfo", err)
	}
	d.failNext("NodeGetInfo", status.Error(codes.Internal, "boom"))
	if _, err := b.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: s.socket}); err == nil ||
		!strings.Contains(err.Error(), "Internal") || !strings.Contains(err.Error(), "NodeGetInfo: boom") {
		t.Fatalf("Fingerprint = %v, want the Internal error of NodeGetInfo", err)
	}
	if _, err := b.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: s.socket}); err != nil {
		t.Fatalf("Fingerprint after the failures = %v", err)
	}
}

// TestRequestsReachTheDriver checks how each drover request maps onto the
// CSI request the driver receives, and the results back.
func TestRequestsReachTheDriver(t *testing.T) {
	b := newTestBridge(t, Options{})
	d := newFakeDriver()
	d.publishCtx = map[string]string{"device": "/dev/xvdb"}
	d.created = &csi.Volume{VolumeId: "ext-9", CapacityBytes: 5 << 30, VolumeContext: map[string]string{"k": "v"},
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{"zone": "b"}}}}
	s := serve(t, d, monolith)
	ctx := testCtx(t)
	secrets := map[string]string{"token": "t0k"}
	vctx := map[string]string{"share": "/x"}
	pctx := map[string]string{"device": "/dev/xvdb"}
	mount := &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime"}}},
	}
	block := &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}
	blockCap := csibridge.Capability{AccessMode: csibridge.AccessMultiNodeReader, AttachmentMode: csibridge.AttachBlockDevice}

	got, err := b.ControllerPublish(ctx, csibridge.ControllerPublishRequest{Socket: s.socket, VolumeID: "ext-1",
		NodeID: "csi-node-1", Capability: fsCap, ReadOnly: true, Secrets: secrets, VolumeContext: vctx})
	if err != nil || !reflect.DeepEqual(got, d.publishCtx) {
		t.Fatalf("ControllerPublish = %v, %v", got, err)
	}
	v, err := b.CreateVolume(ctx, csibridge.CreateVolumeRequest{Socket: s.socket, Name: "db",
		CapacityMin: 1 << 30, CapacityMax: 10 << 30, Capabilities: []csibridge.Capability{fsCap, blockCap},
		Parameters: map[string]string{"type": "ssd"}, Secrets: secrets,
		ContentSource:     &csibridge.ContentSource{VolumeID: "ext-0"},
		TopologyRequired:  []map[string]string{{"zone": "a"}, {"zone": "b"}},
		TopologyPreferred: []map[string]string{{"zone": "b"}},
	})
	want := &csibridge.CreatedVolume{ExternalID: "ext-9", CapacityBytes: 5 << 30,
		Context: map[string]string{"k": "v"}, Topologies: []map[string]string{{"zone": "b"}}}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("CreateVolume = %+v, %v", v, err)
	}
	calls := []struct {
		rpc  string
		call func() error
	}{
		{"ControllerUnpublishVolume", func() error {
			return b.ControllerUnpublish(ctx, csibridge.ControllerUnpublishRequest{Socket: s.socket, VolumeID: "ext-1", NodeID: "csi-node-1", Secrets: secrets})
		}},
		{"NodeStageVolume", func() error {
			return b.NodeStage(ctx, csibridge.NodeStageRequest{Socket: s.socket, VolumeID: "ext-1", PublishContext: pctx,
				StagingPath: "/staging/ext-1", Capability: blockCap, Secrets: secrets, VolumeContext: vctx})
		}},
		{"NodeUnstageVolume", func() error {
			return b.NodeUnstage(ctx, csibridge.NodeUnstageRequest{Socket: s.socket, VolumeID: "ext-1", StagingPath: "/staging/ext-1"})
		}},
		{"NodePublishVolume", func() error {
			return b.NodePublish(ctx, csibridge.NodePublishRequest{Socket: s.socket, VolumeID: "ext-1", PublishContext: pctx,
				TargetPath: "/alloc/a1/ext-1", Capability: fsCap, ReadOnly: true, Secrets: secrets, VolumeContext: vctx})
		}},
		{"NodeUnpublishVolume", func() error {
			return b.NodeUnpublish(ctx, csibridge.NodeUnpublishRequest{Socket: s.socket, VolumeID: "ext-1", TargetPath: "/alloc/a1/ext-1"})
		}},
		{"DeleteVolume", func() error {
			return b.DeleteVolume(ctx, csibridge.DeleteVolumeRequest{Socket: s.socket, ExternalID: "ext-9", Secrets: secrets})
		}},
	}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatalf("%s: %v", c.rpc, err)
		}
	}

	wantReqs := map[string]proto.Message{
		"ControllerPublishVolume": &csi.ControllerPublishVolumeRequest{VolumeId: "ext-1", NodeId: "csi-node-1",
			VolumeCapability: mount, Readonly: true, Secrets: secrets, VolumeContext: vctx},
		"CreateVolume": &csi.CreateVolumeRequest{Name: "db",
			CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 10 << 30},
			VolumeCapabilities: []*csi.VolumeCapability{mount, block},
			Parameters:         map[string]string{"type": "ssd"}, Secrets: secrets,
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
				Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "ext-0"}}},
			AccessibilityRequirements: &csi.TopologyRequirement{
				Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}, {Segments: map[string]string{"zone": "b"}}},
				Preferred: []*csi.Topology{{Segments: map[string]string{"zone": "b"}}},
			},
		},
		"ControllerUnpublishVolume": &csi.ControllerUnpublishVolumeRequest{VolumeId: "ext-1", NodeId: "csi-node-1", Secrets: secrets},
		"NodeStageVolume": &csi.NodeStageVolumeRequest{VolumeId: "ext-1", PublishContext: pctx,
			StagingTargetPath: "/staging/ext-1", VolumeCapability: block, Secrets: secrets, VolumeContext: vctx},
		"NodeUnstageVolume": &csi.NodeUnstageVolumeRequest{VolumeId: "ext-1", StagingTargetPath: "/staging/ext-1"},
		// No staging path: the request had none (no STAGE_UNSTAGE).
		"NodePublishVolume": &csi.NodePublishVolumeRequest{VolumeId: "ext-1", PublishContext: pctx,
			TargetPath: "/alloc/a1/ext-1", VolumeCapability: mount, Readonly: true, Secrets: secrets, VolumeContext: vctx},
		"NodeUnpublishVolume": &csi.NodeUnpublishVolumeRequest{VolumeId: "ext-1", TargetPath: "/alloc/a1/ext-1"},
		"DeleteVolume":        &csi.DeleteVolumeRequest{VolumeId: "ext-9", Secrets: secrets},
	}
	for rpc, want := range wantReqs {
		if got := d.lastReq(rpc); !proto.Equal(got, want) {
			t.Errorf("%s reached the driver as\n%v\nwant\n%v", rpc, got, want)
		}
	}
}

// TestAccessModes checks every Nomad access mode against its CSI mode.
func TestAccessModes(t *testing.T) {
	want := map[string]csi.VolumeCapability_AccessMode_Mode{
		"single-node-reader-only":   csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		"single-node-writer":        csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		"single-node-single-writer": csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		"single-node-multi-writer":  csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
		"multi-node-reader-only":    csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
		"multi-node-single-writer":  csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
		"multi-node-multi-writer":   csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER,
	}
	if len(want) != len(csibridge.AccessModes) {
		t.Fatalf("%d modes tested, the SDK has %d", len(want), len(csibridge.AccessModes))
	}
	for mode, csiMode := range want {
		vc, err := volumeCapability(csibridge.Capability{AccessMode: mode, AttachmentMode: csibridge.AttachFileSystem})
		if err != nil || vc.GetAccessMode().GetMode() != csiMode || vc.GetMount() == nil {
			t.Errorf("%s: %v, %v", mode, vc, err)
		}
	}
}

// TestInvalidRequestsNeverReachTheDriver checks the bridge's own
// refusals.
func TestInvalidRequestsNeverReachTheDriver(t *testing.T) {
	b := newTestBridge(t, Options{})
	d := newFakeDriver()
	s := serve(t, d, monolith)
	ctx := testCtx(t)
	tests := map[string]func() error{
		"unknown access mode": func() error {
			return b.NodePublish(ctx, csibridge.NodePublishRequest{Socket: s.socket, VolumeID: "v", TargetPath: "/t",
				Capability: csibridge.Capability{AccessMode: "everyone", AttachmentMode: csibridge.AttachFileSystem}})
		},
		"unknown attachment mode": func() error {
			_, err := b.ControllerPublish(ctx, csibridge.ControllerPublishRequest{Socket: s.socket, VolumeID: "v", NodeID: "n",
				Capability: csibridge.Capability{AccessMode: csibridge.AccessSingleNodeWriter, AttachmentMode: "tape"}})
			return err
		},
		"no volume id": func() error {
			return b.NodeUnstage(ctx, csibridge.NodeUnstageRequest{Socket: s.socket, StagingPath: "/s"})
		},
		"no node id": func() error {
			_, err := b.ControllerPublish(ctx, csibridge.ControllerPublishRequest{Socket: s.socket, VolumeID: "v", Capability: fsCap})
			return err
		},
		"no capabilities": func() error {
			_, err := b.CreateVolume(ctx, csibridge.CreateVolumeRequest{Socket: s.socket, Name: "db"})
			return err
		},
		"relative socket": func() error {
			return b.NodeUnpublish(ctx, csibridge.NodeUnpublishRequest{Socket: "csi.sock", VolumeID: "v", TargetPath: "/t"})
		},
	}
	for name, call := range tests {
		if err := call(); !errors.Is(err, csibridge.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.calls) != 0 {
		t.Errorf("the driver saw %v", d.calls)
	}
}

// TestDriverCodesCrossThePlugin maps every CSI status code a driver
// returns onto its kind, through the real plugin gRPC glue, so errors.Is
// holds in the host process.
func TestDriverCodesCrossThePlugin(t *testing.T) {
	b := newTestBridge(t, Options{})
	host := csibridgetest.Connect(t, b)
	d := newFakeDriver()
	s := serve(t, d, monolith)
	tests := []struct {
		code codes.Code
		kind error
	}{
		{codes.NotFound, csibridge.ErrNotFound},
		{codes.InvalidArgument, csibridge.ErrInvalidArgument},
		{codes.FailedPrecondition, csibridge.ErrFailedPrecondition},
		{codes.AlreadyExists, csibridge.ErrAlreadyExists},
		{codes.Unavailable, csibridge.ErrUnavailable},
		{codes.OutOfRange, csibridge.ErrOutOfRange},
		{codes.ResourceExhausted, csibridge.ErrResourceExhausted},
		{codes.Aborted, csibridge.ErrAborted},
		{codes.Unimplemented, csibridge.ErrUnimplemented},
		{codes.DeadlineExceeded, context.DeadlineExceeded},
		{codes.Internal, nil},
		{codes.PermissionDenied, nil},
	}
	for _, tt := range tests {
		d.failNext("NodePublishVolume", status.Error(tt.code, "driver says no"))
		err := host.NodePublish(testCtx(t), csibridge.NodePublishRequest{Socket: s.socket, VolumeID: "v1",
			TargetPath: "/t", Capability: fsCap, Secrets: map[string]string{"pw": "s3cr3t"}})
		if err == nil {
			t.Fatalf("%v: no error", tt.code)
		}
		for _, k := range csibridge.Kinds {
			if got, want := errors.Is(err, k), k == tt.kind; got != want {
				t.Errorf("%v: errors.Is(%v, %v) = %v", tt.code, err, k, got)
			}
		}
		if tt.kind != nil && !errors.Is(err, tt.kind) {
			t.Errorf("%v: %v is not %v", tt.code, err, tt.kind)
		}
		for _, want := range []string{"NodePublishVolume", s.socket, "driver says no"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: %q does not name %q", tt.code, err, want)
			}
		}
		if tt.kind == nil && !strings.Contains(err.Error(), tt.code.String()) {
			t.Errorf("%v: %q does not name the code", tt.code, err)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%v: the error carries the secret", tt.code)
		}
	}
}

// TestNodeUnstageNotFound: a volume the driver no longer knows is
// ErrNotFound, which a caller releasing it treats as done.
func TestNodeUnstageNotFound(t *testing.T) {
	host := csibridgetest.Connect(t, newTestBridge(t, Options{}))
	d := newFakeDriver()
	s := serve(t, d, services{node: true})
	d.failNext("NodeUnstageVolume", status.Error(codes.NotFound, `volume "v1" not staged`))
	err := host.NodeUnstage(testCtx(t), csibridge.NodeUnstageRequest{Socket: s.socket, VolumeID: "v1", StagingPath: "/s"})
	if !errors.Is(err, csibridge.ErrNotFound) {
		t.Fatalf("NodeUnstage = %v, want ErrNotFound", err)
	}
}

// TestControllerUnpublishFailsThenSucceeds: the bridge returns each
// failure as it comes and calls the driver exactly once per call; the
// retrying is the caller's.
func TestControllerUnpublishFailsThenSucceeds(t *testing.T) {
	host := csibridgetest.Connect(t, newTestBridge(t, Options{}))
	d := newFakeDriver()
	s := serve(t, d, services{controller: true})
	failures := []struct {
		err  error
		kind error
	}{
		{status.Error(codes.Aborted, "operation pending"), csibridge.ErrAborted},
		{status.Error(codes.Unavailable, "backend unreachable"), csibridge.ErrUnavailable},
		{status.Error(codes.Internal, "disk on fire"), nil},
	}
	for _, f := range failures {
		d.failNext("ControllerUnpublishVolume", f.err)
	}
	req := csibridge.ControllerUnpublishRequest{Socket: s.socket, VolumeID: "ext-1", NodeID: "csi-node-1"}
	for i, f := range failures {
		err := host.ControllerUnpublish(testCtx(t), req)
		if err == nil || (f.kind != nil && !errors.Is(err, f.kind)) || !strings.Contains(err.Error(), status.Convert(f.err).Message()) {
			t.Fatalf("attempt %d: %v, want %v", i+1, err, f.err)
		}
		if n := d.count("ControllerUnpublishVolume"); n != i+1 {
			t.Fatalf("after attempt %d the driver saw %d calls", i+1, n)
		}
	}
	if err := host.ControllerUnpublish(testCtx(t), req); err != nil {
		t.Fatalf("attempt %d: %v", len(failures)+1, err)
	}
	if n := d.count("ControllerUnpublishVolume"); n != len(failures)+1 {
		t.Fatalf("the driver saw %d calls, want %d", n, len(failures)+1)
	}
}

// TestVanishedSocket: a driver that goes away, socket and all, or leaves
// a dead socket file behind, is ErrUnavailable at once, well within the
// call's deadline, also when the bridge had a connection to it cached.
// When it comes back the next call reaches it.
func TestVanishedSocket(t *testing.T) {
	b := newTestBridge(t, Options{})
	host := csibridgetest.Connect(t, b)
	d := newFakeDriver()
	s := serve(t, d, monolith)
	if _, err := host.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: s.socket}); err != nil {
		t.Fatal(err)
	}
	s.stop()
	within := func(what string, call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		err := call(ctx)
		if !errors.Is(err, csibridge.ErrUnavailable) {
			t.Fatalf("%s: %v, want ErrUnavailable", what, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("%s took %v to fail", what, took)
		}
	}
	within("socket removed", func(ctx context.Context) error {
		_, err := host.Fingerprint(ctx, csibridge.FingerprintRequest{Socket: s.socket})
		return err
	})
	if n := b.conns.size(); n != 0 {
		t.Errorf("%d connections still cached for a vanished driver", n)
	}

	// A stale socket file: nothing listens, connections are refused.
	ln, err := net.Listen("unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = ln.Close()
	within("dead socket file", func(ctx context.Context) error {
		return host.NodeUnpublish(ctx, csibridge.NodeUnpublishRequest{Socket: s.socket, VolumeID: "v", TargetPath: "/t"})
	})
	_ = os.Remove(s.socket)

	// The driver restarts on the same path.
	s2 := serveAt(t, d, monolith, s.socket)
	if _, err := host.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: s2.socket}); err != nil {
		t.Fatalf("Fingerprint of the restarted driver: %v", err)
	}
}

// TestSlowDriverHonoursDeadline: a driver that never answers is cut off at
// the caller's deadline, or at the bridge's default when the caller set
// none, and the driver sees its call cancelled.
func TestSlowDriverHonoursDeadline(t *testing.T) {
	t.Run("caller deadline", func(t *testing.T) {
		host := csibridgetest.Connect(t, newTestBridge(t, Options{}))
		d := newFakeDriver()
		d.setSlow("ControllerPublishVolume")
		s := serve(t, d, services{controller: true})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := host.ControllerPublish(ctx, csibridge.ControllerPublishRequest{Socket: s.socket, VolumeID: "v", NodeID: "n", Capability: fsCap})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ControllerPublish = %v, want DeadlineExceeded", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("took %v", took)
		}
		awaitDriverCancelled(t, d)
	})
	t.Run("default deadline", func(t *testing.T) {
		b := newTestBridge(t, Options{CallTimeout: 300 * time.Millisecond})
		d := newFakeDriver()
		d.setSlow("DeleteVolume")
		s := serve(t, d, services{controller: true})
		err := b.DeleteVolume(context.Background(), csibridge.DeleteVolumeRequest{Socket: s.socket, ExternalID: "v"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("DeleteVolume = %v, want DeadlineExceeded", err)
		}
		awaitDriverCancelled(t, d)
	})
}

func awaitDriverCancelled(t *testing.T, d *fakeDriver) {
	t.Helper()
	select {
	case err := <-d.slowSaw:
		if err == nil {
			t.Fatal("the driver's ctx ended without an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the driver never saw its call end")
	}
}

// TestLogsCarryNoSecrets: one debug line per call, naming the RPC, and
// never a secret, context or mount flag.
func TestLogsCarryNoSecrets(t *testing.T) {
	var buf syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf})
	b := New(logger, Options{})
	t.Cleanup(b.Close)
	d := newFakeDriver()
	s := serve(t, d, monolith)
	ctx := testCtx(t)
	secrets := map[string]string{"password": "s3cr3t-pw"}
	flagCap := fsCap
	flagCap.MountFlags = []string{"password=s3cr3t-flag"}
	if _, err := b.ControllerPublish(ctx, csibridge.ControllerPublishRequest{Socket: s.socket, VolumeID: "v1", NodeID: "n",
		Capability: flagCap, Secrets: secrets, VolumeContext: map[string]string{"x": "s3cr3t-ctx"}}); err != nil {
		t.Fatal(err)
	}
	d.failNext("NodeStageVolume", status.Error(codes.Internal, "failed"))
	_ = b.NodeStage(ctx, csibridge.NodeStageRequest{Socket: s.socket, VolumeID: "v1", StagingPath: "/s",
		Capability: flagCap, Secrets: secrets})
	out := buf.String()
	if strings.Contains(out, "s3cr3t") {
		t.Fatalf("the log carries a secret:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "rpc=ControllerPublishVolume") ||
		!strings.Contains(lines[1], "rpc=NodeStageVolume") || !strings.Contains(lines[1], "error_kind=other") {
		t.Fatalf("log lines:\n%s", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConnectionCache: one connection per socket, reused; idle ones and
// the least recently used beyond the bound are dropped; Close ends them.
func TestConnectionCache(t *testing.T) {
	b := newTestBridge(t, Options{MaxConns: 2, IdleTimeout: time.Minute})
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	b.conns.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var socks []string
	for range 3 {
		socks = append(socks, serve(t, newFakeDriver(), monolith).socket)
	}
	fp := func(sock string) {
		t.Helper()
		if _, err := b.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: sock}); err != nil {
			t.Fatal(err)
		}
	}
	fp(socks[0])
	first := b.conns.m[socks[0]]
	fp(socks[0])
	if b.conns.size() != 1 || b.conns.m[socks[0]] != first {
		t.Fatal("a second call to the same socket did not reuse its connection")
	}
	advance(time.Second)
	fp(socks[1])
	advance(time.Second)
	fp(socks[2]) // over the bound: socks[0], the least recently used, goes
	if _, ok := b.conns.m[socks[0]]; ok || b.conns.size() != 2 {
		t.Fatalf("cache holds %d sockets, socks[0] still there: %v", b.conns.size(), ok)
	}
	advance(2 * time.Minute)
	fp(socks[2]) // sweeps the idle socks[1]
	if _, ok := b.conns.m[socks[1]]; ok || b.conns.size() != 1 {
		t.Fatalf("the idle connection was not swept (%d cached)", b.conns.size())
	}
	b.Close()
	if b.conns.size() != 0 {
		t.Fatal("Close left connections cached")
	}
	if _, err := b.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: socks[2]}); !errors.Is(err, errClosed) {
		t.Fatalf("Fingerprint after Close = %v", err)
	}
}

// TestConcurrentCallsSurviveDrops: calls sharing a cached connection are
// not cut off when another call's Unavailable drops it from the cache; the
// connection closes once its last call is done.
func TestConcurrentCallsSurviveDrops(t *testing.T) {
	b := newTestBridge(t, Options{})
	d := newFakeDriver()
	s := serve(t, d, monolith)
	const workers, rounds = 8, 20
	for range rounds / 2 {
		d.failNext("NodeUnpublishVolume", status.Error(codes.Unavailable, "blip"))
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				var err error
				if w%2 == 0 {
					err = b.NodeUnpublish(testCtx(t), csibridge.NodeUnpublishRequest{Socket: s.socket, VolumeID: "v", TargetPath: "/t"})
					if errors.Is(err, csibridge.ErrUnavailable) {
						err = nil // the injected blips
					}
				} else {
					_, err = b.Fingerprint(testCtx(t), csibridge.FingerprintRequest{Socket: s.socket})
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call failed: %v", err)
	}
	if n := d.count("NodeUnpublishVolume"); n != workers/2*rounds {
		t.Errorf("the driver saw %d NodeUnpublish calls, want %d", n, workers/2*rounds)
	}
}

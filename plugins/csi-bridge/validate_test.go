package bridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/csibridge/csibridgetest"
)

// TestValidateVolumeCapabilities maps a validation onto the CSI request
// and reads the driver's answers, through the real plugin gRPC glue: a
// confirmation is Confirmed, an answer without confirmed is a refusal
// (not an error) that names the capabilities and carries the driver's
// message, and a confirmation that leaves out a capability asked about
// is a refusal naming it.
func TestValidateVolumeCapabilities(t *testing.T) {
	host := csibridgetest.Connect(t, newTestBridge(t, Options{}))
	d := newFakeDriver()
	s := serve(t, d, monolith)
	ctx := testCtx(t)
	blockCap := csibridge.Capability{AccessMode: csibridge.AccessMultiNodeReader, AttachmentMode: csibridge.AttachBlockDevice}
	req := csibridge.ValidateVolumeCapabilitiesRequest{Socket: s.socket, VolumeID: "ext-1",
		Capabilities: []csibridge.Capability{fsCap, blockCap}, Parameters: map[string]string{"type": "ssd"},
		VolumeContext: map[string]string{"share": "/x"}, Secrets: map[string]string{"token": "s3cr3t"}}
	mount := &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime"}}},
	}
	block := &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}

	v, err := host.ValidateVolumeCapabilities(ctx, req)
	if err != nil || !v.Confirmed {
		t.Fatalf("confirmed by the driver: %+v, %v", v, err)
	}
	want := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "ext-1", VolumeCapabilities: []*csi.VolumeCapability{mount, block},
		Parameters: req.Parameters, VolumeContext: req.VolumeContext, Secrets: req.Secrets}
	if got := d.lastReq("ValidateVolumeCapabilities"); !proto.Equal(got, want) {
		t.Fatalf("reached the driver as\n%v\nwant\n%v", got, want)
	}

	tests := []struct {
		name      string
		resp      *csi.ValidateVolumeCapabilitiesResponse
		confirmed bool
		says      []string
	}{
		{"confirmed without a list", &csi.ValidateVolumeCapabilitiesResponse{
			Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{}}, true, nil},
		{"confirmed, fs type normalised", &csi.ValidateVolumeCapabilitiesResponse{
			Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeCapabilities: []*csi.VolumeCapability{block, {
				AccessMode: mount.AccessMode, AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "xfs"}}}}}},
			true, nil},
		{"not confirmed", &csi.ValidateVolumeCapabilitiesResponse{Message: "block access is not supported"}, false,
			[]string{"not confirmed", "single-node-writer/file-system (ext4)", "multi-node-reader-only/block-device", "block access is not supported"}},
		{"not confirmed, no reason", &csi.ValidateVolumeCapabilitiesResponse{}, false,
			[]string{"multi-node-reader-only/block-device", "no reason"}},
		{"confirmation leaves one out", &csi.ValidateVolumeCapabilitiesResponse{
			Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeCapabilities: []*csi.VolumeCapability{mount}}}, false,
			[]string{"leaves out multi-node-reader-only/block-device"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.mu.Lock()
			d.validate = func(*csi.ValidateVolumeCapabilitiesRequest) *csi.ValidateVolumeCapabilitiesResponse { return tt.resp }
			d.mu.Unlock()
			v, err := host.ValidateVolumeCapabilities(ctx, req)
			if err != nil || v.Confirmed != tt.confirmed {
				t.Fatalf("= %+v, %v; want confirmed %v", v, err, tt.confirmed)
			}
			for _, w := range tt.says {
				if !strings.Contains(v.Message, w) {
					t.Errorf("message %q does not say %q", v.Message, w)
				}
			}
			if strings.Contains(v.Message, "s3cr3t") || strings.Contains(v.Message, "noatime") {
				t.Errorf("message %q carries a secret or a mount flag", v.Message)
			}
		})
	}
}

// TestValidateVolumeCapabilitiesErrors: a call the driver cannot answer
// is an error of its kind (the volume unknown, the RPC missing from a
// driver without a controller service); a malformed request never
// reaches the driver.
func TestValidateVolumeCapabilitiesErrors(t *testing.T) {
	host := csibridgetest.Connect(t, newTestBridge(t, Options{}))
	d := newFakeDriver()
	s := serve(t, d, monolith)
	ctx := testCtx(t)
	req := csibridge.ValidateVolumeCapabilitiesRequest{Socket: s.socket, VolumeID: "ext-1", Capabilities: []csibridge.Capability{fsCap}}

	d.failNext("ValidateVolumeCapabilities", status.Error(codes.NotFound, "volume ext-1 does not exist"))
	if _, err := host.ValidateVolumeCapabilities(ctx, req); !errors.Is(err, csibridge.ErrNotFound) ||
		!strings.Contains(err.Error(), "volume ext-1 does not exist") {
		t.Errorf("unknown volume: %v", err)
	}
	nodeOnly := serve(t, newFakeDriver(), services{node: true})
	r := req
	r.Socket = nodeOnly.socket
	if _, err := host.ValidateVolumeCapabilities(ctx, r); !errors.Is(err, csibridge.ErrUnimplemented) {
		t.Errorf("no controller service: %v", err)
	}

	before := d.count("ValidateVolumeCapabilities")
	for name, bad := range map[string]csibridge.ValidateVolumeCapabilitiesRequest{
		"no volume id":    {Socket: s.socket, Capabilities: []csibridge.Capability{fsCap}},
		"no capabilities": {Socket: s.socket, VolumeID: "ext-1"},
		"unknown mode": {Socket: s.socket, VolumeID: "ext-1",
			Capabilities: []csibridge.Capability{{AccessMode: "everyone", AttachmentMode: csibridge.AttachFileSystem}}},
	} {
		if _, err := host.ValidateVolumeCapabilities(ctx, bad); !errors.Is(err, csibridge.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if n := d.count("ValidateVolumeCapabilities"); n != before {
		t.Errorf("the driver saw %d malformed requests", n-before)
	}
}

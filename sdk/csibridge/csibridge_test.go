package csibridge_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/csibridge/csibridgetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fake records the request that reached the implementation and returns
// err (if set) from every method.
type fake struct {
	mu  sync.Mutex
	err error
	got any // the last request

	fingerprint *csibridge.Fingerprint
	publishCtx  map[string]string
	created     *csibridge.CreatedVolume
	validation  *csibridge.Validation
}

var _ csibridge.Bridge = (*fake)(nil)

func (f *fake) record(req any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = req
	return f.err
}

func (f *fake) last() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got
}

func (f *fake) Fingerprint(_ context.Context, req csibridge.FingerprintRequest) (*csibridge.Fingerprint, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.fingerprint, nil
}

func (f *fake) ControllerPublish(_ context.Context, req csibridge.ControllerPublishRequest) (map[string]string, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.publishCtx, nil
}

func (f *fake) ControllerUnpublish(_ context.Context, req csibridge.ControllerUnpublishRequest) error {
	return f.record(req)
}

func (f *fake) NodeStage(_ context.Context, req csibridge.NodeStageRequest) error {
	return f.record(req)
}

func (f *fake) NodeUnstage(_ context.Context, req csibridge.NodeUnstageRequest) error {
	return f.record(req)
}

func (f *fake) NodePublish(_ context.Context, req csibridge.NodePublishRequest) error {
	return f.record(req)
}

func (f *fake) NodeUnpublish(_ context.Context, req csibridge.NodeUnpublishRequest) error {
	return f.record(req)
}

func (f *fake) CreateVolume(_ context.Context, req csibridge.CreateVolumeRequest) (*csibridge.CreatedVolume, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.created, nil
}

func (f *fake) DeleteVolume(_ context.Context, req csibridge.DeleteVolumeRequest) error {
	return f.record(req)
}

func (f *fake) ValidateVolumeCapabilities(_ context.Context, req csibridge.ValidateVolumeCapabilitiesRequest) (*csibridge.Validation, error) {
	if err := f.record(req); err != nil {
		return nil, err
	}
	return f.validation, nil
}

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

const sock = "/run/csi/hostpath/csi.sock"

var (
	fsCap = csibridge.Capability{
		AccessMode: csibridge.AccessSingleNodeWriter, AttachmentMode: csibridge.AttachFileSystem,
		FSType: "ext4", MountFlags: []string{"noatime", "ro"},
	}
	blockCap = csibridge.Capability{
		AccessMode: csibridge.AccessMultiNodeMultiWriter, AttachmentMode: csibridge.AttachBlockDevice,
	}
)

// TestRoundTrip checks that every request reaches the implementation
// intact and every result comes back intact.
func TestRoundTrip(t *testing.T) {
	impl := &fake{
		fingerprint: &csibridge.Fingerprint{
			PluginName: "hostpath.csi.drover.io", Version: "1.2.3",
			Healthy: false, HealthDescription: "warming up",
			HasController: true, HasNode: true,
			ControllerCaps: csibridge.ControllerCaps{
				CreateDelete: true, PublishUnpublish: true, ListVolumes: true, GetCapacity: true,
				CreateDeleteSnapshot: true, ListSnapshots: true, Clone: true, ReadOnly: true,
				Expand: true, ListVolumesPublishedNodes: true, VolumeCondition: true, GetVolume: true,
				SingleNodeMultiWriter: true, ModifyVolume: true,
			},
			NodeCaps: csibridge.NodeCaps{
				StageUnstage: true, GetVolumeStats: true, Expand: true, VolumeCondition: true,
				SingleNodeMultiWriter: true, VolumeMountGroup: true,
			},
			NodeID: "node-7", MaxVolumes: 12,
			AccessibleTopology: map[string]string{"zone": "a", "rack": "r1"},
			RequiresTopologies: true,
		},
		publishCtx: map[string]string{"device": "/dev/sdx"},
		created: &csibridge.CreatedVolume{
			ExternalID: "vol-ext-1", CapacityBytes: 1 << 30,
			Context:    map[string]string{"k": "v"},
			Topologies: []map[string]string{{"zone": "a"}, {"zone": "b"}},
		},
		validation: &csibridge.Validation{Confirmed: false, Message: "block access is not supported"},
	}
	b := csibridgetest.Connect(t, impl)
	ctx := testCtx(t)
	secrets := map[string]string{"password": "hunter2"}
	volCtx := map[string]string{"share": "/x"}
	pubCtx := map[string]string{"device": "/dev/sdx"}

	fp, err := b.Fingerprint(ctx, csibridge.FingerprintRequest{Socket: sock})
	if err != nil || !reflect.DeepEqual(fp, impl.fingerprint) {
		t.Fatalf("Fingerprint = %+v, %v; want %+v", fp, err, impl.fingerprint)
	}
	if got := impl.last(); got != (csibridge.FingerprintRequest{Socket: sock}) {
		t.Fatalf("Fingerprint request arrived as %+v", got)
	}

	cpub := csibridge.ControllerPublishRequest{Socket: sock, VolumeID: "vol-ext-1", NodeID: "node-7",
		Capability: fsCap, ReadOnly: true, Secrets: secrets, VolumeContext: volCtx}
	pc, err := b.ControllerPublish(ctx, cpub)
	if err != nil || !reflect.DeepEqual(pc, impl.publishCtx) {
		t.Fatalf("ControllerPublish = %v, %v", pc, err)
	}
	requests := []struct {
		name string
		call func() error
		want any
	}{
		{"ControllerPublish", func() error { return nil }, cpub},
		{"ControllerUnpublish", nil, csibridge.ControllerUnpublishRequest{Socket: sock, VolumeID: "vol-ext-1", NodeID: "node-7", Secrets: secrets}},
		{"NodeStage", nil, csibridge.NodeStageRequest{Socket: sock, VolumeID: "vol-ext-1", PublishContext: pubCtx,
			StagingPath: "/staging/v", Capability: blockCap, Secrets: secrets, VolumeContext: volCtx}},
		{"NodeUnstage", nil, csibridge.NodeUnstageRequest{Socket: sock, VolumeID: "vol-ext-1", StagingPath: "/staging/v"}},
		{"NodePublish", nil, csibridge.NodePublishRequest{Socket: sock, VolumeID: "vol-ext-1", PublishContext: pubCtx,
			StagingPath: "/staging/v", TargetPath: "/alloc/v", Capability: fsCap, ReadOnly: true,
			Secrets: secrets, VolumeContext: volCtx}},
		{"NodeUnpublish", nil, csibridge.NodeUnpublishRequest{Socket: sock, VolumeID: "vol-ext-1", TargetPath: "/alloc/v"}},
		{"DeleteVolume", nil, csibridge.DeleteVolumeRequest{Socket: sock, ExternalID: "vol-ext-1", Secrets: secrets}},
	}
	for _, r := range requests {
		call := r.call
		if call == nil {
			call = func() error { return callWith(ctx, b, r.want) }
		}
		if err := call(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if got := impl.last(); !reflect.DeepEqual(got, r.want) {
			t.Fatalf("%s request arrived as\n%+v\nwant\n%+v", r.name, got, r.want)
		}
	}

	create := csibridge.CreateVolumeRequest{Socket: sock, Name: "db", CapacityMin: 1 << 20, CapacityMax: 1 << 30,
		Capabilities: []csibridge.Capability{fsCap, blockCap}, Parameters: map[string]string{"type": "ssd"},
		Secrets: secrets, ContentSource: &csibridge.ContentSource{SnapshotID: "snap-1"},
		TopologyRequired:  []map[string]string{{"zone": "a"}},
		TopologyPreferred: []map[string]string{{"zone": "a", "rack": "r1"}},
	}
	v, err := b.CreateVolume(ctx, create)
	if err != nil || !reflect.DeepEqual(v, impl.created) {
		t.Fatalf("CreateVolume = %+v, %v", v, err)
	}
	if got := impl.last(); !reflect.DeepEqual(got, create) {
		t.Fatalf("CreateVolume request arrived as\n%+v\nwant\n%+v", got, create)
	}

	validate := csibridge.ValidateVolumeCapabilitiesRequest{Socket: sock, VolumeID: "vol-ext-1",
		Capabilities: []csibridge.Capability{fsCap, blockCap}, Parameters: map[string]string{"type": "ssd"},
		VolumeContext: volCtx, Secrets: secrets}
	val, err := b.ValidateVolumeCapabilities(ctx, validate)
	if err != nil || !reflect.DeepEqual(val, impl.validation) {
		t.Fatalf("ValidateVolumeCapabilities = %+v, %v", val, err)
	}
	if got := impl.last(); !reflect.DeepEqual(got, validate) {
		t.Fatalf("ValidateVolumeCapabilities request arrived as\n%+v\nwant\n%+v", got, validate)
	}
	impl.validation = &csibridge.Validation{Confirmed: true}
	if val, err := b.ValidateVolumeCapabilities(ctx, validate); err != nil || !val.Confirmed || val.Message != "" {
		t.Fatalf("confirmed ValidateVolumeCapabilities = %+v, %v", val, err)
	}
	// A driver's message is bounded on the way back.
	impl.validation = &csibridge.Validation{Message: strings.Repeat("é", csibridge.MaxStringBytes)}
	if val, err := b.ValidateVolumeCapabilities(ctx, validate); err != nil || val.Confirmed ||
		len(val.Message) > csibridge.MaxStringBytes || !utf8.ValidString(val.Message) || val.Message == "" {
		t.Fatalf("long message: %d bytes, valid %v, %v", len(val.Message), utf8.ValidString(val.Message), err)
	}
}

// TestNilResultsAreEmpty checks that an implementation returning nil
// results gives the caller empty ones, not a failure.
func TestNilResultsAreEmpty(t *testing.T) {
	b := csibridgetest.Connect(t, &fake{})
	ctx := testCtx(t)
	if fp, err := b.Fingerprint(ctx, csibridge.FingerprintRequest{Socket: sock}); err != nil || fp == nil || fp.PluginName != "" {
		t.Fatalf("Fingerprint = %+v, %v", fp, err)
	}
	if pc, err := b.ControllerPublish(ctx, csibridge.ControllerPublishRequest{Socket: sock, Capability: fsCap}); err != nil || len(pc) != 0 {
		t.Fatalf("ControllerPublish = %v, %v", pc, err)
	}
	if v, err := b.CreateVolume(ctx, csibridge.CreateVolumeRequest{Socket: sock, Name: "x"}); err != nil || v == nil || v.ExternalID != "" {
		t.Fatalf("CreateVolume = %+v, %v", v, err)
	}
	// No answer is no confirmation.
	if v, err := b.ValidateVolumeCapabilities(ctx, csibridge.ValidateVolumeCapabilitiesRequest{Socket: sock}); err != nil || v == nil || v.Confirmed {
		t.Fatalf("ValidateVolumeCapabilities = %+v, %v", v, err)
	}
}

// callWith calls the Bridge method that takes req.
func callWith(ctx context.Context, b csibridge.Bridge, req any) error {
	switch r := req.(type) {
	case csibridge.FingerprintRequest:
		_, err := b.Fingerprint(ctx, r)
		return err
	case csibridge.ControllerPublishRequest:
		_, err := b.ControllerPublish(ctx, r)
		return err
	case csibridge.ControllerUnpublishRequest:
		return b.ControllerUnpublish(ctx, r)
	case csibridge.NodeStageRequest:
		return b.NodeStage(ctx, r)
	case csibridge.NodeUnstageRequest:
		return b.NodeUnstage(ctx, r)
	case csibridge.NodePublishRequest:
		return b.NodePublish(ctx, r)
	case csibridge.NodeUnpublishRequest:
		return b.NodeUnpublish(ctx, r)
	case csibridge.CreateVolumeRequest:
		_, err := b.CreateVolume(ctx, r)
		return err
	case csibridge.DeleteVolumeRequest:
		return b.DeleteVolume(ctx, r)
	case csibridge.ValidateVolumeCapabilitiesRequest:
		_, err := b.ValidateVolumeCapabilities(ctx, r)
		return err
	}
	panic(fmt.Sprintf("no Bridge method takes %T", req))
}

// validRequests is one valid request for every Bridge method.
var validRequests = []any{
	csibridge.FingerprintRequest{Socket: sock},
	csibridge.ControllerPublishRequest{Socket: sock, VolumeID: "v", NodeID: "n", Capability: fsCap},
	csibridge.ControllerUnpublishRequest{Socket: sock, VolumeID: "v", NodeID: "n"},
	csibridge.NodeStageRequest{Socket: sock, VolumeID: "v", StagingPath: "/s", Capability: fsCap},
	csibridge.NodeUnstageRequest{Socket: sock, VolumeID: "v", StagingPath: "/s"},
	csibridge.NodePublishRequest{Socket: sock, VolumeID: "v", TargetPath: "/t", Capability: blockCap},
	csibridge.NodeUnpublishRequest{Socket: sock, VolumeID: "v", TargetPath: "/t"},
	csibridge.CreateVolumeRequest{Socket: sock, Name: "v", Capabilities: []csibridge.Capability{fsCap}},
	csibridge.DeleteVolumeRequest{Socket: sock, ExternalID: "v"},
	csibridge.ValidateVolumeCapabilitiesRequest{Socket: sock, VolumeID: "v", Capabilities: []csibridge.Capability{fsCap}},
}

// TestErrorKindsCrossTheWire checks that every sentinel an implementation
// returns arrives as itself from every method, with its message and gRPC
// code, and matches no other kind.
func TestErrorKindsCrossTheWire(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantKind error // nil: no sentinel
		wantCode codes.Code
	}{
		{"not found", fmt.Errorf("%w: volume %q", csibridge.ErrNotFound, "v"), csibridge.ErrNotFound, codes.NotFound},
		{"invalid", fmt.Errorf("%w: volume id is missing", csibridge.ErrInvalidArgument), csibridge.ErrInvalidArgument, codes.InvalidArgument},
		{"precondition", fmt.Errorf("%w: still published", csibridge.ErrFailedPrecondition), csibridge.ErrFailedPrecondition, codes.FailedPrecondition},
		{"exists", fmt.Errorf("%w: db", csibridge.ErrAlreadyExists), csibridge.ErrAlreadyExists, codes.AlreadyExists},
		{"unavailable", fmt.Errorf("%w: socket gone", csibridge.ErrUnavailable), csibridge.ErrUnavailable, codes.Unavailable},
		{"out of range", fmt.Errorf("%w: 10 PiB", csibridge.ErrOutOfRange), csibridge.ErrOutOfRange, codes.OutOfRange},
		{"exhausted", fmt.Errorf("%w: node volume limit", csibridge.ErrResourceExhausted), csibridge.ErrResourceExhausted, codes.ResourceExhausted},
		{"aborted", fmt.Errorf("%w: busy", csibridge.ErrAborted), csibridge.ErrAborted, codes.Aborted},
		{"unimplemented", fmt.Errorf("%w: CreateVolume", csibridge.ErrUnimplemented), csibridge.ErrUnimplemented, codes.Unimplemented},
		{"deadline", fmt.Errorf("publish: %w", context.DeadlineExceeded), context.DeadlineExceeded, codes.DeadlineExceeded},
		{"canceled", fmt.Errorf("publish: %w", context.Canceled), context.Canceled, codes.Canceled},
		// A bridge written without this SDK still maps by code.
		{"bare NotFound status", status.Error(codes.NotFound, "no such volume"), csibridge.ErrNotFound, codes.NotFound},
		{"bare Aborted status", status.Error(codes.Aborted, "busy"), csibridge.ErrAborted, codes.Aborted},
		// ...except where gRPC itself uses the code.
		{"bare Unavailable status", status.Error(codes.Unavailable, "transport"), nil, codes.Unavailable},
		{"plain error", errors.New("disk on fire"), nil, codes.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := csibridgetest.Connect(t, &fake{err: tt.err})
			for _, req := range validRequests {
				name := fmt.Sprintf("%T", req)
				err := callWith(testCtx(t), b, req)
				if err == nil {
					t.Fatalf("%s: no error", name)
				}
				for _, k := range csibridge.Kinds {
					if got, want := errors.Is(err, k), k == tt.wantKind; got != want {
						t.Errorf("%s: errors.Is(%v, %v) = %v", name, err, k, got)
					}
				}
				if tt.wantKind != nil && !errors.Is(err, tt.wantKind) {
					t.Errorf("%s: %v is not %v", name, err, tt.wantKind)
				}
				if code := status.Code(err); code != tt.wantCode {
					t.Errorf("%s: code %v, want %v", name, code, tt.wantCode)
				}
				if s, _ := status.FromError(tt.err); !strings.Contains(err.Error(), s.Message()) {
					t.Errorf("%s: message %q lost %q", name, err, s.Message())
				}
			}
		})
	}
}

// TestBoundsAreEnforced checks that the server adapter refuses oversized
// and malformed requests with ErrInvalidArgument before the implementation
// sees them, and that its messages never carry the secrets.
func TestBoundsAreEnforced(t *testing.T) {
	secret := "s3cr3t-" + strings.Repeat("x", csibridge.MaxMapBytes)
	bigSecrets := map[string]string{"password": secret}
	many := map[string]string{}
	for i := range csibridge.MaxMapEntries + 1 {
		many[fmt.Sprint(i)] = ""
	}
	half := strings.Repeat("y", csibridge.MaxMapBytes/2+1)
	tests := []struct {
		name string
		req  any
		want string // in the message
	}{
		{"empty socket", csibridge.FingerprintRequest{}, "socket must be an absolute path"},
		{"relative socket", csibridge.NodeUnstageRequest{Socket: "csi.sock"}, "absolute path"},
		{"long socket", csibridge.FingerprintRequest{Socket: "/" + strings.Repeat("s", csibridge.MaxStringBytes)}, "socket is"},
		{"huge secrets", csibridge.ControllerPublishRequest{Socket: sock, Capability: fsCap, Secrets: bigSecrets}, "secrets"},
		{"maps together too big", csibridge.NodeStageRequest{Socket: sock, Capability: fsCap,
			Secrets: map[string]string{"a": half}, VolumeContext: map[string]string{"b": half}}, "volume context brings"},
		{"too many entries", csibridge.DeleteVolumeRequest{Socket: sock, Secrets: many}, "entries"},
		{"long volume id", csibridge.NodeUnpublishRequest{Socket: sock, VolumeID: strings.Repeat("v", csibridge.MaxStringBytes+1)}, "volume id"},
		{"unknown access mode", csibridge.NodePublishRequest{Socket: sock,
			Capability: csibridge.Capability{AccessMode: "everyone", AttachmentMode: csibridge.AttachFileSystem}}, `unknown access mode "everyone"`},
		{"unknown attachment mode", csibridge.ControllerPublishRequest{Socket: sock,
			Capability: csibridge.Capability{AccessMode: csibridge.AccessSingleNodeWriter, AttachmentMode: "nfs"}}, `unknown attachment mode "nfs"`},
		{"missing capability", csibridge.NodeStageRequest{Socket: sock}, "unknown access mode"},
		{"block with fs type", csibridge.NodePublishRequest{Socket: sock,
			Capability: csibridge.Capability{AccessMode: csibridge.AccessSingleNodeWriter, AttachmentMode: csibridge.AttachBlockDevice, FSType: "xfs"}}, "block-device"},
		{"too many capabilities", csibridge.CreateVolumeRequest{Socket: sock, Capabilities: make([]csibridge.Capability, csibridge.MaxListLen+1)}, "capabilities"},
		{"bad capability in list", csibridge.CreateVolumeRequest{Socket: sock, Capabilities: []csibridge.Capability{fsCap, {}}}, "capability 1"},
		{"bad range", csibridge.CreateVolumeRequest{Socket: sock, CapacityMin: 10, CapacityMax: 5}, "capacity range"},
		{"two content sources", csibridge.CreateVolumeRequest{Socket: sock,
			ContentSource: &csibridge.ContentSource{SnapshotID: "s", VolumeID: "v"}}, "content source"},
		{"too many topologies", csibridge.CreateVolumeRequest{Socket: sock, TopologyPreferred: make([]map[string]string, csibridge.MaxListLen+1)}, "preferred topologies"},
		{"too many validate capabilities", csibridge.ValidateVolumeCapabilitiesRequest{Socket: sock,
			Capabilities: make([]csibridge.Capability, csibridge.MaxListLen+1)}, "capabilities"},
		{"bad validate capability", csibridge.ValidateVolumeCapabilitiesRequest{Socket: sock,
			Capabilities: []csibridge.Capability{blockCap, {AccessMode: "everyone", AttachmentMode: csibridge.AttachFileSystem}}}, "capability 1"},
		{"huge validate secrets", csibridge.ValidateVolumeCapabilitiesRequest{Socket: sock, Secrets: bigSecrets}, "secrets"},
		{"huge topology", csibridge.CreateVolumeRequest{Socket: sock, TopologyRequired: []map[string]string{{"zone": secret}}}, "required topologies"},
	}
	impl := &fake{}
	b := csibridgetest.Connect(t, impl)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := callWith(testCtx(t), b, tt.req)
			if !errors.Is(err, csibridge.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalidArgument saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("the error carries the secret: %.200s", err)
			}
			if got := impl.last(); got != nil {
				t.Fatalf("the implementation saw %T", got)
			}
		})
	}
	// Exactly at the bounds is fine.
	atLimit := map[string]string{"k": strings.Repeat("z", csibridge.MaxMapBytes-1)}
	if err := b.DeleteVolume(testCtx(t), csibridge.DeleteVolumeRequest{Socket: sock, Secrets: atLimit}); err != nil {
		t.Fatalf("DeleteVolume at the map limit: %v", err)
	}
}

func TestCapabilityValidate(t *testing.T) {
	for _, m := range csibridge.AccessModes {
		for _, a := range []string{csibridge.AttachFileSystem, csibridge.AttachBlockDevice} {
			if err := (csibridge.Capability{AccessMode: m, AttachmentMode: a}).Validate(); err != nil {
				t.Errorf("%s/%s: %v", m, a, err)
			}
		}
	}
	if err := (csibridge.Capability{AccessMode: "single-node-writer ", AttachmentMode: "file-system"}).Validate(); !errors.Is(err, csibridge.ErrInvalidArgument) {
		t.Errorf("a mode with a trailing space: %v", err)
	}
}

// TestPing checks that Ping succeeds against a bridge plugin and reports
// Unimplemented against a gRPC server that serves no bridge, which is how
// the agent tells a third-party binary's kinds apart.
func TestPing(t *testing.T) {
	b := csibridgetest.Connect(t, &fake{})
	if err := csibridge.Ping(testCtx(t), b); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	if err := csibridge.Ping(testCtx(t), &fake{}); err != nil {
		t.Fatalf("Ping of a plain implementation = %v", err)
	}

	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "other.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	conn, err := grpc.NewClient("unix://"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := csibridge.Ping(testCtx(t), csibridge.NewClient(conn)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Ping of a server without the bridge = %v, want Unimplemented", err)
	}
}

package bridge

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// fakeDriver is a CSI driver for tests: identity, controller and node
// services whose answers and failures the test sets. It mounts nothing.
type fakeDriver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	name       string
	pluginCaps []csi.PluginCapability_Service_Type
	ready      *bool // nil: Probe leaves ready unset
	probeErr   error
	ctrlCaps   []csi.ControllerServiceCapability_RPC_Type
	nodeCaps   []csi.NodeServiceCapability_RPC_Type
	nodeID     string
	maxVolumes int64
	topology   map[string]string

	publishCtx map[string]string
	created    *csi.Volume
	// validate answers ValidateVolumeCapabilities; nil confirms the
	// request as sent.
	validate func(*csi.ValidateVolumeCapabilitiesRequest) *csi.ValidateVolumeCapabilitiesResponse

	mu sync.Mutex
	// failures are returned, first to last, by the RPC's next calls.
	failures map[string][]error
	// slow RPCs block until their ctx ends; the ctx error goes to slowSaw.
	slow    map[string]bool
	slowSaw chan error
	calls   map[string]int
	last    map[string]proto.Message
}

func newFakeDriver() *fakeDriver {
	return &fakeDriver{
		name:       "fake.csi.drover.io",
		pluginCaps: []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE},
		nodeID:     "csi-node-1",
		failures:   map[string][]error{},
		slow:       map[string]bool{},
		slowSaw:    make(chan error, 16),
		calls:      map[string]int{},
		last:       map[string]proto.Message{},
	}
}

func (d *fakeDriver) failNext(rpc string, errs ...error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failures[rpc] = append(d.failures[rpc], errs...)
}

func (d *fakeDriver) setSlow(rpc string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slow[rpc] = true
}

func (d *fakeDriver) count(rpc string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[rpc]
}

func (d *fakeDriver) lastReq(rpc string) proto.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last[rpc]
}

// enter records a call and returns the failure it must return, if any.
func (d *fakeDriver) enter(ctx context.Context, rpc string, req proto.Message) error {
	d.mu.Lock()
	d.calls[rpc]++
	d.last[rpc] = proto.Clone(req)
	slow := d.slow[rpc]
	var err error
	if q := d.failures[rpc]; len(q) > 0 {
		err, d.failures[rpc] = q[0], q[1:]
	}
	d.mu.Unlock()
	if slow {
		<-ctx.Done()
		d.slowSaw <- ctx.Err()
		return ctx.Err()
	}
	return err
}

func (d *fakeDriver) GetPluginInfo(ctx context.Context, req *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	if err := d.enter(ctx, "GetPluginInfo", req); err != nil {
		return nil, err
	}
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "9.8.7"}, nil
}

func (d *fakeDriver) GetPluginCapabilities(ctx context.Context, req *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	if err := d.enter(ctx, "GetPluginCapabilities", req); err != nil {
		return nil, err
	}
	resp := &csi.GetPluginCapabilitiesResponse{}
	for _, t := range d.pluginCaps {
		resp.Capabilities = append(resp.Capabilities, &csi.PluginCapability{
			Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}})
	}
	return resp, nil
}

func (d *fakeDriver) Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if err := d.enter(ctx, "Probe", req); err != nil {
		return nil, err
	}
	if d.probeErr != nil {
		return nil, d.probeErr
	}
	resp := &csi.ProbeResponse{}
	if d.ready != nil {
		resp.Ready = wrapperspb.Bool(*d.ready)
	}
	return resp, nil
}

func (d *fakeDriver) ControllerGetCapabilities(ctx context.Context, req *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	if err := d.enter(ctx, "ControllerGetCapabilities", req); err != nil {
		return nil, err
	}
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, t := range d.ctrlCaps {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return resp, nil
}

func (d *fakeDriver) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := d.enter(ctx, "ControllerPublishVolume", req); err != nil {
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: d.publishCtx}, nil
}

func (d *fakeDriver) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if err := d.enter(ctx, "ControllerUnpublishVolume", req); err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (d *fakeDriver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := d.enter(ctx, "CreateVolume", req); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: d.created}, nil
}

func (d *fakeDriver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := d.enter(ctx, "DeleteVolume", req); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *fakeDriver) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := d.enter(ctx, "ValidateVolumeCapabilities", req); err != nil {
		return nil, err
	}
	d.mu.Lock()
	fn := d.validate
	d.mu.Unlock()
	if fn != nil {
		return fn(req), nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

func (d *fakeDriver) NodeGetInfo(ctx context.Context, req *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if err := d.enter(ctx, "NodeGetInfo", req); err != nil {
		return nil, err
	}
	resp := &csi.NodeGetInfoResponse{NodeId: d.nodeID, MaxVolumesPerNode: d.maxVolumes}
	if d.topology != nil {
		resp.AccessibleTopology = &csi.Topology{Segments: d.topology}
	}
	return resp, nil
}

func (d *fakeDriver) NodeGetCapabilities(ctx context.Context, req *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	if err := d.enter(ctx, "NodeGetCapabilities", req); err != nil {
		return nil, err
	}
	resp := &csi.NodeGetCapabilitiesResponse{}
	for _, t := range d.nodeCaps {
		resp.Capabilities = append(resp.Capabilities, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return resp, nil
}

func (d *fakeDriver) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if err := d.enter(ctx, "NodeStageVolume", req); err != nil {
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *fakeDriver) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := d.enter(ctx, "NodeUnstageVolume", req); err != nil {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *fakeDriver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := d.enter(ctx, "NodePublishVolume", req); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *fakeDriver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := d.enter(ctx, "NodeUnpublishVolume", req); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// services says which CSI services a served fake registers; gRPC answers
// Unimplemented for the others, as for a real controller- or node-only
// driver.
type services struct{ controller, node bool }

var monolith = services{controller: true, node: true}

// served is a fake driver listening on a unix socket.
type served struct {
	socket string
	srv    *grpc.Server
	done   chan struct{}
	once   sync.Once
}

// serve serves d on a fresh unix socket until the test ends. The socket
// lives in a short directory of its own: unix socket paths are limited to
// about 100 bytes, which t.TempDir paths can exceed.
func serve(t *testing.T, d *fakeDriver, svc services) *served {
	t.Helper()
	dir, err := os.MkdirTemp("", "csib")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return serveAt(t, d, svc, filepath.Join(dir, "csi.sock"))
}

// serveAt serves d on the unix socket at path until the test ends.
func serveAt(t *testing.T, d *fakeDriver, svc services, path string) *served {
	t.Helper()
	s := &served{socket: path, done: make(chan struct{})}
	ln, err := net.Listen("unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = grpc.NewServer()
	csi.RegisterIdentityServer(s.srv, d)
	if svc.controller {
		csi.RegisterControllerServer(s.srv, d)
	}
	if svc.node {
		csi.RegisterNodeServer(s.srv, d)
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(s.stop)
	return s
}

// stop stops the driver: its listener closes and its socket file goes.
func (s *served) stop() {
	s.once.Do(func() {
		s.srv.Stop()
		<-s.done
		_ = os.Remove(s.socket)
	})
}

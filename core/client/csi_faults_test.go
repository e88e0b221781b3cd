package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	csivol "github.com/drover-org/drover/core/client/csi"
	"github.com/drover-org/drover/core/structs"
	bridge "github.com/drover-org/drover/plugins/csi-bridge"
	"github.com/drover-org/drover/plugins/csi-bridge/csimock"
	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/csibridge/csibridgetest"
)

// Fault injection into the client's CSI volume hook (package csi), as an
// alloc runner drives it: csi-test's gomock CSI servers on a real unix
// socket (csimock), reached through the real csi-bridge served over the
// plugin gRPC glue, so driver errors arrive with their kinds as in
// production.

// realBridge is the csi-bridge plugin, as the client sees it.
func realBridge(t *testing.T) csibridge.Bridge {
	t.Helper()
	b := bridge.New(nil, bridge.Options{})
	t.Cleanup(b.Close)
	return csibridgetest.Connect(t, b)
}

// driverBridge answers the fingerprints with the fake bridge (the plugin
// task is a fake with a socket nothing listens on) and sends every node
// call through the real bridge to the mock driver's socket.
type driverBridge struct {
	*volBridge
	real   csibridge.Bridge
	socket string

	mu         sync.Mutex
	unpublishs []time.Time // NodeUnpublish attempts
}

func (b *driverBridge) NodeStage(ctx context.Context, req csibridge.NodeStageRequest) error {
	req.Socket = b.socket
	return b.real.NodeStage(ctx, req)
}

func (b *driverBridge) NodeUnstage(ctx context.Context, req csibridge.NodeUnstageRequest) error {
	req.Socket = b.socket
	return b.real.NodeUnstage(ctx, req)
}

func (b *driverBridge) NodePublish(ctx context.Context, req csibridge.NodePublishRequest) error {
	req.Socket = b.socket
	return b.real.NodePublish(ctx, req)
}

func (b *driverBridge) NodeUnpublish(ctx context.Context, req csibridge.NodeUnpublishRequest) error {
	b.mu.Lock()
	b.unpublishs = append(b.unpublishs, time.Now())
	b.mu.Unlock()
	req.Socket = b.socket
	return b.real.NodeUnpublish(ctx, req)
}

func (b *driverBridge) unpublishAttempts() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.unpublishs...)
}

// newDriverHarness is a volHarness whose node calls reach d.
func newDriverHarness(t *testing.T, d *csimock.Driver) (*volHarness, *driverBridge) {
	t.Helper()
	var db *driverBridge
	real := realBridge(t)
	h := newVolHarnessWith(t, func(vb *volBridge) csibridge.Bridge {
		db = &driverBridge{volBridge: vb, real: real, socket: d.Socket}
		return db
	})
	return h, db
}

// expectMount lets the driver stage and publish ext-vol once.
func expectMount(d *csimock.Driver) {
	d.Node.EXPECT().NodeStageVolume(gomock.Any(), gomock.Cond(func(r *csi.NodeStageVolumeRequest) bool {
		return r.GetVolumeId() == "ext-vol" && r.GetStagingTargetPath() != ""
	})).Return(&csi.NodeStageVolumeResponse{}, nil)
	d.Node.EXPECT().NodePublishVolume(gomock.Any(), gomock.Cond(func(r *csi.NodePublishVolumeRequest) bool {
		return r.GetVolumeId() == "ext-vol" && r.GetTargetPath() != "" && r.GetSecrets()["k"] == "s"
	})).Return(&csi.NodePublishVolumeResponse{}, nil)
}

// A driver that no longer knows the volume answers NodeUnpublish and
// NodeUnstage with NotFound: both count as done, each is called once (no
// retry), and the claim is released node-detached at once (never
// unpublishing), so the servers free it.
func TestCSIReleaseDriverNotFound(t *testing.T) {
	d := csimock.New(t)
	h, _ := newDriverHarness(t, d)
	expectMount(d)
	gomock.InOrder(
		d.Node.EXPECT().NodeUnpublishVolume(gomock.Any(), gomock.Any()).Return(nil, status.Error(codes.NotFound, "not published")),
		d.Node.EXPECT().NodeUnstageVolume(gomock.Any(), gomock.Any()).Return(nil, status.Error(codes.NotFound, "not staged")),
	)
	a := h.volAlloc("alloc-ffff-0001", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })
	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "claim released node-detached", func() bool { return h.has("release vol " + a.ID + " node-detached") })
	if h.has("release vol " + a.ID + " unpublishing") {
		t.Fatalf("NotFound was taken for a failure: %q", h.log.snapshot())
	}
	ar := h.c.runner(a.ID)
	waitFor(t, "the volume's state dropped", func() bool { return ar == nil || !hasVolume(ar, "data") })
}

// The node plugin's driver dies (its socket goes) before the alloc
// stops: the node steps fail as unavailable, the claim is released as
// unpublishing at once, and the node steps are retried in the background
// with backoff, never in a tight loop. When the driver is back on its
// socket the retry's NodeUnpublish and NodeUnstage reach it and the
// claim is released node-detached.
func TestCSIReleaseDriverSocketVanishes(t *testing.T) {
	d := csimock.New(t)
	h, db := newDriverHarness(t, d)
	expectMount(d)
	a := h.volAlloc("alloc-ffff-0002", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })

	d.Stop() // no expectation for a node release yet: none may reach it
	start := time.Now()
	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "released as unpublishing", func() bool { return h.has("release vol " + a.ID + " unpublishing") })
	// Two rounds of node calls: the first release and one background retry.
	waitFor(t, "a background retry", func() bool { return len(db.unpublishAttempts()) >= 2*csivol.NodeCallAttempts })
	if h.has("release vol " + a.ID + " node-detached") {
		t.Fatal("node-detached while the driver is gone")
	}
	elapsed := time.Since(start)
	// Each round makes csivol.NodeCallAttempts calls spaced 100ms, 200ms
	// apart, and rounds are spaced by the retry backoff: a round takes at
	// least 300ms. Allow one round in progress.
	round := time.Duration(0)
	for i := range csivol.NodeCallAttempts - 1 {
		round += csivol.NodeCallRetryBase << i
	}
	if n, bound := len(db.unpublishAttempts()), csivol.NodeCallAttempts*(int(elapsed/round)+2); n > bound {
		t.Fatalf("%d NodeUnpublish attempts in %v, more than %d: a tight loop", n, elapsed, bound)
	}

	gomock.InOrder(
		d.Node.EXPECT().NodeUnpublishVolume(gomock.Any(), gomock.Any()).Return(&csi.NodeUnpublishVolumeResponse{}, nil),
		d.Node.EXPECT().NodeUnstageVolume(gomock.Any(), gomock.Any()).Return(&csi.NodeUnstageVolumeResponse{}, nil),
	)
	d.Start()
	waitFor(t, "released node-detached", func() bool { return h.has("release vol " + a.ID + " node-detached") })
}

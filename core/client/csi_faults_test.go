package client

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/core/structs"
	bridge "github.com/drover-org/drover/plugins/csi-bridge"
	"github.com/drover-org/drover/plugins/csi-bridge/csimock"
	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/csibridge/csibridgetest"
)

// Fault injection into the client's CSI hooks and controller executor:
// csi-test's gomock CSI servers on a real unix socket (csimock), reached
// through the real csi-bridge served over the plugin gRPC glue, so driver
// errors arrive with their kinds as in production.

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
	waitFor(t, "the volume's state dropped", func() bool { return ar == nil || ar.csiGet("data") == nil })
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
	waitFor(t, "a background retry", func() bool { return len(db.unpublishAttempts()) >= 2*csiNodeCallAttempts })
	if h.has("release vol " + a.ID + " node-detached") {
		t.Fatal("node-detached while the driver is gone")
	}
	elapsed := time.Since(start)
	// Each round makes csiNodeCallAttempts calls spaced 100ms, 200ms
	// apart, and rounds are spaced by the retry backoff: a round takes at
	// least 300ms. Allow one round in progress.
	round := time.Duration(0)
	for i := range csiNodeCallAttempts - 1 {
		round += csiNodeCallRetryBase << i
	}
	if n, bound := len(db.unpublishAttempts()), csiNodeCallAttempts*(int(elapsed/round)+2); n > bound {
		t.Fatalf("%d NodeUnpublish attempts in %v, more than %d: a tight loop", n, elapsed, bound)
	}

	gomock.InOrder(
		d.Node.EXPECT().NodeUnpublishVolume(gomock.Any(), gomock.Any()).Return(&csi.NodeUnpublishVolumeResponse{}, nil),
		d.Node.EXPECT().NodeUnstageVolume(gomock.Any(), gomock.Any()).Return(&csi.NodeUnstageVolumeResponse{}, nil),
	)
	d.Start()
	waitFor(t, "released node-detached", func() bool { return h.has("release vol " + a.ID + " node-detached") })
}

// A slow controller: a ControllerPublish that blocks past the op's
// deadline is reported with the unavailable kind naming the deadline, and
// the ops of that plugin run one at a time, in order: the next op reaches
// the driver only after the slow one has ended, never concurrently.
func TestCSIControllerSlowPublishSerialized(t *testing.T) {
	d := csimock.New(t)
	p := newCSIPlugins(realBridge(t), t.TempDir(), time.Hour, time.Hour, hclog.NewNullLogger(), func() {})
	p.instances["ctl-alloc/ctl"] = &csiInstance{allocID: "ctl-alloc", sock: d.Socket,
		cfg: &structs.TaskCSIPluginConfig{ID: "hp", Type: structs.CSIPluginTypeController},
		fp:  &csibridge.Fingerprint{Healthy: true, HasController: true}, healthy: true}

	var running, most atomic.Int32
	// A timed-out call's handler may still be unwinding in the driver
	// (its context ends a moment after the client's) when the next call
	// arrives: a call that finds another in the driver waits up to
	// unwind for it to leave before it counts as concurrent. A second
	// call the executor really ran at once would stay for the slow
	// call's whole timeout, so unwind is half of it: long enough for a
	// loaded machine, short enough to tell the two apart.
	const unwind = 500 * time.Millisecond
	enter := func() func() {
		for deadline := time.Now().Add(unwind); running.Load() > 0 && time.Now().Before(deadline); {
			runtime.Gosched()
		}
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return func() { running.Add(-1) }
	}
	slow := func(ctx context.Context, _ *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
		defer enter()()
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	var order []string
	var mu sync.Mutex
	seen := func(what string) { mu.Lock(); order = append(order, what); mu.Unlock() }
	gomock.InOrder(
		d.Controller.EXPECT().ControllerPublishVolume(gomock.Any(), gomock.Cond(func(r *csi.ControllerPublishVolumeRequest) bool {
			return r.GetVolumeId() == "ext-1"
		})).DoAndReturn(func(ctx context.Context, r *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
			seen("publish ext-1")
			return slow(ctx, r)
		}),
		d.Controller.EXPECT().ControllerUnpublishVolume(gomock.Any(), gomock.Any()).DoAndReturn(
			func(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
				defer enter()()
				seen("unpublish ext-2")
				return &csi.ControllerUnpublishVolumeResponse{}, nil
			}),
		d.Controller.EXPECT().ControllerPublishVolume(gomock.Any(), gomock.Cond(func(r *csi.ControllerPublishVolumeRequest) bool {
			return r.GetVolumeId() == "ext-3"
		})).DoAndReturn(func(ctx context.Context, r *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
			seen("publish ext-3")
			return slow(ctx, r)
		}),
	)
	publish := func(id, vol string) *structs.CSIControllerOp {
		return &structs.CSIControllerOp{ID: id, Kind: structs.CSIControllerOpPublish, PluginID: "hp", ExternalVolumeID: vol,
			ExternalNodeID: "csi-node-1", AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
	}
	ops := []*structs.CSIControllerOp{
		publish("op1", "ext-1"),
		{ID: "op2", Kind: structs.CSIControllerOpUnpublish, PluginID: "hp", ExternalVolumeID: "ext-2", ExternalNodeID: "csi-node-1"},
		publish("op3", "ext-3"),
	}
	const timeout = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	start := time.Now()
	res := runControllerOps(ctx, p, p.bridge, ops, timeout, nil)
	took := time.Since(start)

	for _, i := range []int{0, 2} {
		if r := res[i]; r.ID != ops[i].ID || r.ErrorKind != "unavailable" || !strings.Contains(r.Error, "deadline exceeded") {
			t.Errorf("slow publish result: %+v", r)
		}
	}
	if r := res[1]; r.ID != "op2" || r.ErrorKind != "" {
		t.Errorf("unpublish result: %+v", r)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d calls ran at once in the driver", m)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"publish ext-1", "unpublish ext-2", "publish ext-3"}; strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("driver saw %q, want %q", order, want)
	}
	if took < 2*timeout {
		t.Errorf("the two slow publishes took %v together, less than 2×%v: not one after the other", took, timeout)
	}
}

package bridge

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/mock/gomock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/plugins/csi-bridge/csimock"
	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/csibridge/csibridgetest"
)

// Fault injection with csi-test's gomock CSI servers on a real unix
// socket, through the real plugin gRPC glue (csibridgetest.Connect), so
// every error is checked by kind on the host side of the plugin boundary.

// unpublishReq matches a ControllerUnpublishVolume of ext-1 from
// csi-node-1 carrying the secret.
func unpublishReq() gomock.Matcher {
	return gomock.Cond(func(r *csi.ControllerUnpublishVolumeRequest) bool {
		return r.GetVolumeId() == "ext-1" && r.GetNodeId() == "csi-node-1" && r.GetSecrets()["token"] == "t0k"
	})
}

// TestMockControllerUnpublishFailsNTimes: a controller whose detach fails
// N times (Unavailable, then Aborted) and then succeeds. Every attempt
// reaches the driver exactly once and comes back with a retryable kind;
// the bridge itself never retries (so the pacing of retries is wholly
// the caller's, the volume watcher's backoff), and the attempt after the
// failures succeeds.
func TestMockControllerUnpublishFailsNTimes(t *testing.T) {
	d := csimock.New(t)
	host := csibridgetest.Connect(t, newTestBridge(t, Options{}))
	const n = 4
	var calls atomic.Int32
	count := func(context.Context, *csi.ControllerUnpublishVolumeRequest) { calls.Add(1) }
	gomock.InOrder(
		d.Controller.EXPECT().ControllerUnpublishVolume(gomock.Any(), unpublishReq()).Do(count).
			Return(nil, status.Error(codes.Unavailable, "backend unreachable")).Times(n-1),
		d.Controller.EXPECT().ControllerUnpublishVolume(gomock.Any(), unpublishReq()).Do(count).
			Return(nil, status.Error(codes.Aborted, "operation pending")),
		d.Controller.EXPECT().ControllerUnpublishVolume(gomock.Any(), unpublishReq()).Do(count).
			Return(&csi.ControllerUnpublishVolumeResponse{}, nil),
	)
	req := csibridge.ControllerUnpublishRequest{Socket: d.Socket, VolumeID: "ext-1", NodeID: "csi-node-1",
		Secrets: map[string]string{"token": "t0k"}}
	for i := 1; i <= n; i++ {
		err := host.ControllerUnpublish(testCtx(t), req)
		want := csibridge.ErrUnavailable
		if i == n {
			want = csibridge.ErrAborted
		}
		if !errors.Is(err, want) {
			t.Fatalf("attempt %d: %v, want %v", i, err, want)
		}
		if got := calls.Load(); got != int32(i) {
			t.Fatalf("after attempt %d the driver saw %d calls: the bridge retried", i, got)
		}
	}
	if err := host.ControllerUnpublish(testCtx(t), req); err != nil {
		t.Fatalf("attempt %d: %v", n+1, err)
	}
	if got := calls.Load(); got != n+1 {
		t.Fatalf("the driver saw %d calls, want %d", got, n+1)
	}
}

// TestMockNodeReleaseNotFound: NodeUnpublish and NodeUnstage of a volume
// the driver no longer knows answer NotFound, which crosses the plugin
// boundary as ErrNotFound (the kind a releasing caller counts as done)
// and as nothing retryable.
func TestMockNodeReleaseNotFound(t *testing.T) {
	d := csimock.New(t)
	host := csibridgetest.Connect(t, newTestBridge(t, Options{}))
	d.Node.EXPECT().NodeUnpublishVolume(gomock.Any(), gomock.Cond(func(r *csi.NodeUnpublishVolumeRequest) bool {
		return r.GetVolumeId() == "ext-1" && r.GetTargetPath() == "/t/ext-1"
	})).Return(nil, status.Error(codes.NotFound, "not published"))
	d.Node.EXPECT().NodeUnstageVolume(gomock.Any(), gomock.Cond(func(r *csi.NodeUnstageVolumeRequest) bool {
		return r.GetVolumeId() == "ext-1" && r.GetStagingTargetPath() == "/s/ext-1"
	})).Return(nil, status.Error(codes.NotFound, "not staged"))
	ctx := testCtx(t)
	errs := map[string]error{
		"NodeUnpublish": host.NodeUnpublish(ctx, csibridge.NodeUnpublishRequest{Socket: d.Socket, VolumeID: "ext-1", TargetPath: "/t/ext-1"}),
		"NodeUnstage":   host.NodeUnstage(ctx, csibridge.NodeUnstageRequest{Socket: d.Socket, VolumeID: "ext-1", StagingPath: "/s/ext-1"}),
	}
	for rpc, err := range errs {
		if !errors.Is(err, csibridge.ErrNotFound) {
			t.Errorf("%s = %v, want ErrNotFound", rpc, err)
		}
		for _, k := range []error{csibridge.ErrUnavailable, csibridge.ErrAborted, context.DeadlineExceeded} {
			if errors.Is(err, k) {
				t.Errorf("%s = %v, also %v", rpc, err, k)
			}
		}
	}
}

// TestMockSocketVanishes: the driver dies mid-life, with a call in flight,
// and its socket file goes. The call in flight and every later call fail
// with ErrUnavailable on the host side (well within their deadlines, and
// later calls without reaching any driver); nothing panics; the bridge
// forgets its connection. When the driver is back on the same path, the
// next unpublish reaches it at once, without waiting out gRPC's reconnect
// backoff. A socket file removed under a running driver is unavailable
// too.
func TestMockSocketVanishes(t *testing.T) {
	d := csimock.New(t)
	b := newTestBridge(t, Options{})
	host := csibridgetest.Connect(t, b)
	ctx := testCtx(t)
	req := csibridge.ControllerUnpublishRequest{Socket: d.Socket, VolumeID: "ext-1", NodeID: "csi-node-1",
		Secrets: map[string]string{"token": "t0k"}}

	d.Controller.EXPECT().ControllerUnpublishVolume(gomock.Any(), unpublishReq()).Return(&csi.ControllerUnpublishVolumeResponse{}, nil)
	if err := host.ControllerUnpublish(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := b.conns.size(); n != 1 {
		t.Fatalf("%d connections cached, want 1", n)
	}

	// A call in flight when the driver dies.
	entered := make(chan struct{})
	d.Node.EXPECT().NodeUnpublishVolume(gomock.Any(), gomock.Any()).DoAndReturn(
		func(ctx context.Context, _ *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
			close(entered)
			<-ctx.Done() // cancelled when the server stops
			return nil, status.FromContextError(ctx.Err()).Err()
		})
	inflight := make(chan error, 1)
	go func() {
		inflight <- host.NodeUnpublish(ctx, csibridge.NodeUnpublishRequest{Socket: d.Socket, VolumeID: "ext-1", TargetPath: "/t"})
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the call never reached the driver")
	}
	start := time.Now()
	d.Stop()
	select {
	case err := <-inflight:
		if !errors.Is(err, csibridge.ErrUnavailable) {
			t.Fatalf("the call in flight: %v, want ErrUnavailable", err)
		}
	case <-ctx.Done():
		t.Fatal("the call in flight never ended")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the call in flight took %v to fail", took)
	}

	// The driver is gone: no expectation is set, so a call reaching any
	// driver would fail the test.
	for i := range 3 {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := host.ControllerUnpublish(cctx, req)
		cancel()
		if !errors.Is(err, csibridge.ErrUnavailable) {
			t.Fatalf("call %d with the socket gone: %v, want ErrUnavailable", i+1, err)
		}
	}
	if n := b.conns.size(); n != 0 {
		t.Errorf("%d connections cached for a vanished driver", n)
	}

	// Back on the same path: the next unpublish reaches it.
	d.Start()
	d.Controller.EXPECT().ControllerUnpublishVolume(gomock.Any(), unpublishReq()).Return(&csi.ControllerUnpublishVolumeResponse{}, nil)
	start = time.Now()
	if err := host.ControllerUnpublish(ctx, req); err != nil {
		t.Fatalf("unpublish after the driver came back: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("reconnecting took %v", took)
	}

	// The socket file removed while the driver still runs: unavailable,
	// without calling the driver.
	if err := removeFile(d.Socket); err != nil {
		t.Fatal(err)
	}
	if err := host.ControllerUnpublish(ctx, req); !errors.Is(err, csibridge.ErrUnavailable) {
		t.Fatalf("unpublish with the socket file removed: %v, want ErrUnavailable", err)
	}
	if n := b.conns.size(); n != 0 {
		t.Errorf("%d connections cached for a removed socket", n)
	}
}

// TestMockSlowControllerPublish: a ControllerPublish that blocks past the
// caller's deadline fails with context.DeadlineExceeded on the host side
// (not later than the deadline allows), the driver sees its call's context
// end (the deadline crossed both gRPC hops), and the controller is usable
// again afterwards.
func TestMockSlowControllerPublish(t *testing.T) {
	d := csimock.New(t)
	host := csibridgetest.Connect(t, newTestBridge(t, Options{}))
	saw := make(chan error, 1)
	gomock.InOrder(
		d.Controller.EXPECT().ControllerPublishVolume(gomock.Any(), gomock.Any()).DoAndReturn(
			func(ctx context.Context, _ *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
				if _, ok := ctx.Deadline(); !ok {
					saw <- errors.New("the driver's call has no deadline")
					return nil, status.Error(codes.Internal, "no deadline")
				}
				<-ctx.Done()
				saw <- ctx.Err()
				return nil, status.FromContextError(ctx.Err()).Err()
			}),
		d.Controller.EXPECT().ControllerPublishVolume(gomock.Any(), gomock.Any()).
			Return(&csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"device": "/dev/vdb"}}, nil),
	)
	req := csibridge.ControllerPublishRequest{Socket: d.Socket, VolumeID: "ext-1", NodeID: "csi-node-1", Capability: fsCap}
	const deadline = 300 * time.Millisecond
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	_, err := host.ControllerPublish(ctx, req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ControllerPublish = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took < deadline || took > deadline+10*time.Second {
		t.Errorf("ControllerPublish failed after %v, deadline %v", took, deadline)
	}
	select {
	case err := <-saw:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Fatalf("the driver's call: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the driver's call never ended")
	}
	pc, err := host.ControllerPublish(testCtx(t), req)
	if err != nil || pc["device"] != "/dev/vdb" {
		t.Fatalf("ControllerPublish after the timeout = %v, %v", pc, err)
	}
}

func removeFile(path string) error { return os.Remove(path) }

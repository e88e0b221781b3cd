package csi

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
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/core/structs"
	bridge "github.com/drover-org/drover/plugins/csi-bridge"
	"github.com/drover-org/drover/plugins/csi-bridge/csimock"
	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/csibridge/csibridgetest"
)

// Fault injection into the controller executor: csi-test's gomock CSI
// servers on a real unix socket (csimock), reached through the real
// csi-bridge served over the plugin gRPC glue, so driver errors arrive
// with their kinds as in production.

// realBridge is the csi-bridge plugin, as the client sees it.
func realBridge(t *testing.T) csibridge.Bridge {
	t.Helper()
	b := bridge.New(nil, bridge.Options{})
	t.Cleanup(b.Close)
	return csibridgetest.Connect(t, b)
}

// A slow controller: a ControllerPublish that blocks past the op's
// deadline is reported with the unavailable kind naming the deadline, and
// the ops of that plugin run one at a time, in order: the next op reaches
// the driver only after the slow one has ended, never concurrently.
func TestCSIControllerSlowPublishSerialized(t *testing.T) {
	d := csimock.New(t)
	p := NewPlugins(realBridge(t), t.TempDir(), time.Hour, time.Hour, hclog.NewNullLogger(), func() {})
	p.instances["ctl-alloc/ctl"] = &instance{allocID: "ctl-alloc", sock: d.Socket,
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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

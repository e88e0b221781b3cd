package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
)

// fakeBridge answers Fingerprint as told; the other calls are not used by
// the plugin supervisor.
type fakeBridge struct {
	mu      sync.Mutex
	healthy bool
	sockets map[string]int
}

func (b *fakeBridge) set(healthy bool) {
	b.mu.Lock()
	b.healthy = healthy
	b.mu.Unlock()
}

func (b *fakeBridge) Fingerprint(_ context.Context, req csibridge.FingerprintRequest) (*csibridge.Fingerprint, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sockets == nil {
		b.sockets = map[string]int{}
	}
	b.sockets[req.Socket]++
	if !b.healthy {
		return nil, errors.Join(csibridge.ErrUnavailable, errors.New("dial "+req.Socket+": no such file"))
	}
	return &csibridge.Fingerprint{PluginName: "hostpath.csi.drover.dev", Version: "1.0", Healthy: true,
		HasController: true, HasNode: true, NodeID: "csi-node-1", MaxVolumes: 8,
		AccessibleTopology: map[string]string{"zone": "a"},
		ControllerCaps:     csibridge.ControllerCaps{CreateDelete: true, PublishUnpublish: true},
		NodeCaps:           csibridge.NodeCaps{StageUnstage: true}}, nil
}

var errNotUsed = errors.New("not used by the supervisor")

func (b *fakeBridge) ControllerPublish(context.Context, csibridge.ControllerPublishRequest) (map[string]string, error) {
	return nil, errNotUsed
}
func (b *fakeBridge) ControllerUnpublish(context.Context, csibridge.ControllerUnpublishRequest) error {
	return errNotUsed
}
func (b *fakeBridge) NodeStage(context.Context, csibridge.NodeStageRequest) error { return errNotUsed }
func (b *fakeBridge) NodeUnstage(context.Context, csibridge.NodeUnstageRequest) error {
	return errNotUsed
}
func (b *fakeBridge) NodePublish(context.Context, csibridge.NodePublishRequest) error {
	return errNotUsed
}
func (b *fakeBridge) NodeUnpublish(context.Context, csibridge.NodeUnpublishRequest) error {
	return errNotUsed
}
func (b *fakeBridge) CreateVolume(context.Context, csibridge.CreateVolumeRequest) (*csibridge.CreatedVolume, error) {
	return nil, errNotUsed
}
func (b *fakeBridge) DeleteVolume(context.Context, csibridge.DeleteVolumeRequest) error {
	return errNotUsed
}
func (b *fakeBridge) ValidateVolumeCapabilities(context.Context, csibridge.ValidateVolumeCapabilitiesRequest) (*csibridge.Validation, error) {
	return nil, errNotUsed
}

// A csi_plugin task gets its socket, is probed until healthy (reported
// unhealthy once its health_timeout passes), and its controller and node
// instances reach the server with the node; they follow its health and
// leave when the task stops.
func TestCSIPluginSupervisor(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	bridge := &fakeBridge{}
	stateDir := t.TempDir()
	c, err := New(Config{
		StateDir: stateDir, Server: srv, Drivers: fakeProvider{"fake": newFakeDriver(world)}, CSIBridge: bridge,
		UpdateBatchInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond, MaxRetryInterval: 20 * time.Millisecond,
		FingerprintInterval: -1, CSIProbeInterval: 5 * time.Millisecond, CSIHealthInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)

	task := fakeTaskSpec("plugin", `{}`)
	task.CSIPluginConfig = &structs.TaskCSIPluginConfig{ID: "hp", Type: structs.CSIPluginTypeMonolith, HealthTimeout: 30 * time.Millisecond}
	job := testJob("system", task)
	alloc := testAlloc("0123456789-plugin", c.NodeID(), job)
	srv.upsert(alloc)
	waitFor(t, "plugin task running", func() bool { return srv.clientStatus(alloc.ID) == structs.AllocClientStatusRunning })

	sock := filepath.Join(stateDir, "csi", "01234567-plugin", "csi.sock")
	if env := world.config(alloc.ID + "/plugin").Env["CSI_ENDPOINT"]; env != "unix://"+sock {
		t.Errorf("CSI_ENDPOINT = %q, want unix://%s", env, sock)
	}
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || !fi.IsDir() {
		t.Fatalf("socket dir: %v", err)
	}
	hasEvent := func(typ, sub string) bool {
		a := srv.alloc(alloc.ID)
		if a == nil || a.TaskStates["plugin"] == nil {
			return false
		}
		for _, ev := range a.TaskStates["plugin"].Events {
			if ev.Type == typ && strings.Contains(ev.DisplayMessage+ev.Message, sub) {
				return true
			}
		}
		return false
	}
	waitFor(t, "unhealthy event after health_timeout", func() bool {
		return hasEvent(structs.TaskPluginUnhealthy, "not healthy within health_timeout")
	})
	if n := srv.node(c.NodeID()); len(n.CSINodePlugins) != 0 {
		t.Fatalf("a never-healthy plugin was reported: %+v", n.CSINodePlugins)
	}

	bridge.set(true)
	waitFor(t, "healthy plugin on the node", func() bool {
		n := srv.node(c.NodeID())
		np, cp := n.CSINodePlugins["hp"], n.CSIControllerPlugins["hp"]
		return np != nil && np.Healthy && cp != nil && cp.Healthy
	})
	n := srv.node(c.NodeID())
	np, cp := n.CSINodePlugins["hp"], n.CSIControllerPlugins["hp"]
	if np.NodeInfo == nil || np.NodeInfo.ID != "csi-node-1" || np.NodeInfo.MaxVolumes != 8 || !np.NodeInfo.RequiresNodeStageVolume ||
		np.NodeInfo.AccessibleTopology.Segments["zone"] != "a" || np.ControllerInfo != nil || np.AllocID != alloc.ID {
		t.Errorf("node instance: %+v (node info %+v)", np, np.NodeInfo)
	}
	if cp.ControllerInfo == nil || !cp.ControllerInfo.SupportsAttachDetach || cp.NodeInfo != nil || !cp.RequiresControllerPlugin ||
		cp.Provider != "hostpath.csi.drover.dev" {
		t.Errorf("controller instance: %+v", cp)
	}
	if err := n.ValidateCSI(); err != nil {
		t.Errorf("the node's report does not validate: %v", err)
	}
	waitFor(t, "healthy event", func() bool { return hasEvent("Plugin became healthy", "") })

	bridge.set(false)
	waitFor(t, "unhealthy plugin on the node", func() bool {
		np := srv.node(c.NodeID()).CSINodePlugins["hp"]
		return np != nil && !np.Healthy
	})

	srv.setDesired(alloc.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "plugin gone from the node", func() bool {
		n := srv.node(c.NodeID())
		return len(n.CSINodePlugins) == 0 && len(n.CSIControllerPlugins) == 0
	})
	waitFor(t, "socket dir removed", func() bool {
		_, err := os.Stat(filepath.Dir(sock))
		return errors.Is(err, os.ErrNotExist)
	})
	bridge.mu.Lock()
	probes := bridge.sockets[sock]
	bridge.mu.Unlock()
	if probes < 3 {
		t.Errorf("the bridge was asked about %s %d times", sock, probes)
	}
}

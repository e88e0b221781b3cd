package hostpath_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	hostpath "github.com/drover-org/drover/examples/csi/hostpath/driver"
)

// newSharedDriver builds a driver of node on its own state dir and the
// volumes dir given.
func newSharedDriver(t *testing.T, node string, mode hostpath.Mode, stateDir, volumesDir string) *hostpath.Driver {
	t.Helper()
	d, err := hostpath.New(hostpath.Config{
		NodeID: node, Mode: mode, StateDir: stateDir, VolumesDir: volumesDir, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatalf("new driver of %s: %v", node, err)
	}
	return d
}

// With -volumes-dir, drivers of two nodes keep their own state files but
// share the volumes: a volume the controller of one creates is a directory
// in the shared dir, deleted from there; a volumes dir not named volumes is
// refused.
func TestSharedVolumesDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared", "volumes")
	a := newSharedDriver(t, "node-a", hostpath.ModeMonolith, filepath.Join(dir, "a"), shared)
	newSharedDriver(t, "node-b", hostpath.ModeNode, filepath.Join(dir, "b"), shared)
	id := mustCreate(t, a, "data").GetVolumeId()
	if _, err := os.Stat(filepath.Join(shared, id)); err != nil {
		t.Fatalf("created volume is not in the shared volumes dir: %v", err)
	}
	for _, p := range []string{filepath.Join(dir, "a", "volumes"), filepath.Join(dir, "b", "volumes")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v): with a volumes dir, the state dir holds no volumes", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "controller-state.json")); err != nil {
		t.Errorf("controller state not in its state dir: %v", err)
	}
	if _, err := a.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(shared, id)); !os.IsNotExist(err) {
		t.Fatalf("deleted volume still in the shared dir: %v", err)
	}
	if _, err := hostpath.New(hostpath.Config{NodeID: "n", StateDir: t.TempDir(), VolumesDir: filepath.Join(dir, "data")}); err == nil {
		t.Error("New accepted a volumes dir not named volumes")
	}
}

// Node services of two nodes on one shared volumes dir: what a writer
// publishes on one is read through a read-only publish on the other.
func TestSharedVolumesDirAcrossNodes(t *testing.T) {
	requireMounts(t)
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared", "volumes")
	a := newSharedDriver(t, "node-a", hostpath.ModeNode, filepath.Join(dir, "a"), shared)
	b := newSharedDriver(t, "node-b", hostpath.ModeNode, filepath.Join(dir, "b"), shared)
	if err := os.MkdirAll(filepath.Join(shared, "pre"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer assertNoVolumeMounts(t, dir)
	pa := nodePaths{staging: filepath.Join(dir, "a-staging"), target: filepath.Join(dir, "a-target")}
	stageAndPublish(t, a, "pre", pa, false, csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER)
	err := os.WriteFile(filepath.Join(pa.target, "f"), []byte("from a"), 0o600)
	unpublishAndUnstage(t, a, "pre", pa)
	if err != nil {
		t.Fatal(err)
	}
	pb := nodePaths{staging: filepath.Join(dir, "b-staging"), target: filepath.Join(dir, "b-target")}
	stageAndPublish(t, b, "pre", pb, true, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)
	defer unpublishAndUnstage(t, b, "pre", pb)
	if got, err := os.ReadFile(filepath.Join(pb.target, "f")); err != nil || string(got) != "from a" {
		t.Fatalf("node b reads %q, %v; want node a's file", got, err)
	}
}

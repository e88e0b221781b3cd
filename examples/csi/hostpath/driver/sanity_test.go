package hostpath_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"golang.org/x/sys/unix"
)

// TestSanity runs csi-test's sanity suite (v5.6.0) against the real driver,
// in monolith mode on a unix socket, with real bind mounts.
//
// Sanity cases that skip, and why (the driver does not claim the
// capability, so the suite does not exercise it):
//   - snapshots: ListSnapshots, GetSnapshot, DeleteSnapshot, CreateSnapshot,
//     "create volume from an existing source snapshot" and "... source
//     snapshot is not found": no CREATE_DELETE_SNAPSHOT / LIST_SNAPSHOTS /
//     GET_SNAPSHOT.
//   - cloning: "create volume from an existing source volume" and "... source
//     volume is not found": no CLONE_VOLUME.
//   - expansion: ExpandVolume (controller) and NodeExpandVolume: no
//     EXPAND_VOLUME.
//   - modify: ControllerModifyVolume and "create volume with a (n invalid)
//     volume attribute class": no MODIFY_VOLUME.
//   - health: ControllerGetVolumeHealth, ListVolumeHealth, NodeGetVolumeHealth,
//     NodeGetStorageHealth: no GET_VOLUME_HEALTH / LIST_VOLUME_HEALTH
//     capabilities.
//   - group snapshots: the GroupController service is not served.
//   - the ListVolumes pagination case is marked XIt (pending) by csi-test
//     itself as fragile.
func TestSanity(t *testing.T) {
	requireMounts(t)
	dir := t.TempDir()
	_, sock := startDriver(t, filepath.Join(dir, "state"), 4)

	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + sock
	cfg.TargetPath = filepath.Join(dir, "mount")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.TestNodeVolumeAttachLimit = true
	cfg.IdempotentCount = 3
	sanity.Test(t, cfg)

	assertNoVolumeMounts(t, dir)
}

// requireMounts skips a test that needs bind mounts where they cannot be
// made, saying why.
func requireMounts(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("bind mounts need Linux")
	}
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root: run the test as root to exercise the node service")
	}
	src, dst := t.TempDir(), t.TempDir()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mounts are not allowed here (%v): the node service needs CAP_SYS_ADMIN", err)
	}
	if err := unix.Unmount(dst, 0); err != nil {
		t.Fatalf("unmount probe mount: %v", err)
	}
}

// assertNoVolumeMounts fails when a mount under dir is left after a test.
func assertNoVolumeMounts(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, dir) {
			t.Errorf("mount left behind: %s", line)
		}
	}
}

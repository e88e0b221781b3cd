package hostpath_test

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
)

// TestSanity runs csi-test's sanity suite (v5.6.0) against the real driver,
// in monolith mode on a unix socket, with real bind mounts. Expected result:
// 52 passed, 0 failed, 1 pending, 50 skipped.
//
// The skipped specs, each because the driver does not claim the capability
// and so the suite skips it (see README.md):
//   - 21 snapshot specs (CreateSnapshot, DeleteSnapshot, GetSnapshot,
//     ListSnapshots, create volume from a source snapshot): no snapshots.
//   - 2 cloning specs (create volume from a source volume): no CLONE_VOLUME.
//   - 7 expansion specs (ExpandVolume, NodeExpandVolume): no EXPAND_VOLUME.
//   - 8 modify specs (ModifyVolume, volume attribute classes): no MODIFY_VOLUME.
//   - 6 health specs (Controller/Node volume health, NodeGetStorageHealth):
//     no health capabilities.
//   - 6 GroupController specs: the group controller service is not served.
//     (csi-test's AfterEach there calls Cleanup on a nil Resources after its
//     BeforeEach skipped, so Ginkgo prints "[PANICKED] in [AfterEach]"; the
//     specs still count as skipped.)
//
// The pending spec is ListVolumes "pagination should detect volumes added
// between pages...", which csi-test marks XIt as fragile;
// TestListVolumesPagination covers paging instead.
func TestSanity(t *testing.T) {
	requireMounts(t)
	if f := flag.Lookup("test.count"); f != nil && f.Value.String() != "1" {
		t.Skipf("Ginkgo, which runs the sanity suite, refuses go test -count=%s: run with -count=1", f.Value)
	}
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

package hostpath_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// One volume is staged at two paths at once, as a Nomad-compatible client
// does for a reader and a writer on one node (one staging path per usage):
// both are usable, the state survives a restart, and unstaging either
// leaves the other mounted.
func TestNodeStageTwoPaths(t *testing.T) {
	requireMounts(t)
	ctx := context.Background()
	mode := csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER
	for _, rwFirst := range []bool{true, false} {
		name := map[bool]string{true: "unstage rw first", false: "unstage ro first"}[rwFirst]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			d := newDriver(t, state)
			id := mustCreate(t, d, "two").GetVolumeId()
			defer assertNoVolumeMounts(t, dir)
			rw := nodePaths{staging: filepath.Join(dir, "staging-rw"), target: filepath.Join(dir, "target-rw")}
			ro := nodePaths{staging: filepath.Join(dir, "staging-ro"), target: filepath.Join(dir, "target-ro")}
			stageAndPublish(t, d, id, rw, false, mode)
			stageAndPublish(t, d, id, ro, true, mode)
			if err := os.WriteFile(filepath.Join(rw.target, "f"), []byte("x"), 0o600); err != nil {
				t.Fatalf("write through the read-write publish: %v", err)
			}
			if _, err := os.Stat(filepath.Join(ro.target, "f")); err != nil {
				t.Fatalf("the read-only publish does not see the file: %v", err)
			}
			if err := os.WriteFile(filepath.Join(ro.target, "g"), []byte("x"), 0o600); !errors.Is(err, unix.EROFS) {
				t.Fatalf("write through the read-only publish: %v, want EROFS", err)
			}
			// A restarted driver knows both stages: unstaging a staging
			// path that is still published is refused.
			d = newDriver(t, state)
			for _, p := range []nodePaths{rw, ro} {
				_, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: p.staging})
				wantCode(t, err, codes.FailedPrecondition)
			}
			first, second := rw, ro
			if !rwFirst {
				first, second = ro, rw
			}
			unpublishAndUnstage(t, d, id, first)
			if _, err := os.Stat(filepath.Join(second.target, "f")); err != nil {
				t.Fatalf("the other publish lost the volume when one was unstaged: %v", err)
			}
			unpublishAndUnstage(t, d, id, second)
			if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Fatalf("delete after both unstaged: %v", err)
			}
		})
	}
}

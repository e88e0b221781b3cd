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

	hostpath "github.com/drover-org/drover/examples/csi/hostpath/driver"
)

type nodePaths struct{ staging, target string }

func stageAndPublish(t *testing.T, d *hostpath.Driver, id string, p nodePaths, readOnly bool, mode csi.VolumeCapability_AccessMode_Mode) {
	t.Helper()
	ctx := context.Background()
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: id, StagingTargetPath: p.staging, VolumeCapability: mountCap(mode),
	}); err != nil {
		t.Fatalf("stage: %v", err)
	}
	if _, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: id, StagingTargetPath: p.staging, TargetPath: p.target, VolumeCapability: mountCap(mode), Readonly: readOnly,
	}); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func unpublishAndUnstage(t *testing.T, d *hostpath.Driver, id string, p nodePaths) {
	t.Helper()
	ctx := context.Background()
	if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: p.target}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: p.staging}); err != nil {
		t.Fatalf("unstage: %v", err)
	}
}

// A read-only publish is really read-only, while the volume stays writable
// through a read-write publish of the same staging mount.
func TestNodePublishReadOnly(t *testing.T) {
	requireMounts(t)
	dir := t.TempDir()
	d := newDriver(t, filepath.Join(dir, "state"))
	id := mustCreate(t, d, "ro").GetVolumeId()
	p := nodePaths{staging: filepath.Join(dir, "staging"), target: filepath.Join(dir, "ro-target")}
	stageAndPublish(t, d, id, p, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)
	defer assertNoVolumeMounts(t, dir)
	defer unpublishAndUnstage(t, d, id, p)

	err := os.WriteFile(filepath.Join(p.target, "f"), []byte("x"), 0o600)
	if !errors.Is(err, unix.EROFS) {
		t.Fatalf("write to read-only publish: %v, want EROFS", err)
	}
	rw := filepath.Join(dir, "rw-target")
	if _, err := d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: id, StagingTargetPath: p.staging, TargetPath: rw,
		VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER),
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := d.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: rw}); err != nil {
			t.Error(err)
		}
	}()
	if err := os.WriteFile(filepath.Join(rw, "f"), []byte("x"), 0o600); err != nil {
		t.Fatalf("write to read-write publish: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.target, "f")); err != nil {
		t.Fatalf("file written through one publish is not seen through the other: %v", err)
	}
	// Asking for the read-only target again as read-write is a conflict.
	_, err = d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: id, StagingTargetPath: p.staging, TargetPath: p.target,
		VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER),
	})
	wantCode(t, err, codes.AlreadyExists)
}

// A restarted node service still knows what it staged and published, and
// a volume mounted on the host cannot be deleted even with no controller
// publish recorded.
func TestNodeStateSurvivesRestart(t *testing.T) {
	requireMounts(t)
	ctx := context.Background()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	d1 := newDriver(t, state)
	id := mustCreate(t, d1, "keep").GetVolumeId()
	p := nodePaths{staging: filepath.Join(dir, "staging"), target: filepath.Join(dir, "target")}
	stageAndPublish(t, d1, id, p, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	defer assertNoVolumeMounts(t, dir)

	d2 := newDriver(t, state)
	_, err := d2.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	wantCode(t, err, codes.FailedPrecondition)
	// Unstaging while published is refused: the restarted driver knows the publish.
	_, err = d2.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: p.staging})
	wantCode(t, err, codes.FailedPrecondition)
	// Publishing again is idempotent.
	if _, err := d2.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: id, StagingTargetPath: p.staging, TargetPath: p.target,
		VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
	}); err != nil {
		t.Fatalf("publish again after restart: %v", err)
	}
	unpublishAndUnstage(t, d2, id, p)
	if _, err := os.Stat(p.target); !os.IsNotExist(err) {
		t.Fatalf("target path still there after unpublish: %v", err)
	}
	// Both are idempotent.
	unpublishAndUnstage(t, d2, id, p)
	if _, err := d2.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatalf("delete after unpublish and unstage: %v", err)
	}
	_, err = d2.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: p.target})
	wantCode(t, err, codes.NotFound)
}

// NodeUnpublishVolume for one volume never unmounts another volume that
// happens to be mounted at the path given.
func TestNodeUnpublishLeavesOtherVolume(t *testing.T) {
	requireMounts(t)
	ctx := context.Background()
	dir := t.TempDir()
	d := newDriver(t, filepath.Join(dir, "state"))
	a, b := mustCreate(t, d, "a").GetVolumeId(), mustCreate(t, d, "b").GetVolumeId()
	p := nodePaths{staging: filepath.Join(dir, "staging"), target: filepath.Join(dir, "target")}
	stageAndPublish(t, d, a, p, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	defer assertNoVolumeMounts(t, dir)
	defer unpublishAndUnstage(t, d, a, p)

	if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: b, TargetPath: p.target}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: b, StagingTargetPath: p.staging}); err != nil {
		t.Fatal(err)
	}
	stats, err := d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: a, VolumePath: p.target})
	if err != nil {
		t.Fatalf("volume a no longer published after calls for volume b: %v", err)
	}
	if len(stats.GetUsage()) != 2 || stats.GetUsage()[0].GetTotal() <= 0 {
		t.Fatalf("stats = %v, want bytes and inodes", stats.GetUsage())
	}
	// Staging b where a is staged is refused.
	_, err = d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: b, StagingTargetPath: p.staging, VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
	})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestNodeValidation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := newDriver(t, filepath.Join(dir, "state"))
	id := mustCreate(t, d, "v").GetVolumeId()
	swr := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	staging, target := filepath.Join(dir, "s"), filepath.Join(dir, "t")
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"publish relative target", func() error {
			_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: "rel", StagingTargetPath: staging, VolumeCapability: swr})
			return err
		}, codes.InvalidArgument},
		{"publish without staging path", func() error {
			_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: swr})
			return err
		}, codes.InvalidArgument},
		{"publish unknown volume", func() error {
			_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "nope", TargetPath: target, StagingTargetPath: staging, VolumeCapability: swr})
			return err
		}, codes.NotFound},
		{"publish unstaged volume", func() error {
			_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging, VolumeCapability: swr})
			return err
		}, codes.FailedPrecondition},
		{"publish unsupported mount flag", func() error {
			c := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
			c.GetMount().MountFlags = []string{"discard"}
			_, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, StagingTargetPath: staging, VolumeCapability: c})
			return err
		}, codes.InvalidArgument},
		{"stage unknown volume", func() error {
			_, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "nope", StagingTargetPath: staging, VolumeCapability: swr})
			return err
		}, codes.NotFound},
		{"unstage unknown volume", func() error {
			_, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "nope", StagingTargetPath: staging})
			return err
		}, codes.NotFound},
		{"unpublish unknown volume", func() error {
			_, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "nope", TargetPath: target})
			return err
		}, codes.NotFound},
		{"unpublish without target", func() error {
			_, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id})
			return err
		}, codes.InvalidArgument},
		{"stats of unknown volume", func() error {
			_, err := d.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "nope", VolumePath: target})
			return err
		}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), tc.want) })
	}
	// Unpublishing a volume that is not published is done already.
	if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatalf("unpublish of a volume not published: %v", err)
	}
}

package hostpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxStackedUnmounts bounds how many mounts of the same volume NodeUnpublish
// and NodeUnstage peel off one path (a repeated bind stacks them).
const maxStackedUnmounts = 8

var errNoNode = status.Error(codes.Unimplemented, "this driver process runs in controller mode: the node service is not served")

// NodeGetCapabilities lists the node RPCs served.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	if d.node == nil {
		return nil, errNoNode
	}
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		caps = append(caps, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// NodeGetInfo names this node, its attach limit and its topology.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if d.node == nil {
		return nil, errNoNode
	}
	return &csi.NodeGetInfoResponse{
		NodeId:             d.cfg.NodeID,
		MaxVolumesPerNode:  d.cfg.MaxVolumesPerNode,
		AccessibleTopology: d.topology(),
	}, nil
}

// requirePath validates a path argument: present and absolute.
func requirePath(what, p string) (string, error) {
	if p == "" {
		return "", status.Errorf(codes.InvalidArgument, "%s is required", what)
	}
	if !filepath.IsAbs(p) {
		return "", status.Errorf(codes.InvalidArgument, "%s %q must be absolute", what, p)
	}
	return filepath.Clean(p), nil
}

// NodeStageVolume bind-mounts the volume's directory onto the staging path.
func (d *Driver) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if d.node == nil {
		return nil, errNoNode
	}
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	sp, err := requirePath("staging target path", req.GetStagingTargetPath())
	if err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if !d.volumeDirExists(id) {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist on node %s", id, d.cfg.NodeID)
	}
	// A volume may be staged at several paths at once: a Nomad-compatible
	// client stages once per usage (read-only or read-write, access and
	// attachment mode), so a reader and a writer of one volume on one node
	// each have their own staging path. Each is a bind of the volume.
	s := d.node
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := stageRecord{VolumeID: id, StagingPath: sp, AccessMode: req.GetVolumeCapability().GetAccessMode().GetMode().String()}
	m, mounted, err := mountAt(sp)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted {
		if m.volumeID() != id {
			return nil, status.Errorf(codes.FailedPrecondition, "staging target path %s already has another mount (of %s)", sp, m.Root)
		}
		return &csi.NodeStageVolumeResponse{}, d.recordStage(rec)
	}
	if err := os.MkdirAll(sp, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "create staging target path: %v", err)
	}
	if err := bindMount(d.volumePath(id), sp, 0); err != nil {
		return nil, mountError(err)
	}
	if err := d.recordStage(rec); err != nil {
		_ = unmount(sp)
		return nil, err
	}
	d.logger.Info("volume staged", "volume_id", id, "staging_path", sp)
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *Driver) recordStage(rec stageRecord) error {
	s := d.node
	old, had := s.st.Stages[rec.StagingPath]
	if had && old == rec {
		return nil
	}
	s.st.Stages[rec.StagingPath] = rec
	if err := s.save(); err != nil {
		if had {
			s.st.Stages[rec.StagingPath] = old
		} else {
			delete(s.st.Stages, rec.StagingPath)
		}
		return status.Errorf(codes.Internal, "record stage of volume %s: %v", rec.VolumeID, err)
	}
	return nil
}

// NodeUnstageVolume unmounts the staging path. A volume still published from
// it is refused: the CO must unpublish first.
func (d *Driver) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if d.node == nil {
		return nil, errNoNode
	}
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	sp, err := requirePath("staging target path", req.GetStagingTargetPath())
	if err != nil {
		return nil, err
	}
	s := d.node
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, staged := s.st.Stages[sp]
	staged = staged && rec.VolumeID == id
	if !staged && len(s.stagesOf(id)) == 0 && !d.volumeDirExists(id) {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist on node %s", id, d.cfg.NodeID)
	}
	for _, p := range s.publishesOf(id) {
		if p.StagingPath == sp {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still published at %s: unpublish it first", id, p.TargetPath)
		}
	}
	if err := unmountVolume(id, sp); err != nil {
		return nil, err
	}
	if staged {
		delete(s.st.Stages, sp)
		if err := s.save(); err != nil {
			s.st.Stages[sp] = rec
			return nil, status.Errorf(codes.Internal, "record unstage of volume %s: %v", id, err)
		}
	}
	d.logger.Info("volume unstaged", "volume_id", id, "staging_path", sp)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// unmountVolume peels the volume's mounts off path, leaving any other mount
// there alone.
func unmountVolume(id, path string) error {
	_, err := unmountVolumeCount(id, path)
	return err
}

// unmountVolumeCount is unmountVolume that also says how many mounts it
// took off.
func unmountVolumeCount(id, path string) (int, error) {
	n := 0
	for ; n < maxStackedUnmounts; n++ {
		m, mounted, err := mountAt(path)
		if err != nil {
			return n, status.Error(codes.Internal, err.Error())
		}
		if !mounted || m.volumeID() != id {
			return n, nil
		}
		if err := unmount(path); err != nil {
			return n, mountError(err)
		}
	}
	return n, status.Errorf(codes.Internal, "volume %s is still mounted at %s after %d unmounts", id, path, n)
}

// NodePublishVolume bind-mounts the staging path onto the target path,
// read-only when the request or the access mode asks for it.
func (d *Driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if d.node == nil {
		return nil, errNoNode
	}
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	target, err := requirePath("target path", req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	c := req.GetVolumeCapability()
	if err := checkCapability(c); err != nil {
		return nil, err
	}
	sp, err := requirePath("staging target path", req.GetStagingTargetPath())
	if err != nil {
		return nil, err
	}
	mode := c.GetAccessMode().GetMode()
	readOnly := req.GetReadonly() || readerOnly(mode)
	flags, err := mountFlags(c.GetMount().GetMountFlags(), readOnly)
	if err != nil {
		if errors.Is(err, errUnsupported) {
			return nil, mountError(err)
		}
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if !d.volumeDirExists(id) {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist on node %s", id, d.cfg.NodeID)
	}

	s := d.node
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok, err := mountAt(sp); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if !ok || m.volumeID() != id {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s: stage it first", id, sp)
	}
	rec := nodePublishRecord{VolumeID: id, TargetPath: target, StagingPath: sp, ReadOnly: readOnly, AccessMode: mode.String()}
	tm, mounted, err := mountAt(target)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted {
		if tm.volumeID() != id {
			return nil, status.Errorf(codes.FailedPrecondition, "target path %s already has another mount (of %s)", target, tm.Root)
		}
		wasReadOnly := tm.readOnly()
		if old, ok := s.st.Publishes[target]; ok {
			wasReadOnly = old.ReadOnly
		}
		if wasReadOnly != readOnly {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is already published at %s with readonly=%t", id, target, wasReadOnly)
		}
		return &csi.NodePublishVolumeResponse{}, d.recordNodePublish(rec)
	}
	for _, p := range s.publishesOf(id) {
		if p.TargetPath == target {
			continue
		}
		if mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER ||
			modeOf(p.AccessMode) == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
			return nil, status.Errorf(codes.FailedPrecondition,
				"volume %s is already published at %s and access mode SINGLE_NODE_SINGLE_WRITER allows one target only", id, p.TargetPath)
		}
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "create target path: %v", err)
	}
	if err := bindMount(sp, target, flags); err != nil {
		return nil, mountError(err)
	}
	if err := d.recordNodePublish(rec); err != nil {
		_ = unmount(target)
		return nil, err
	}
	d.logger.Info("volume published on node", "volume_id", id, "target_path", target, "readonly", readOnly)
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *Driver) recordNodePublish(rec nodePublishRecord) error {
	s := d.node
	old, had := s.st.Publishes[rec.TargetPath]
	if had && old == rec {
		return nil
	}
	s.st.Publishes[rec.TargetPath] = rec
	if err := s.save(); err != nil {
		if had {
			s.st.Publishes[rec.TargetPath] = old
		} else {
			delete(s.st.Publishes, rec.TargetPath)
		}
		return status.Errorf(codes.Internal, "record publish of volume %s at %s: %v", rec.VolumeID, rec.TargetPath, err)
	}
	return nil
}

// NodeUnpublishVolume unmounts the target path and removes it. It is
// idempotent; a target that holds another volume is left alone, since this
// volume is not published there.
func (d *Driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if d.node == nil {
		return nil, errNoNode
	}
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	target, err := requirePath("target path", req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	s := d.node
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, hasRec := s.st.Publishes[target]
	if !d.volumeDirExists(id) && len(s.publishesOf(id)) == 0 {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist on node %s", id, d.cfg.NodeID)
	}
	if hasRec && rec.VolumeID != id {
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	m, mounted, err := mountAt(target)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted && m.volumeID() != id {
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	n, err := unmountVolumeCount(id, target)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) && (hasRec || n > 0) {
		return nil, status.Errorf(codes.Internal, "remove target path: %v", err)
	}
	if hasRec {
		delete(s.st.Publishes, target)
		if err := s.save(); err != nil {
			s.st.Publishes[target] = rec
			return nil, status.Errorf(codes.Internal, "record unpublish of volume %s at %s: %v", id, target, err)
		}
	}
	d.logger.Info("volume unpublished on node", "volume_id", id, "target_path", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the usage of the file system behind a
// published or staged volume. Volumes have no quota, so these are the
// numbers of the file system that holds the state directory.
func (d *Driver) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if d.node == nil {
		return nil, errNoNode
	}
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if req.GetVolumePath() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume path is required")
	}
	if !d.volumeDirExists(id) {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist on node %s", id, d.cfg.NodeID)
	}
	path := filepath.Clean(req.GetVolumePath())
	m, mounted, err := mountAt(path)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !mounted || m.volumeID() != id {
		return nil, status.Errorf(codes.NotFound, "volume %s is not mounted at %s", id, path)
	}
	u, err := fsStats(path)
	if err != nil {
		return nil, mountError(err)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: u.totalBytes, Available: u.availableBytes, Used: u.usedBytes},
		{Unit: csi.VolumeUsage_INODES, Total: u.totalInodes, Available: u.freeInodes, Used: u.usedInodes},
	}}, nil
}

// mountError turns a mount helper's error into a status: Unimplemented off
// Linux, Internal otherwise.
func mountError(err error) error {
	if errors.Is(err, errUnsupported) {
		return status.Error(codes.Unimplemented, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

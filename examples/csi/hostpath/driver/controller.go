package hostpath

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// listTokenPrefix marks the ListVolumes tokens this driver hands out. A token
// is the last volume ID of the previous page: listing goes on with the IDs
// sorted after it, so a token stays valid when its volume is deleted.
const listTokenPrefix = "after:"

// errNoController answers controller RPCs in node mode.
var errNoController = status.Error(codes.Unimplemented, "this driver process runs in node mode: the controller service is not served")

func (d *Driver) controllerCaps() []csi.ControllerServiceCapability_RPC_Type {
	return []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
		csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
	}
}

// ControllerGetCapabilities lists the controller RPCs served.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	var caps []*csi.ControllerServiceCapability
	for _, t := range d.controllerCaps() {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// CreateVolume makes a directory for the volume. It is idempotent by name: a
// second call with a capacity range the volume satisfies returns the same
// volume; one it does not satisfy is AlreadyExists.
func (d *Driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources (snapshots, clones) are not supported")
	}
	if req.GetMutableParameters() != nil {
		return nil, status.Error(codes.InvalidArgument, "mutable parameters are not supported")
	}
	capacity, err := capacityFor(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if !d.topologyAllowed(req.GetAccessibilityRequirements()) {
		return nil, status.Errorf(codes.ResourceExhausted,
			"accessibility requirements exclude this driver's node: volumes can only be created with topology %s=%s", TopologyKey, d.cfg.NodeID)
	}

	s := d.ctrl
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.byName(req.GetName()); v != nil {
		if !capacityFits(v.CapacityBytes, req.GetCapacityRange()) {
			return nil, status.Errorf(codes.AlreadyExists,
				"volume %q already exists as %s with capacity %d bytes, which the requested range does not allow", v.Name, v.ID, v.CapacityBytes)
		}
		return &csi.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
	}
	v := &volumeRecord{
		ID:            uuid.NewString(),
		Name:          req.GetName(),
		CapacityBytes: capacity,
		Parameters:    req.GetParameters(),
		CreatedAt:     time.Now().UTC(),
	}
	dir := d.volumePath(v.ID)
	if err := os.Mkdir(dir, 0o777); err != nil {
		return nil, status.Errorf(codes.Internal, "create volume directory %s: %v", dir, err)
	}
	// Workloads may run as any user: the volume is theirs, not root's.
	if err := os.Chmod(dir, 0o777); err != nil {
		_ = os.Remove(dir)
		return nil, status.Errorf(codes.Internal, "chmod volume directory %s: %v", dir, err)
	}
	s.st.Volumes[v.ID] = v
	if err := s.save(); err != nil {
		delete(s.st.Volumes, v.ID)
		_ = os.Remove(dir)
		return nil, status.Errorf(codes.Internal, "record volume %q: %v", v.Name, err)
	}
	d.logger.Info("volume created", "volume_id", v.ID, "name", v.Name, "capacity_bytes", v.CapacityBytes)
	return &csi.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
}

// capacityFor validates a capacity range and picks the volume's capacity:
// the required bytes, else the limit, else 0 (unknown: hostpath directories
// have no quota, so capacity is advisory).
func capacityFor(r *csi.CapacityRange) (int64, error) {
	if r == nil {
		return 0, nil
	}
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || lim < 0 {
		return 0, status.Errorf(codes.OutOfRange, "capacity range has negative bytes (required %d, limit %d)", req, lim)
	}
	if lim > 0 && req > lim {
		return 0, status.Errorf(codes.OutOfRange, "required bytes %d exceed the limit %d", req, lim)
	}
	if req > 0 {
		return req, nil
	}
	return lim, nil
}

// capacityFits reports whether an existing volume's capacity satisfies a
// requested range, for CreateVolume's idempotency.
func capacityFits(capacity int64, r *csi.CapacityRange) bool {
	if r == nil {
		return true
	}
	if r.GetRequiredBytes() > 0 && capacity < r.GetRequiredBytes() {
		return false
	}
	if r.GetLimitBytes() > 0 && capacity > r.GetLimitBytes() {
		return false
	}
	return true
}

// topologyAllowed reports whether the requirements admit this node, the only
// place the controller can create a volume.
func (d *Driver) topologyAllowed(tr *csi.TopologyRequirement) bool {
	if tr == nil || (len(tr.GetRequisite()) == 0 && len(tr.GetPreferred()) == 0) {
		return true
	}
	list := tr.GetRequisite()
	if len(list) == 0 {
		list = tr.GetPreferred()
	}
	for _, t := range list {
		if d.topologyMatches(t) {
			return true
		}
	}
	return false
}

// topologyMatches reports whether t names this node; a segment with another
// key is not something this node has, so it does not match.
func (d *Driver) topologyMatches(t *csi.Topology) bool {
	for k, v := range t.GetSegments() {
		if k != TopologyKey || v != d.cfg.NodeID {
			return false
		}
	}
	return len(t.GetSegments()) > 0
}

func (d *Driver) csiVolume(v *volumeRecord) *csi.Volume {
	return &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.CapacityBytes,
		VolumeContext:      map[string]string{"name": v.Name},
		AccessibleTopology: []*csi.Topology{d.topology()},
	}
}

// DeleteVolume removes the volume's directory and record. An unknown volume
// is already deleted; a volume still published to a node, or still mounted
// on this host, is refused with FailedPrecondition rather than pulled out
// from under its workload.
func (d *Driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	s := d.ctrl
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.st.Volumes[id]
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if len(v.Publishes) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition,
			"volume %s is still published to node(s) %s: unpublish it first", id, strings.Join(sortedKeys(v.Publishes), ", "))
	}
	mounts, err := volumeMounts(id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "check mounts of volume %s: %v", id, err)
	}
	if len(mounts) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition,
			"volume %s is still mounted at %s: unstage and unpublish it first", id, strings.Join(mounts, ", "))
	}
	if err := os.RemoveAll(d.volumePath(id)); err != nil {
		return nil, status.Errorf(codes.Internal, "remove volume directory: %v", err)
	}
	delete(s.st.Volumes, id)
	if err := s.save(); err != nil {
		s.st.Volumes[id] = v
		return nil, status.Errorf(codes.Internal, "record deletion of volume %s: %v", id, err)
	}
	d.logger.Info("volume deleted", "volume_id", id, "name", v.Name)
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerPublishVolume records that a volume may be used on a node. For a
// hostpath volume there is nothing to attach, but the record is what makes
// single-node access modes and DeleteVolume's refusal hold, and it survives
// restarts.
func (d *Driver) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	id, node := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if node == "" {
		return nil, status.Error(codes.InvalidArgument, "node ID is required")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()

	s := d.ctrl
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.st.Volumes[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	}
	if !d.known[node] {
		return nil, status.Errorf(codes.NotFound, "node %q is not known to this controller (known: %s)", node, strings.Join(d.knownNodes(), ", "))
	}
	pctx := map[string]string{"published_by": "hostpath", "node_id": node}
	if p, ok := v.Publishes[node]; ok {
		if p.ReadOnly != req.GetReadonly() || p.AccessMode != mode.String() {
			return nil, status.Errorf(codes.AlreadyExists,
				"volume %s is already published to node %s with readonly=%t and access mode %s", id, node, p.ReadOnly, p.AccessMode)
		}
		return &csi.ControllerPublishVolumeResponse{PublishContext: pctx}, nil
	}
	for other, p := range v.Publishes {
		if singleNode(mode) || singleNode(modeOf(p.AccessMode)) {
			return nil, status.Errorf(codes.FailedPrecondition,
				"volume %s is already published to node %s with access mode %s; access mode %s does not allow a second node",
				id, other, p.AccessMode, mode)
		}
	}
	if limit := d.cfg.MaxVolumesPerNode; limit > 0 {
		var n int64
		for _, o := range s.st.Volumes {
			if _, ok := o.Publishes[node]; ok {
				n++
			}
		}
		if n >= limit {
			return nil, status.Errorf(codes.ResourceExhausted, "node %s already has %d volumes published, the most it takes", node, n)
		}
	}
	if v.Publishes == nil {
		v.Publishes = map[string]publishRecord{}
	}
	v.Publishes[node] = publishRecord{NodeID: node, ReadOnly: req.GetReadonly(), AccessMode: mode.String(), At: time.Now().UTC()}
	if err := s.save(); err != nil {
		delete(v.Publishes, node)
		return nil, status.Errorf(codes.Internal, "record publish of volume %s to node %s: %v", id, node, err)
	}
	d.logger.Info("volume published", "volume_id", id, "node_id", node, "readonly", req.GetReadonly(), "access_mode", mode)
	return &csi.ControllerPublishVolumeResponse{PublishContext: pctx}, nil
}

// ControllerUnpublishVolume removes the publish record. An unknown volume or
// a node it is not published to counts as already unpublished, as the spec
// allows; an empty node ID unpublishes from every node.
func (d *Driver) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	id, node := req.GetVolumeId(), req.GetNodeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	s := d.ctrl
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.st.Volumes[id]
	if !ok || len(v.Publishes) == 0 {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	old := v.Publishes
	if node == "" {
		v.Publishes = nil
	} else {
		if _, ok := v.Publishes[node]; !ok {
			return &csi.ControllerUnpublishVolumeResponse{}, nil
		}
		v.Publishes = make(map[string]publishRecord, len(old))
		for k, p := range old {
			if k != node {
				v.Publishes[k] = p
			}
		}
	}
	if err := s.save(); err != nil {
		v.Publishes = old
		return nil, status.Errorf(codes.Internal, "record unpublish of volume %s: %v", id, err)
	}
	d.logger.Info("volume unpublished", "volume_id", id, "node_id", node)
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms capabilities the driver can serve and
// says which one it cannot otherwise.
func (d *Driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	d.ctrl.mu.Lock()
	_, ok := d.ctrl.st.Volumes[req.GetVolumeId()]
	d.ctrl.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", req.GetVolumeId())
	}
	for _, c := range req.GetVolumeCapabilities() {
		if msg := capabilityProblem(c); msg != "" {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: msg}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// ListVolumes pages through the volumes in volume ID order.
func (d *Driver) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_entries is %d: must not be negative", req.GetMaxEntries())
	}
	after := ""
	if tok := req.GetStartingToken(); tok != "" {
		var ok bool
		if after, ok = strings.CutPrefix(tok, listTokenPrefix); !ok || after == "" {
			return nil, status.Errorf(codes.Aborted, "starting token %q was not issued by this driver", tok)
		}
	}
	s := d.ctrl
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := sortedKeys(s.st.Volumes)
	start, _ := slices.BinarySearch(ids, after)
	if start < len(ids) && ids[start] == after {
		start++
	}
	ids = ids[start:]
	resp := &csi.ListVolumesResponse{}
	if limit := int(req.GetMaxEntries()); limit > 0 && len(ids) > limit {
		ids = ids[:limit]
		resp.NextToken = listTokenPrefix + ids[limit-1]
	}
	for _, id := range ids {
		v := s.st.Volumes[id]
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: d.csiVolume(v),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: sortedKeys(v.Publishes)},
		})
	}
	return resp, nil
}

// ControllerGetVolume reports one volume and the nodes it is published to.
func (d *Driver) ControllerGetVolume(_ context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	s := d.ctrl
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.st.Volumes[req.GetVolumeId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", req.GetVolumeId())
	}
	return &csi.ControllerGetVolumeResponse{
		Volume: d.csiVolume(v),
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{PublishedNodeIds: sortedKeys(v.Publishes)},
	}, nil
}

// GetCapacity reports the free space of the file system that holds the
// state directory: the room new volumes share.
func (d *Driver) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if d.ctrl == nil {
		return nil, errNoController
	}
	for _, c := range req.GetVolumeCapabilities() {
		if capabilityProblem(c) != "" {
			return &csi.GetCapacityResponse{}, nil
		}
	}
	if t := req.GetAccessibleTopology(); t != nil && !d.topologyMatches(t) {
		return &csi.GetCapacityResponse{}, nil
	}
	fs, err := fsStats(d.cfg.StateDir)
	if errors.Is(err, errUnsupported) {
		return nil, status.Error(codes.Unimplemented, err.Error())
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "stat state directory: %v", err)
	}
	return &csi.GetCapacityResponse{AvailableCapacity: fs.availableBytes}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

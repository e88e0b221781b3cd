// Package csibridge is the CSI bridge plugin kind: the Bridge interface a
// bridge implements, the go-plugin glue that carries it over gRPC, and
// Serve, which a bridge binary's main calls.
//
// A bridge runs next to each client agent and speaks the CSI gRPC spec to
// CSI driver unix sockets on the client's behalf. It is stateless: every
// request names the driver's socket, mount state lives in the kernel and
// claim state in Raft, so the agent may restart or replace the bridge at
// any moment without losing anything.
//
// The types here are drover's, not the CSI spec's protobufs: a caller
// never imports the spec, and a bridge maps them onto whichever spec
// version it speaks. The wire messages are those of
// sdk/proto/csibridge.proto (package csibridgepb).
package csibridge

import "context"

// Bridge is what a CSI bridge plugin implements and what the client agent
// calls. Every request names the driver's unix socket (Socket, an absolute
// path); the bridge dials it for the call.
//
// Every method honours ctx: a call whose deadline passes returns an error
// matching context.DeadlineExceeded. An implementation gives a call
// without a deadline a default one, so a hung driver cannot hang the
// client.
//
// Errors a caller acts on are the sentinels of this package (see
// errors.go), wrapped with context and compared with errors.Is; they
// survive the gRPC boundary. A bridge maps the driver's CSI status codes
// onto them. A bridge never retries a driver call: ErrUnavailable and
// ErrAborted tell the caller to retry later, and release calls
// (ControllerUnpublish, NodeUnstage, NodeUnpublish, DeleteVolume) that
// fail with ErrNotFound are already done. Errors and logs never carry
// secrets.
//
// Implementations must not keep or mutate the requests passed in nor the
// results after returning them.
type Bridge interface {
	// Fingerprint asks the driver who it is, whether it is ready and what
	// it can do. A driver that answers but is not ready is reported with
	// Healthy false and a description, not as an error.
	Fingerprint(ctx context.Context, req FingerprintRequest) (*Fingerprint, error)

	// ControllerPublish attaches a volume to a node and returns the
	// publish context the node RPCs need.
	ControllerPublish(ctx context.Context, req ControllerPublishRequest) (map[string]string, error)
	// ControllerUnpublish detaches a volume from a node.
	ControllerUnpublish(ctx context.Context, req ControllerUnpublishRequest) error

	// NodeStage stages a volume on this node at StagingPath.
	NodeStage(ctx context.Context, req NodeStageRequest) error
	// NodeUnstage undoes NodeStage.
	NodeUnstage(ctx context.Context, req NodeUnstageRequest) error
	// NodePublish makes a volume available at TargetPath.
	NodePublish(ctx context.Context, req NodePublishRequest) error
	// NodeUnpublish undoes NodePublish.
	NodeUnpublish(ctx context.Context, req NodeUnpublishRequest) error

	// CreateVolume provisions a volume. The driver makes it idempotent on
	// Name.
	CreateVolume(ctx context.Context, req CreateVolumeRequest) (*CreatedVolume, error)
	// DeleteVolume deprovisions a volume.
	DeleteVolume(ctx context.Context, req DeleteVolumeRequest) error

	// ValidateVolumeCapabilities asks the controller whether an existing
	// volume can be used in every one of req's capabilities. The driver's
	// refusal is a result (Confirmed false, with its message), not an
	// error; ErrNotFound means the driver knows no such volume.
	ValidateVolumeCapabilities(ctx context.Context, req ValidateVolumeCapabilitiesRequest) (*Validation, error)
}

// FingerprintRequest names the driver to fingerprint.
type FingerprintRequest struct {
	Socket string
}

// Fingerprint is what a driver reports of itself.
type Fingerprint struct {
	// PluginName and Version are GetPluginInfo's name and vendor version.
	PluginName string
	Version    string
	// Healthy is Probe's readiness; HealthDescription says why not, or
	// carries a short status line.
	Healthy           bool
	HealthDescription string
	// HasController and HasNode tell which CSI services the driver has; a
	// driver may be controller-only, node-only or both (a monolith).
	HasController  bool
	HasNode        bool
	ControllerCaps ControllerCaps
	NodeCaps       NodeCaps
	// NodeID, MaxVolumes (0: no limit) and AccessibleTopology are
	// NodeGetInfo's; set only with HasNode.
	NodeID             string
	MaxVolumes         int64
	AccessibleTopology map[string]string
	// RequiresTopologies is the plugin capability
	// VOLUME_ACCESSIBILITY_CONSTRAINTS: volumes are not reachable from
	// everywhere.
	RequiresTopologies bool
}

// ControllerCaps are the controller service's capabilities.
type ControllerCaps struct {
	CreateDelete              bool
	PublishUnpublish          bool
	ListVolumes               bool
	GetCapacity               bool
	CreateDeleteSnapshot      bool
	ListSnapshots             bool
	Clone                     bool
	ReadOnly                  bool // PUBLISH_READONLY
	Expand                    bool
	ListVolumesPublishedNodes bool
	VolumeCondition           bool // GET_VOLUME_HEALTH or LIST_VOLUME_HEALTH
	GetVolume                 bool
	SingleNodeMultiWriter     bool
	ModifyVolume              bool
}

// NodeCaps are the node service's capabilities.
type NodeCaps struct {
	StageUnstage          bool
	GetVolumeStats        bool
	Expand                bool
	VolumeCondition       bool // GET_VOLUME_HEALTH
	SingleNodeMultiWriter bool
	VolumeMountGroup      bool
}

// ControllerPublishRequest attaches volume VolumeID to node NodeID.
type ControllerPublishRequest struct {
	Socket        string
	VolumeID      string // the external (driver) ID
	NodeID        string // the CSI node ID
	Capability    Capability
	ReadOnly      bool
	Secrets       map[string]string
	VolumeContext map[string]string
}

// ControllerUnpublishRequest detaches volume VolumeID from node NodeID.
type ControllerUnpublishRequest struct {
	Socket   string
	VolumeID string
	NodeID   string
	Secrets  map[string]string
}

// NodeStageRequest stages volume VolumeID at StagingPath.
type NodeStageRequest struct {
	Socket         string
	VolumeID       string
	PublishContext map[string]string
	StagingPath    string
	Capability     Capability
	Secrets        map[string]string
	VolumeContext  map[string]string
}

// NodeUnstageRequest unstages volume VolumeID from StagingPath.
type NodeUnstageRequest struct {
	Socket      string
	VolumeID    string
	StagingPath string
}

// NodePublishRequest publishes volume VolumeID at TargetPath.
type NodePublishRequest struct {
	Socket         string
	VolumeID       string
	PublishContext map[string]string
	// StagingPath is empty when the node service has no StageUnstage.
	StagingPath   string
	TargetPath    string
	Capability    Capability
	ReadOnly      bool
	Secrets       map[string]string
	VolumeContext map[string]string
}

// NodeUnpublishRequest unpublishes volume VolumeID from TargetPath.
type NodeUnpublishRequest struct {
	Socket     string
	VolumeID   string
	TargetPath string
}

// CreateVolumeRequest provisions a volume.
type CreateVolumeRequest struct {
	Socket string
	Name   string
	// CapacityMin and CapacityMax bound the size in bytes; 0: no bound.
	CapacityMin  int64
	CapacityMax  int64
	Capabilities []Capability
	Parameters   map[string]string
	Secrets      map[string]string
	// ContentSource, when set, is the snapshot or volume to copy.
	ContentSource *ContentSource
	// TopologyRequired lists where the volume may be reachable from
	// (requisite); TopologyPreferred orders where it should.
	TopologyRequired  []map[string]string
	TopologyPreferred []map[string]string
}

// ContentSource is what a new volume is created from: exactly one of the
// two IDs is set.
type ContentSource struct {
	SnapshotID string
	VolumeID   string
}

// CreatedVolume is the volume CreateVolume provisioned.
type CreatedVolume struct {
	ExternalID    string
	CapacityBytes int64 // 0: unknown
	Context       map[string]string
	Topologies    []map[string]string
}

// DeleteVolumeRequest deprovisions volume ExternalID.
type DeleteVolumeRequest struct {
	Socket     string
	ExternalID string
	Secrets    map[string]string
}

// ValidateVolumeCapabilitiesRequest asks whether volume VolumeID can be
// used in every one of Capabilities.
type ValidateVolumeCapabilitiesRequest struct {
	Socket        string
	VolumeID      string // the external (driver) ID
	Capabilities  []Capability
	Parameters    map[string]string
	VolumeContext map[string]string
	Secrets       map[string]string
}

// Validation is a controller's answer to ValidateVolumeCapabilities.
type Validation struct {
	// Confirmed: the driver supports every capability asked about.
	Confirmed bool
	// Message is the driver's message: why it did not confirm (a bridge
	// supplies one when the driver gave none), or a note. Bounded to
	// MaxStringBytes.
	Message string
}

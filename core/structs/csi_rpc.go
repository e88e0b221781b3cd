package structs

import "maps"

// The messages between a client and the servers for volume claims and for
// controller work. A client claims a volume for an allocation before its
// tasks start and releases it after they stop; the client that runs a
// healthy controller plugin executes the controller calls the leader hands
// it (the leader cannot call a client, so controller work is pulled: a
// controller client polls the leader for operations addressed to it and
// reports each result).

// Bounds of the controller work channel.
const (
	// MaxCSIControllerOpsPerPoll bounds one poll's answer.
	MaxCSIControllerOpsPerPoll = 64
	// MaxCSIPublishContextEntries bounds a publish context a controller
	// reports (it is stored in the claim).
	MaxCSIPublishContextEntries = 64
	// MaxCSIErrorBytes bounds an error message a client reports.
	MaxCSIErrorBytes = 4096
)

// CSIVolumeClaimArgs is a client's claim of a volume for one of its
// allocations, authenticated by the node's secret.
type CSIVolumeClaimArgs struct {
	NodeID   string
	SecretID string
	// Namespace is the allocation's (and so the volume's).
	Namespace    string
	VolumeID     string
	AllocationID string
	// ExternalNodeID is the node plugin's CSI node ID as the client
	// knows it (may be empty: the server then uses the fingerprint).
	ExternalNodeID string
	Mode           CSIVolumeClaimMode // read or write
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
}

// CSIVolumeClaimReply is what the client needs to stage and publish: the
// volume (with its secrets and context: the caller is the node that
// mounts it), the claim as stored, and the controller's publish context.
type CSIVolumeClaimReply struct {
	Volume         *CSIVolume
	Claim          *CSIVolumeClaim
	PublishContext map[string]string
	Index          uint64
}

// CSIVolumeUnpublishArgs releases a claim. The client sends it after it
// unpublished and unstaged (Claim.State NodeDetached), or with state
// Unpublishing when it could not; the server drives the rest. NodeID and
// SecretID authenticate a client; servers (the volume watcher, detach)
// call the server method directly.
type CSIVolumeUnpublishArgs struct {
	NodeID    string
	SecretID  string
	Namespace string
	VolumeID  string
	Claim     *CSIVolumeClaim
}

// CSIVolumeUnpublishReply carries the volume's index after the release.
type CSIVolumeUnpublishReply struct {
	Index uint64
}

// Controller operation kinds.
const (
	CSIControllerOpPublish   = "publish"
	CSIControllerOpUnpublish = "unpublish"
	CSIControllerOpCreate    = "create"
	CSIControllerOpDelete    = "delete"
	// CSIControllerOpValidate asks the driver whether an existing volume
	// supports its capabilities (ValidateVolumeCapabilities), at register.
	CSIControllerOpValidate = "validate"
	// CSIControllerOpNodeDetach is not a controller call: it asks the
	// client holding a claim (addressed to the claim's node, not to a
	// controller) to unpublish and unstage one allocation's volume, as
	// its own release does when the allocation ends (`volume detach` of
	// a live node). It names the volume by Namespace and VolumeID and the
	// allocation by AllocationID; PluginID and ExternalVolumeID are the
	// volume's.
	CSIControllerOpNodeDetach = "node-detach"
)

// CSIControllerOp is one controller call the leader asks a controller
// client to make through its csi-bridge.
type CSIControllerOp struct {
	ID       string
	Kind     string
	PluginID string
	// ExternalVolumeID is the driver's volume ID (publish, unpublish,
	// delete, validate); ExternalNodeID the CSI node ID (publish,
	// unpublish).
	ExternalVolumeID string
	ExternalNodeID   string
	AccessMode       CSIVolumeAccessMode
	AttachmentMode   CSIVolumeAttachmentMode
	MountOptions     *CSIMountOptions
	ReadOnly         bool
	Secrets          map[string]string
	VolumeContext    map[string]string
	// Create is the volume to provision (create only): its Name,
	// capacities, capabilities, parameters and topology request.
	Create *CSIVolume
	// Capabilities and Parameters are what to validate (validate only),
	// with MountOptions, VolumeContext and Secrets.
	Capabilities []*CSIVolumeCapability
	Parameters   map[string]string
	// Namespace, VolumeID and AllocationID name the claim to node-detach
	// (node-detach only).
	Namespace    string
	VolumeID     string
	AllocationID string
}

// Copy returns a deep copy.
func (o *CSIControllerOp) Copy() *CSIControllerOp {
	if o == nil {
		return nil
	}
	out := *o
	out.Secrets = maps.Clone(o.Secrets)
	out.VolumeContext = maps.Clone(o.VolumeContext)
	if o.MountOptions != nil {
		mo := *o.MountOptions
		mo.MountFlags = append([]string(nil), o.MountOptions.MountFlags...)
		out.MountOptions = &mo
	}
	out.Create = o.Create.Copy()
	out.Parameters = maps.Clone(o.Parameters)
	if o.Capabilities != nil {
		out.Capabilities = make([]*CSIVolumeCapability, len(o.Capabilities))
		for i, c := range o.Capabilities {
			if c != nil {
				cc := *c
				out.Capabilities[i] = &cc
			}
		}
	}
	return &out
}

// CSIControllerOpResult is a controller client's answer to one op.
// ErrorKind is the error's kind by its wire name (KindName; FromKind
// rebuilds it), empty with Error empty on success, so the kind survives
// the trip.
type CSIControllerOpResult struct {
	ID             string
	ErrorKind      string
	Error          string
	PublishContext map[string]string
	// Created is the provisioned volume (create only): ExternalID,
	// Capacity, Context and AccessibleTopology.
	Created *CSIVolume
	// Validation is the driver's answer (validate only).
	Validation *CSIVolumeValidation
}

// CSIVolumeValidation is a controller's answer to a validate op. A
// refusal by the driver is an answer, not an op error.
type CSIVolumeValidation struct {
	// Confirmed: the driver supports every capability asked about.
	Confirmed bool
	// Message is the driver's (at most MaxCSIErrorBytes): why it did not
	// confirm, what it could not check, or a note.
	Message string
	// Unsupported: the driver (or the client's csi-bridge) does not
	// implement the call, so nothing was checked.
	Unsupported bool
}

// CSIControllerPollArgs asks for the controller ops addressed to a node,
// blocking up to MaxWait while there are none.
type CSIControllerPollArgs struct {
	NodeID   string
	SecretID string
	MaxWait  int64 // nanoseconds
}

// CSIControllerPollReply holds the ops to run, oldest first.
type CSIControllerPollReply struct {
	Ops []*CSIControllerOp
}

// CSIControllerDoneArgs reports results of earlier ops.
type CSIControllerDoneArgs struct {
	NodeID   string
	SecretID string
	Results  []*CSIControllerOpResult
}

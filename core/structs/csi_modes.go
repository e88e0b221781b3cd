package structs

// TEMPORARY: these types are also defined by the jobspec branch
// (job_volumes.go); this file goes when that branch lands.

// CSIVolumeAccessMode is how many nodes may use a volume and how.
type CSIVolumeAccessMode string

// Access modes, Nomad's names.
const (
	CSIVolumeAccessModeUnknown               CSIVolumeAccessMode = ""
	CSIVolumeAccessModeSingleNodeReader      CSIVolumeAccessMode = "single-node-reader-only"
	CSIVolumeAccessModeSingleNodeWriter      CSIVolumeAccessMode = "single-node-writer"
	CSIVolumeAccessModeMultiNodeReader       CSIVolumeAccessMode = "multi-node-reader-only"
	CSIVolumeAccessModeMultiNodeSingleWriter CSIVolumeAccessMode = "multi-node-single-writer"
	CSIVolumeAccessModeMultiNodeMultiWriter  CSIVolumeAccessMode = "multi-node-multi-writer"
)

// CSIVolumeAttachmentMode is how a volume is presented to a task.
type CSIVolumeAttachmentMode string

// Attachment modes, Nomad's names.
const (
	CSIVolumeAttachmentModeUnknown     CSIVolumeAttachmentMode = ""
	CSIVolumeAttachmentModeBlockDevice CSIVolumeAttachmentMode = "block-device"
	CSIVolumeAttachmentModeFilesystem  CSIVolumeAttachmentMode = "file-system"
)

// CSIMountOptions are the file system and flags a volume is mounted with.
type CSIMountOptions struct {
	FSType     string   `codec:",omitempty"`
	MountFlags []string `codec:",omitempty"`
}

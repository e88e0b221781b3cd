package csibridge

import "fmt"

// Access modes, in Nomad's names: how many nodes may use a volume and how.
const (
	AccessSingleNodeReader       = "single-node-reader-only"
	AccessSingleNodeWriter       = "single-node-writer"
	AccessSingleNodeSingleWriter = "single-node-single-writer"
	AccessSingleNodeMultiWriter  = "single-node-multi-writer"
	AccessMultiNodeReader        = "multi-node-reader-only"
	AccessMultiNodeSingleWriter  = "multi-node-single-writer"
	AccessMultiNodeMultiWriter   = "multi-node-multi-writer"
)

// Attachment modes, in Nomad's names: how a volume is presented to a task.
const (
	AttachFileSystem  = "file-system"
	AttachBlockDevice = "block-device"
)

// Capability is one way a volume is used. FSType and MountFlags apply to
// the file-system attachment only; mount flags may be sensitive and are
// never logged.
type Capability struct {
	AccessMode     string
	AttachmentMode string
	FSType         string
	MountFlags     []string
}

// AccessModes lists every access mode a Capability may name.
var AccessModes = []string{
	AccessSingleNodeReader, AccessSingleNodeWriter, AccessSingleNodeSingleWriter,
	AccessSingleNodeMultiWriter, AccessMultiNodeReader, AccessMultiNodeSingleWriter,
	AccessMultiNodeMultiWriter,
}

// Validate refuses a capability with an unknown mode, or with a file
// system or mount flags on a block device, with ErrInvalidArgument.
func (c Capability) Validate() error {
	known := false
	for _, m := range AccessModes {
		known = known || m == c.AccessMode
	}
	if !known {
		return fmt.Errorf("%w: unknown access mode %q", ErrInvalidArgument, c.AccessMode)
	}
	switch c.AttachmentMode {
	case AttachFileSystem:
	case AttachBlockDevice:
		if c.FSType != "" || len(c.MountFlags) > 0 {
			return fmt.Errorf("%w: a block-device attachment takes no file system type or mount flags", ErrInvalidArgument)
		}
	default:
		return fmt.Errorf("%w: unknown attachment mode %q", ErrInvalidArgument, c.AttachmentMode)
	}
	return nil
}

package bridge

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/drover-org/drover/sdk/csibridge"
)

// accessModes maps Nomad's access mode names onto CSI's.
var accessModes = map[string]csi.VolumeCapability_AccessMode_Mode{
	csibridge.AccessSingleNodeReader:       csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
	csibridge.AccessSingleNodeWriter:       csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
	csibridge.AccessSingleNodeSingleWriter: csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
	csibridge.AccessSingleNodeMultiWriter:  csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
	csibridge.AccessMultiNodeReader:        csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
	csibridge.AccessMultiNodeSingleWriter:  csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
	csibridge.AccessMultiNodeMultiWriter:   csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER,
}

// volumeCapability maps a capability onto CSI's: a Mount with the file
// system type and flags, or a Block. Unknown modes are ErrInvalidArgument.
func volumeCapability(c csibridge.Capability) (*csi.VolumeCapability, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	mode, ok := accessModes[c.AccessMode]
	if !ok {
		return nil, fmt.Errorf("%w: unknown access mode %q", csibridge.ErrInvalidArgument, c.AccessMode)
	}
	vc := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if c.AttachmentMode == csibridge.AttachBlockDevice {
		vc.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		vc.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
			FsType: c.FSType, MountFlags: c.MountFlags,
		}}
	}
	return vc, nil
}

func topologiesToCSI(ts []map[string]string) []*csi.Topology {
	out := make([]*csi.Topology, 0, len(ts))
	for _, t := range ts {
		out = append(out, &csi.Topology{Segments: t})
	}
	return out
}

func topologiesFromCSI(ts []*csi.Topology) []map[string]string {
	if len(ts) == 0 {
		return nil
	}
	out := make([]map[string]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.GetSegments())
	}
	return out
}

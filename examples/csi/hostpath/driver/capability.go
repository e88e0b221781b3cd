package hostpath

import (
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// checkCapability refuses what the driver cannot serve: block volumes (a
// directory cannot be a block device) and unknown access modes. The error is
// an InvalidArgument status naming the problem.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "volume capability is required")
	}
	if msg := capabilityProblem(c); msg != "" {
		return status.Error(codes.InvalidArgument, msg)
	}
	return nil
}

// capabilityProblem says why a capability is not supported, or "" when it is.
func capabilityProblem(c *csi.VolumeCapability) string {
	switch {
	case c.GetBlock() != nil:
		return "block access type is not supported: hostpath volumes are directories"
	case c.GetMount() == nil:
		return "volume capability needs an access type (mount)"
	case c.GetAccessMode() == nil:
		return "volume capability needs an access mode"
	}
	switch m := c.GetAccessMode().GetMode(); m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
		return ""
	default:
		return fmt.Sprintf("access mode %s is not supported", m)
	}
}

func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

// singleNode reports whether an access mode allows use on one node only.
func singleNode(m csi.VolumeCapability_AccessMode_Mode) bool {
	switch m {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		return true
	}
	return false
}

// readerOnly reports whether an access mode forbids writes, in which case the
// node mounts the volume read-only whatever the request's readonly flag says.
func readerOnly(m csi.VolumeCapability_AccessMode_Mode) bool {
	return m == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		m == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}

// modeOf parses an access mode name stored in a state file.
func modeOf(name string) csi.VolumeCapability_AccessMode_Mode {
	return csi.VolumeCapability_AccessMode_Mode(csi.VolumeCapability_AccessMode_Mode_value[name])
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

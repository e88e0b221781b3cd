package csibridge

import (
	"fmt"
	"path/filepath"
	"unicode/utf8"
)

// Bounds on one request, enforced by the server side of the gRPC adapter
// before the implementation sees the request: whatever a client sends, a
// bridge never forwards more than this to a driver. Over a bound the call
// fails with ErrInvalidArgument.
const (
	// MaxMapBytes bounds the keys and values of all the maps of one
	// request together (secrets, contexts, parameters, topologies).
	MaxMapBytes = 1 << 20
	// MaxMapEntries bounds the entries of one map.
	MaxMapEntries = 1024
	// MaxStringBytes bounds every other string: IDs, names, paths, modes,
	// each mount flag.
	MaxStringBytes = 4096
	// MaxListLen bounds the capabilities, mount flags and topologies of a
	// request.
	MaxListLen = 64
)

// boundMessage cuts a driver's message to MaxStringBytes, on a rune
// boundary, both where a bridge answers and where the caller reads it.
func boundMessage(s string) string {
	if len(s) <= MaxStringBytes {
		return s
	}
	s = s[:MaxStringBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// limiter totals one request's map bytes and reports the first bound
// broken. Its messages name the field and the sizes, never the contents:
// secrets must not reach logs.
type limiter struct {
	mapBytes int
	err      error
}

func (l *limiter) str(field, s string) {
	if l.err == nil && len(s) > MaxStringBytes {
		l.err = fmt.Errorf("%w: %s is %d bytes, over the %d-byte limit", ErrInvalidArgument, field, len(s), MaxStringBytes)
	}
}

func (l *limiter) socket(s string) {
	l.str("socket", s)
	if l.err == nil && !filepath.IsAbs(s) {
		l.err = fmt.Errorf("%w: socket must be an absolute path, got %q", ErrInvalidArgument, s)
	}
}

func (l *limiter) list(field string, n int) {
	if l.err == nil && n > MaxListLen {
		l.err = fmt.Errorf("%w: %s has %d entries, over the limit of %d", ErrInvalidArgument, field, n, MaxListLen)
	}
}

func (l *limiter) kv(field string, m map[string]string) {
	if l.err != nil {
		return
	}
	if len(m) > MaxMapEntries {
		l.err = fmt.Errorf("%w: %s has %d entries, over the limit of %d", ErrInvalidArgument, field, len(m), MaxMapEntries)
		return
	}
	for k, v := range m {
		l.mapBytes += len(k) + len(v)
	}
	if l.mapBytes > MaxMapBytes {
		l.err = fmt.Errorf("%w: %s brings the request's maps to %d bytes, over the %d-byte limit", ErrInvalidArgument, field, l.mapBytes, MaxMapBytes)
	}
}

func (l *limiter) capability(field string, c Capability) {
	l.str(field+" access mode", c.AccessMode)
	l.str(field+" attachment mode", c.AttachmentMode)
	l.str(field+" fs type", c.FSType)
	l.list(field+" mount flags", len(c.MountFlags))
	for _, f := range c.MountFlags {
		l.str(field+" mount flag", f)
	}
	if l.err == nil {
		if err := c.Validate(); err != nil {
			l.err = fmt.Errorf("%s: %w", field, err)
		}
	}
}

func (l *limiter) topologies(field string, ts []map[string]string) {
	l.list(field, len(ts))
	for _, t := range ts {
		l.kv(field, t)
	}
}

// The checks of each request. Required fields are the implementation's
// business (it names them in its errors); these bound sizes and modes.

func (r FingerprintRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	return l.err
}

func (r ControllerPublishRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("volume id", r.VolumeID)
	l.str("node id", r.NodeID)
	l.capability("capability", r.Capability)
	l.kv("secrets", r.Secrets)
	l.kv("volume context", r.VolumeContext)
	return l.err
}

func (r ControllerUnpublishRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("volume id", r.VolumeID)
	l.str("node id", r.NodeID)
	l.kv("secrets", r.Secrets)
	return l.err
}

func (r NodeStageRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("volume id", r.VolumeID)
	l.str("staging path", r.StagingPath)
	l.capability("capability", r.Capability)
	l.kv("publish context", r.PublishContext)
	l.kv("secrets", r.Secrets)
	l.kv("volume context", r.VolumeContext)
	return l.err
}

func (r NodeUnstageRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("volume id", r.VolumeID)
	l.str("staging path", r.StagingPath)
	return l.err
}

func (r NodePublishRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("volume id", r.VolumeID)
	l.str("staging path", r.StagingPath)
	l.str("target path", r.TargetPath)
	l.capability("capability", r.Capability)
	l.kv("publish context", r.PublishContext)
	l.kv("secrets", r.Secrets)
	l.kv("volume context", r.VolumeContext)
	return l.err
}

func (r NodeUnpublishRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("volume id", r.VolumeID)
	l.str("target path", r.TargetPath)
	return l.err
}

func (r CreateVolumeRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("name", r.Name)
	if l.err == nil && (r.CapacityMin < 0 || r.CapacityMax < 0 || (r.CapacityMax > 0 && r.CapacityMin > r.CapacityMax)) {
		l.err = fmt.Errorf("%w: capacity range [%d, %d] is not a range", ErrInvalidArgument, r.CapacityMin, r.CapacityMax)
	}
	l.list("capabilities", len(r.Capabilities))
	for i, c := range r.Capabilities {
		l.capability(fmt.Sprintf("capability %d", i), c)
	}
	l.kv("parameters", r.Parameters)
	l.kv("secrets", r.Secrets)
	if cs := r.ContentSource; cs != nil {
		l.str("content source snapshot id", cs.SnapshotID)
		l.str("content source volume id", cs.VolumeID)
		if l.err == nil && (cs.SnapshotID == "") == (cs.VolumeID == "") {
			l.err = fmt.Errorf("%w: a content source names exactly one of a snapshot and a volume", ErrInvalidArgument)
		}
	}
	l.topologies("required topologies", r.TopologyRequired)
	l.topologies("preferred topologies", r.TopologyPreferred)
	return l.err
}

func (r DeleteVolumeRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("external id", r.ExternalID)
	l.kv("secrets", r.Secrets)
	return l.err
}

func (r ValidateVolumeCapabilitiesRequest) check() error {
	var l limiter
	l.socket(r.Socket)
	l.str("volume id", r.VolumeID)
	l.list("capabilities", len(r.Capabilities))
	for i, c := range r.Capabilities {
		l.capability(fmt.Sprintf("capability %d", i), c)
	}
	l.kv("parameters", r.Parameters)
	l.kv("volume context", r.VolumeContext)
	l.kv("secrets", r.Secrets)
	return l.err
}

package execdriver

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// volumeMount is one host volume bound into the task's root: the host
// directory Src at Dst (the volume_mount destination), read-only if RO.
type volumeMount struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
	RO  bool   `json:"ro,omitempty"`
}

// maxVolumeMounts bounds the mounts a task asks for.
const maxVolumeMounts = 64

// volumeMounts checks the task's host volume mounts: an absolute host
// directory (the client's host_volume path) and a destination inside the
// task's root (a relative one is relative to it, as in Nomad).
func volumeMounts(cfg *driverpb.TaskConfig) ([]volumeMount, error) {
	ms := cfg.GetMounts()
	if len(ms) > maxVolumeMounts {
		return nil, fmt.Errorf("%w: %d mounts, more than %d", driver.ErrInvalidConfig, len(ms), maxVolumeMounts)
	}
	var out []volumeMount
	for i, m := range ms {
		src, dst := m.GetHostPath(), m.GetTaskPath()
		if !filepath.IsAbs(src) {
			return nil, fmt.Errorf("%w: mounts[%d]: host path %q must be absolute", driver.ErrInvalidConfig, i, src)
		}
		clean := filepath.Clean("/" + dst)
		if dst == "" || clean == "/" || strings.Contains(dst, "\x00") || slicesContainsDotDot(dst) {
			return nil, fmt.Errorf("%w: mounts[%d]: destination %q must be a path inside the task's root without ..", driver.ErrInvalidConfig, i, dst)
		}
		out = append(out, volumeMount{Src: filepath.Clean(src), Dst: clean, RO: m.GetReadOnly()})
	}
	return out, nil
}

func slicesContainsDotDot(p string) bool {
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return true
		}
	}
	return false
}

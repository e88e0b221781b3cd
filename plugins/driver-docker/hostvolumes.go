package docker

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// maxVolumeMounts bounds the host volume mounts of a task.
const maxVolumeMounts = 64

// volumeBinds are the engine binds of the task's host volume mounts
// (TaskConfig.mounts: the group's `volume { type = "host" }` blocks the
// task's volume_mount blocks name). Their host paths are the operator's
// host_volume directories, so they need no `volumes { enabled = true }`,
// as in Nomad; the propagation mode maps as Nomad maps it.
func volumeBinds(cfg *driverpb.TaskConfig) ([]string, error) {
	ms := cfg.GetMounts()
	if len(ms) > maxVolumeMounts {
		return nil, fmt.Errorf("%w: %d mounts, more than %d", driver.ErrInvalidConfig, len(ms), maxVolumeMounts)
	}
	out := make([]string, 0, len(ms))
	for i, m := range ms {
		src, dst := m.GetHostPath(), m.GetTaskPath()
		if !filepath.IsAbs(src) || strings.ContainsAny(src, ":,\x00") {
			return nil, fmt.Errorf("%w: mounts[%d]: host path %q must be absolute, without : or ,", driver.ErrInvalidConfig, i, src)
		}
		if !filepath.IsAbs(dst) {
			// Nomad's docker driver takes a relative destination as
			// relative to the task's working dir, / in a container.
			dst = "/" + dst
		}
		if strings.ContainsAny(dst, ":,\x00") || filepath.Clean(dst) == "/" {
			return nil, fmt.Errorf("%w: mounts[%d]: destination %q is not a usable container path", driver.ErrInvalidConfig, i, m.GetTaskPath())
		}
		opts := []string{}
		if m.GetReadOnly() {
			opts = append(opts, "ro")
		}
		switch m.GetPropagationMode() {
		case "", "private":
			opts = append(opts, "rprivate")
		case "host-to-task":
			opts = append(opts, "rslave")
		case "bidirectional":
			opts = append(opts, "rshared")
		default:
			return nil, fmt.Errorf("%w: mounts[%d]: propagation_mode %q is not one of private, host-to-task, bidirectional", driver.ErrInvalidConfig, i, m.GetPropagationMode())
		}
		out = append(out, filepath.Clean(src)+":"+filepath.Clean(dst)+":"+strings.Join(opts, ","))
	}
	return out, nil
}

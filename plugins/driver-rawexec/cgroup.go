package rawexec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// taskCgroup is where one task's processes live: the directory of each
// controller's cgroup (cgroup v1: one per hierarchy, keyed by controller;
// v2: the one unified directory, keyed "unified"). It travels in the supervisor's
// spec and in the task handle, so a new driver process finds the cgroup of
// a task an earlier one started.
type taskCgroup struct {
	V2   bool              `json:"v2,omitempty"`
	Dirs map[string]string `json:"dirs"`
}

// cgroupParent is the directory drover's task cgroups are created in,
// beneath each hierarchy's root.
const cgroupParent = "drover"

// cgroupV2Parent is the v2 parent: a slice-like name, so systemd leaves it
// alone on a host it manages.
const cgroupV2Parent = "drover.slice"

// unifiedKey is taskCgroup.Dirs's key of the v2 directory.
const unifiedKey = "unified"

// cgroupKillTimeout bounds freezing, killing and emptying a task's cgroup,
// and removing it: the kernel does this in milliseconds; it only guards
// against a wedged process (one in uninterruptible sleep on a dead NFS
// mount).
const cgroupKillTimeout = 30 * time.Second

// procsDir is the directory whose cgroup.procs lists every process of the
// task (and whose freezer stops them).
func (cg *taskCgroup) procsDir() string {
	if cg.V2 {
		return cg.Dirs[unifiedKey]
	}
	return cg.Dirs["freezer"]
}

// procsDirOrEmpty is procsDir for logs: "" for a task without a cgroup.
func (cg *taskCgroup) procsDirOrEmpty() string {
	if cg == nil {
		return ""
	}
	return cg.procsDir()
}

// destroyCgroup removes a task's cgroup (nil: none), killing what is left
// in it; a failure is logged, since the task is gone either way.
func (d *Driver) destroyCgroup(id string, cg *taskCgroup) {
	if cg == nil {
		return
	}
	if err := cg.destroy(); err != nil {
		d.logger.Warn("could not remove the task's cgroup", "task_id", id, "error", err)
	}
}

// cgroupName turns a task id ("<alloc id>/<task>") into one path element.
// Long ids are cut and suffixed with a hash, so two never share a cgroup.
func cgroupName(id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('.')
		}
	}
	name := b.String()
	if name != id || len(name) > 128 {
		sum := sha256.Sum256([]byte(id))
		if len(name) > 100 {
			name = name[:100]
		}
		name += "-" + hex.EncodeToString(sum[:6])
	}
	return name
}

// errNoCgroups is the kind of "this host has no usable cgroup hierarchy"
// errors: the message names the controller that is missing.
var errNoCgroups = errors.New("no usable cgroup hierarchy")

// cgroupResources are the limits written into a task's cgroup, in
// Nomad's units.
type cgroupResources struct {
	CPUMHz      int64
	MemoryMB    int64
	MemoryMaxMB int64
}

// memoryLimitBytes is the hard memory limit: memory_max where the task
// sets it (oversubscription), else memory. 0: none.
func (r cgroupResources) memoryLimitBytes() int64 {
	mb := r.MemoryMB
	if r.MemoryMaxMB > mb {
		mb = r.MemoryMaxMB
	}
	return mb << 20
}

// cpuShares is cgroup v1's cpu.shares for the task's MHz, as Nomad maps
// them: one share per MHz, at least the kernel's minimum of 2.
func (r cgroupResources) cpuShares() int64 {
	if r.CPUMHz < 2 {
		return 2
	}
	if r.CPUMHz > 262144 {
		return 262144
	}
	return r.CPUMHz
}

// cpuWeight is cgroup v2's cpu.weight for the same shares: the kernel's
// own conversion between the two ranges ([2, 262144] onto [1, 10000]).
func (r cgroupResources) cpuWeight() int64 {
	return 1 + ((r.cpuShares()-2)*9999)/262142
}

func noCgroupsErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s; set plugin \"raw_exec\" { config { %s = true } } in the agent config to run tasks without cgroup isolation and resource limits",
		errNoCgroups, fmt.Sprintf(format, args...), ConfigKeyNoCgroups)
}

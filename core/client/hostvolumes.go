package client

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/drover-org/drover/core/client/csi"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// Host volumes on the client. The agent config's host_volume blocks are
// fingerprinted onto the node (HostVolumes, as Nomad's). Before any task
// of an allocation starts, each task's volume_mount of a group host volume
// is bound at <task dir>/<destination> (read-only when the client's volume,
// the group's request or the mount is): a raw_exec task, which has no root
// of its own, finds the volume there; an exec task's root is its task dir,
// so it sees it at <destination>. Drivers with a root of their own (docker,
// and exec for destinations its chroot_env covers) get the mounts in
// TaskConfig.mounts and bind the host directory at the destination
// themselves. The binds are made and removed through descriptors opened
// beneath the alloc dir, never through a path a task could have turned into
// a symlink (csi.BindDir), and are persisted with the alloc, so a restarted
// client unmounts what an earlier process mounted. The alloc dir is not
// removed while a bind may remain in it.

// hostMount is one bind of a host volume into a task dir.
type hostMount struct {
	Task   string
	Volume string // the group volume's name
	Source string // the host volume's name
	Target string // <task dir>/<destination>, beneath the alloc dir
	// ID is the kernel's ID of the mount once made (0: the mount may be
	// under way; unbind then unmounts what is at Target).
	ID uint64 `json:",omitempty"`
}

// hostVolumes is how far an alloc's host volume binds got.
type hostVolumes struct {
	mu     sync.Mutex
	mounts []*hostMount
}

func (h *hostVolumes) snapshot() []*hostMount {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*hostMount, 0, len(h.mounts))
	for _, m := range h.mounts {
		c := *m
		out = append(out, &c)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// held reports whether a bind may remain in the alloc dir, which must
// then not be removed (that would empty the host volume).
func (h *hostVolumes) held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.mounts) > 0
}

// hostVolumesOfNode is the node's HostVolumes fingerprint: the agent
// config's host_volume blocks, as Nomad reports them.
func (c *Client) hostVolumesOfNode() map[string]*structs.ClientHostVolumeConfig {
	if len(c.cfg.HostVolumes) == 0 {
		return nil
	}
	out := make(map[string]*structs.ClientHostVolumeConfig, len(c.cfg.HostVolumes))
	for name, v := range c.cfg.HostVolumes {
		c := v.Copy()
		c.Name = name
		out[name] = c
	}
	return out
}

// hostVolumeMount is a task's mount of a group host volume, resolved on
// this node.
type hostVolumeMount struct {
	mount  *structs.VolumeMount
	source string
	vol    *structs.ClientHostVolumeConfig // nil: not on this node
	ro     bool
}

// taskHostMounts lists t's volume_mounts of the group's host volumes.
func (ar *allocRunner) taskHostMounts(tg *structs.TaskGroup, t *structs.Task, node *structs.Node, allocName string) []hostVolumeMount {
	var out []hostVolumeMount
	for _, vm := range t.VolumeMounts {
		if vm == nil {
			continue
		}
		req := tg.Volumes[vm.Volume]
		if req == nil || req.Type != structs.VolumeTypeHost {
			continue
		}
		src := req.VolumeID(allocName)
		var vol *structs.ClientHostVolumeConfig
		if node != nil {
			vol = node.HostVolumes[src]
		}
		hm := hostVolumeMount{mount: vm, source: src, vol: vol, ro: req.ReadOnly || vm.ReadOnly}
		if vol != nil && vol.ReadOnly {
			hm.ro = true
		}
		out = append(out, hm)
	}
	return out
}

// setupHostVolumes binds the group's host volumes into the task dirs of
// the tasks that mount them, those not bound yet (a restored alloc keeps
// the binds it had, and remakes one that is gone, after a reboot say).
func (ar *allocRunner) setupHostVolumes() error {
	tg := ar.group()
	if tg == nil {
		return nil
	}
	alloc := ar.allocSnapshot()
	var node *structs.Node
	if ar.cfg.Node != nil {
		node = ar.cfg.Node()
	}
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		for _, hm := range ar.taskHostMounts(tg, t, node, alloc.Name) {
			if err := ar.bindHostVolume(t.Name, hm); err != nil {
				return fmt.Errorf("host volume %q (%s) of task %q: %w", hm.mount.Volume, hm.source, t.Name, err)
			}
		}
	}
	return nil
}

func (ar *allocRunner) bindHostVolume(task string, hm hostVolumeMount) error {
	if hm.vol == nil {
		return fmt.Errorf("this client has no host volume %q (agent config client { host_volume %q { path = ... } })", hm.source, hm.source)
	}
	target, err := csiAlloc{ar}.TaskPath(task, strings.TrimLeft(hm.mount.Destination, "/"))
	if err != nil {
		return fmt.Errorf("volume_mount destination %q: %w", hm.mount.Destination, err)
	}
	h := &ar.hostVols
	h.mu.Lock()
	i := slices.IndexFunc(h.mounts, func(m *hostMount) bool { return m.Target == target })
	var m *hostMount
	if i >= 0 {
		m = h.mounts[i]
	}
	h.mu.Unlock()
	if m != nil && m.ID != 0 {
		if id, err := csi.MountIDAt(ar.dir.root, target); err == nil && id == m.ID {
			return nil // still mounted
		}
		// Gone (the host rebooted): mount it again.
	}
	if m == nil {
		m = &hostMount{Task: task, Volume: hm.mount.Volume, Source: hm.source, Target: target}
		h.mu.Lock()
		h.mounts = append(h.mounts, m)
		h.mu.Unlock()
	}
	if m.ID == 0 {
		// A process that crashed between its mount and recording the
		// mount's ID may have left the volume mounted here: unmount it,
		// rather than stack a second mount the release would not see.
		if err := csi.Unbind(ar.dir.root, target, 0); err != nil {
			return err
		}
	}
	h.mu.Lock()
	m.ID = 0
	h.mu.Unlock()
	// Recorded before the mount: a crash in between leaves a record the
	// release undoes.
	ar.persist()
	id, err := csi.BindDir(ar.dir.root, hm.vol.Path, target, hm.ro)
	if err != nil {
		return err
	}
	h.mu.Lock()
	m.ID = id
	h.mu.Unlock()
	ar.persist()
	ar.logger.Info("host volume mounted", "task", task, "volume", hm.mount.Volume, "source", hm.source,
		"destination", hm.mount.Destination, "read_only", hm.ro)
	return nil
}

// releaseHostVolumes unbinds the alloc's host volume binds, the last made
// first; one that fails stays recorded (the alloc dir is then kept) and is
// retried at the next release, by this process or the next.
func (ar *allocRunner) releaseHostVolumes() {
	h := &ar.hostVols
	for {
		h.mu.Lock()
		if len(h.mounts) == 0 {
			h.mu.Unlock()
			return
		}
		m := h.mounts[len(h.mounts)-1]
		h.mu.Unlock()
		if err := csi.Unbind(ar.dir.root, m.Target, m.ID); err != nil {
			ar.logger.Error("failed to unmount host volume", "task", m.Task, "volume", m.Volume, "error", err)
			return
		}
		h.mu.Lock()
		h.mounts = h.mounts[:len(h.mounts)-1]
		h.mu.Unlock()
		ar.persist()
		ar.logger.Info("host volume unmounted", "task", m.Task, "volume", m.Volume)
	}
}

// driverMounts is the task's host volume mounts for its driver: the host
// directory, where the task sees it, read-only or not and the propagation.
func (ar *allocRunner) driverMounts(t *structs.Task) []*driverpb.Mount {
	tg := ar.group()
	if tg == nil {
		return nil
	}
	var node *structs.Node
	if ar.cfg.Node != nil {
		node = ar.cfg.Node()
	}
	var out []*driverpb.Mount
	for _, hm := range ar.taskHostMounts(tg, t, node, ar.allocSnapshot().Name) {
		if hm.vol == nil {
			continue
		}
		prop := hm.mount.PropagationMode
		if prop == "" {
			prop = "private"
		}
		out = append(out, &driverpb.Mount{HostPath: hm.vol.Path, TaskPath: hm.mount.Destination, ReadOnly: hm.ro, PropagationMode: prop})
	}
	return out
}

// mountsBeneath lists the mount points of this process's mount namespace
// at or beneath dir: an alloc dir with one must not be removed (os.RemoveAll
// would empty the mounted volume).
func mountsBeneath(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if p := unescapeOctal(fields[4]); p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out, sc.Err()
}

// unescapeOctal undoes mountinfo's octal escapes (\040 for a space).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

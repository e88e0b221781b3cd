package csi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// Alloc is what the volume hook needs of its alloc runner.
type Alloc interface {
	// TaskPath builds the task's directories and returns the host path of
	// rel (a relative path) in its task dir; an error if rel leaves it.
	TaskPath(task, rel string) (string, error)
	// Persist saves the alloc's state, its volumes' (Volumes.Snapshot)
	// included. Volumes calls it after every step a restarted client must
	// know of.
	Persist()
}

// Volumes is one alloc's CSI volumes, as far as the client got with each.
// The alloc runner owns it: it persists Snapshot with the alloc, calls
// Setup before any task starts and Release once every task is dead.
type Volumes struct {
	mgr    *Manager // nil: no csi-bridge on this client
	id     string   // the alloc's ID
	dir    string   // the alloc dir, beneath which task bind mounts are made
	alloc  Alloc
	logger hclog.Logger

	mu     sync.Mutex
	mounts []*MountState
	// nodeMu orders the node steps (unmountNode) of the alloc's release
	// and of a node-detach the leader asks for.
	nodeMu sync.Mutex
}

// NewVolumes returns the volumes of alloc allocID, whose alloc dir is
// dir, restored from what an earlier process persisted. mgr is nil on a
// client without a csi-bridge.
func NewVolumes(mgr *Manager, allocID, dir string, alloc Alloc, restored []*MountState, logger hclog.Logger) *Volumes {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	v := &Volumes{mgr: mgr, id: allocID, dir: dir, alloc: alloc, logger: logger}
	for _, m := range restored {
		if m != nil {
			v.mounts = append(v.mounts, m.copy())
		}
	}
	return v
}

// HasVolumes reports whether the group asks for CSI volumes.
func HasVolumes(tg *structs.TaskGroup) bool {
	return tg != nil && len(volumeAliases(tg)) > 0
}

// Snapshot copies the alloc's volume states, in alias order.
func (v *Volumes) Snapshot() []*MountState {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]*MountState, 0, len(v.mounts))
	for _, m := range v.mounts {
		out = append(out, m.copy())
	}
	slices.SortFunc(out, func(a, b *MountState) int { return strings.Compare(a.Alias, b.Alias) })
	return out
}

func (v *Volumes) put(m *MountState) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, o := range v.mounts {
		if o.Alias == m.Alias {
			v.mounts[i] = m
			return
		}
	}
	v.mounts = append(v.mounts, m)
}

func (v *Volumes) drop(alias string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.mounts = slices.DeleteFunc(v.mounts, func(m *MountState) bool { return m.Alias == alias })
}

func (v *Volumes) get(alias string) *MountState {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, m := range v.mounts {
		if m.Alias == alias {
			return m.copy()
		}
	}
	return nil
}

// Held reports whether task bind mounts may remain in the alloc dir,
// which must then not be removed (that would empty the volumes).
func (v *Volumes) Held() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, m := range v.mounts {
		if len(m.Binds) > 0 {
			return true
		}
	}
	return false
}

// Setup mounts the group's CSI volumes for alloc, those not mounted yet;
// ctx ends early on a stop. The error names the volume.
func (v *Volumes) Setup(ctx context.Context, alloc *structs.Allocation, tg *structs.TaskGroup) error {
	aliases := volumeAliases(tg)
	if len(aliases) == 0 {
		return nil
	}
	for _, alias := range aliases {
		req := tg.Volumes[alias]
		if v.mgr == nil {
			return fmt.Errorf("%s %q: this client has no csi-bridge to mount CSI volumes", volumeSetupFailPrefix, alias)
		}
		m := v.get(alias)
		if m != nil && m.Ready {
			continue
		}
		if m == nil {
			m = &MountState{Alias: alias, VolumeID: req.VolumeID(alloc.Name), Namespace: alloc.Namespace,
				Mode: structs.CSIVolumeClaimWrite, AccessMode: req.AccessMode, AttachmentMode: req.AttachmentMode, ReadOnly: req.ReadOnly}
			if req.ReadOnly {
				m.Mode = structs.CSIVolumeClaimRead
			}
		}
		save := func() {
			v.put(m.copy())
			v.alloc.Persist()
		}
		if err := v.mgr.mount(ctx, v, alloc, tg, req, m, save); err != nil {
			return fmt.Errorf("%s %q (%s): %w", volumeSetupFailPrefix, alias, m.VolumeID, err)
		}
	}
	return nil
}

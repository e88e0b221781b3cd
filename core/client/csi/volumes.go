package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
)

// The CSI volume hook of an alloc runner. Before any task of an alloc
// whose group asks for CSI volumes starts, the client, per volume (in
// alias order): claims it from the servers, waits for the volume's node
// plugin to be healthy here, stages it (when the plugin stages) and
// publishes it for the alloc, then bind-mounts the published target into
// each task that mounts it. Once every task is dead it undoes all of it
// and reports the claim node-detached: the servers' volume watcher owns
// the claim's release from there (controller detach, free). Progress is
// persisted with the alloc, so a restarted client can release what an
// earlier process mounted.
//
// Host paths, as Nomad's csimanager lays them out under
// <StateDir>/csi/node/<plugin id>:
//
//	staging/<namespace>/<volume id>/<usage>
//	per-alloc/<alloc id>/<volume id>/<usage>
//
// where usage is ro-|rw- + attachment mode + "-" + access mode.

// mount does the steps of one volume that m does not record as done.
// save records m's progress.
func (mgr *Manager) mount(ctx context.Context, v *Volumes, alloc *structs.Allocation, tg *structs.TaskGroup,
	req *structs.VolumeRequest, m *MountState, save func()) error {
	args := &structs.CSIVolumeClaimArgs{
		NodeID: mgr.nodeID, SecretID: mgr.secret, Namespace: m.Namespace, VolumeID: m.VolumeID,
		AllocationID: alloc.ID, Mode: m.Mode, AccessMode: m.AccessMode, AttachmentMode: m.AttachmentMode,
	}
	reply, err := mgr.claim(ctx, args)
	if err != nil {
		return err
	}
	vol := reply.Volume
	m.Claimed, m.PluginID, m.ExternalID = true, vol.PluginID, vol.RemoteID()
	save()
	for what, s := range map[string]string{"plugin ID": m.PluginID, "namespace": m.Namespace, "volume ID": m.VolumeID, "alloc ID": alloc.ID} {
		if err := pathElem(what, s); err != nil {
			return err
		}
	}
	sock, fp, err := mgr.waitNodePlugin(ctx, m.PluginID)
	if err != nil {
		return err
	}
	root := filepath.Join(mgr.root, m.PluginID)
	m.Usage = usageName(m.ReadOnly, m.AttachmentMode, m.AccessMode)
	m.TargetPath = filepath.Join(root, perAllocDirName, alloc.ID, m.VolumeID, m.Usage)
	m.StagingPath = ""
	if fp.NodeCaps.StageUnstage {
		m.StagingPath = filepath.Join(root, stagingDirName, m.Namespace, m.VolumeID, m.Usage)
	}
	capab := capability(req, vol)
	if m.StagingPath != "" {
		u := mgr.usage(usageKey(m))
		u.mu.Lock()
		u.users[alloc.ID] = true
		m.Staged = true
		save()
		err := os.MkdirAll(m.StagingPath, 0o700)
		if err == nil {
			err = nodeCall(ctx, func(cctx context.Context) error {
				return mgr.bridge.NodeStage(cctx, csibridge.NodeStageRequest{
					Socket: sock, VolumeID: m.ExternalID, PublishContext: maps.Clone(reply.PublishContext), StagingPath: m.StagingPath,
					Capability: capab, Secrets: maps.Clone(vol.Secrets), VolumeContext: maps.Clone(vol.Context),
				})
			})
		}
		u.mu.Unlock()
		if err != nil {
			return fmt.Errorf("stage: %w", err)
		}
	}
	m.Published = true
	save()
	dir := m.TargetPath
	if m.AttachmentMode == structs.CSIVolumeAttachmentModeBlockDevice {
		dir = filepath.Dir(dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := nodeCall(ctx, func(cctx context.Context) error {
		return mgr.bridge.NodePublish(cctx, csibridge.NodePublishRequest{
			Socket: sock, VolumeID: m.ExternalID, PublishContext: maps.Clone(reply.PublishContext), StagingPath: m.StagingPath,
			TargetPath: m.TargetPath, Capability: capab, ReadOnly: m.ReadOnly, Secrets: maps.Clone(vol.Secrets),
			VolumeContext: maps.Clone(vol.Context),
		})
	}); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	for _, t := range tg.Tasks {
		for _, vm := range t.VolumeMounts {
			if vm == nil || vm.Volume != m.Alias {
				continue
			}
			target, err := v.alloc.TaskPath(t.Name, strings.TrimLeft(vm.Destination, "/"))
			if err != nil {
				return fmt.Errorf("task %q: volume_mount destination: %w", t.Name, err)
			}
			if slices.Contains(m.Binds, target) {
				continue
			}
			m.Binds = append(m.Binds, target)
			save()
			id, err := bindMount(v.dir, m.TargetPath, target, m.AttachmentMode == structs.CSIVolumeAttachmentModeBlockDevice,
				m.ReadOnly || vm.ReadOnly)
			if err != nil {
				return fmt.Errorf("task %q: mount at %s: %w", t.Name, vm.Destination, err)
			}
			if m.BindIDs == nil {
				m.BindIDs = map[string]uint64{}
			}
			m.BindIDs[target] = id
			save()
		}
	}
	m.Ready = true
	save()
	return nil
}

// unmountNode undoes the node side of m: the task bind mounts, the
// publication and, for the last user, the staging.
func (mgr *Manager) unmountNode(ctx context.Context, allocID, dir string, m *MountState, save func()) error {
	for len(m.Binds) > 0 {
		target := m.Binds[len(m.Binds)-1]
		if err := unbind(dir, target, m.BindIDs[target]); err != nil {
			return err
		}
		m.Binds = m.Binds[:len(m.Binds)-1]
		delete(m.BindIDs, target)
		save()
	}
	sock := ""
	if m.Published || m.Staged {
		s, _, ok := mgr.plugins.healthyInstance(m.PluginID, true)
		if !ok {
			return fmt.Errorf("node plugin %q is not healthy on this node", m.PluginID)
		}
		sock = s
	}
	if m.Published {
		err := nodeCall(ctx, func(cctx context.Context) error {
			return mgr.bridge.NodeUnpublish(cctx, csibridge.NodeUnpublishRequest{Socket: sock, VolumeID: m.ExternalID, TargetPath: m.TargetPath})
		})
		if err != nil && !errors.Is(err, csibridge.ErrNotFound) {
			return fmt.Errorf("unpublish: %w", err)
		}
		m.Published = false
		save()
		_ = os.Remove(m.TargetPath)
	}
	if m.Staged {
		u := mgr.usage(usageKey(m))
		u.mu.Lock()
		delete(u.users, allocID)
		var err error
		if len(u.users) == 0 {
			err = nodeCall(ctx, func(cctx context.Context) error {
				return mgr.bridge.NodeUnstage(cctx, csibridge.NodeUnstageRequest{Socket: sock, VolumeID: m.ExternalID, StagingPath: m.StagingPath})
			})
			if errors.Is(err, csibridge.ErrNotFound) {
				err = nil
			}
			if err != nil {
				// Still staged: stay a user, so that the retry unstages.
				u.users[allocID] = true
			}
		}
		u.mu.Unlock()
		if err != nil {
			return fmt.Errorf("unstage: %w", err)
		}
		m.Staged = false
		save()
	}
	return nil
}

// unmountLocked runs unmountNode for the alias of m under the alloc's
// node-step lock, from the volume's latest state (a node-detach may have
// done some of the steps): m is updated in place. A volume no longer in
// the alloc's state was released meanwhile: nothing is left to undo.
func (mgr *Manager) unmountLocked(ctx context.Context, v *Volumes, m *MountState, save func()) error {
	v.nodeMu.Lock()
	defer v.nodeMu.Unlock()
	cur := v.get(m.Alias)
	if cur == nil {
		m.Binds, m.BindIDs, m.Published, m.Staged = nil, nil, false, false
		return nil
	}
	*m = *cur
	return mgr.unmountNode(ctx, v.id, v.dir, m, save)
}

// NodeDetach undoes the node side of the alloc's uses of a volume at the
// leader's order (`volume detach`): the task bind mounts, the publication
// and, for the last user, the staging, the steps the alloc's end takes.
// The tasks keep running without the volume. The claim stays recorded
// (Claimed), so that the alloc's end still reports it released; the
// leader frees it meanwhile. Idempotent: a volume this alloc does not
// mount (any more) is detached already.
func (v *Volumes) NodeDetach(ctx context.Context, ns, volID string) error {
	mgr := v.mgr
	for _, m := range v.Snapshot() {
		if m.Namespace != ns || m.VolumeID != volID {
			continue
		}
		if mgr == nil {
			return structs.NewError(structs.ErrUnavailable, "this client mounts no CSI volumes")
		}
		save := func() {
			v.put(m.copy())
			v.alloc.Persist()
		}
		if err := mgr.unmountLocked(ctx, v, m, save); err != nil {
			mgr.logger.Warn("failed to node-detach volume", "alloc_id", v.id, "volume_id", volID, "alias", m.Alias, "error", err)
			return fmt.Errorf("volume %q of allocation %s: %w", volID, v.id, err)
		}
		mgr.logger.Info("volume node-detached", "alloc_id", v.id, "volume_id", volID, "alias", m.Alias)
	}
	return nil
}

// unpublish tells the servers the claim is released up to state.
func (mgr *Manager) unpublish(ctx context.Context, allocID string, m *MountState, state structs.CSIVolumeClaimState) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := mgr.server.UnpublishVolume(cctx, &structs.CSIVolumeUnpublishArgs{
		NodeID: mgr.nodeID, SecretID: mgr.secret, Namespace: m.Namespace, VolumeID: m.VolumeID,
		Claim: &structs.CSIVolumeClaim{AllocationID: allocID, NodeID: mgr.nodeID, Mode: m.Mode,
			AccessMode: m.AccessMode, AttachmentMode: m.AttachmentMode, State: state},
	})
	if err != nil {
		mgr.logger.Warn("failed to release volume claim", "alloc_id", allocID, "volume_id", m.VolumeID, "state", state, "error", err)
	}
	return err
}

// finalReleaseErr tells a release the servers refused for good (the
// volume or its claim is gone, or the node may not release it) from one
// that may pass later (no leader, a server unreachable).
func finalReleaseErr(err error) bool {
	return errors.Is(err, structs.ErrNotFound) || errors.Is(err, structs.ErrPermissionDenied) || errors.Is(err, structs.ErrInvalid)
}

// detached reports the node steps of a volume done (node-detached) and
// forgets the volume. A report that may pass later is retried in the
// background with backoff: while the node lives, the servers' watcher
// cannot move the claim past unpublishing without it, and the volume's
// next claim waits for it. The volume stays in the alloc's state until
// then, so that a restarted client reports it again.
func (mgr *Manager) detached(ctx context.Context, v *Volumes, m *MountState) {
	if m.Claimed {
		if err := mgr.unpublish(ctx, v.id, m, structs.CSIVolumeClaimStateNodeDetached); err != nil && !finalReleaseErr(err) && ctx.Err() == nil {
			v.alloc.Persist()
			mgr.spawn(func() { mgr.retryDetached(v, m) })
			return
		}
	}
	v.drop(m.Alias)
	v.alloc.Persist()
}

// retryDetached retries a node-detached report until it passes, is
// refused for good or the client stops (a restarted client reports it
// again from the persisted state).
func (mgr *Manager) retryDetached(v *Volumes, m *MountState) {
	ctx := mgr.ctx
	for n := 1; ; n++ {
		if !waitOrDone(ctx, mgr.retry.next(n)) {
			return
		}
		err := mgr.unpublish(ctx, v.id, m, structs.CSIVolumeClaimStateNodeDetached)
		if ctx.Err() != nil {
			return
		}
		if err == nil || finalReleaseErr(err) {
			v.drop(m.Alias)
			v.alloc.Persist()
			return
		}
	}
}

// Release undoes every volume of the alloc once its tasks are dead and
// releases the claims: it reports what the node unpublished, and the
// servers take each claim from there to freed. A volume whose node steps
// fail is reported unpublishing at once and its node steps retried in the
// background. ctx ends with the alloc runner.
func (v *Volumes) Release(ctx context.Context) {
	if len(v.Snapshot()) == 0 {
		return
	}
	mgr := v.mgr
	if mgr == nil {
		v.logger.Warn("cannot release CSI volumes: no csi-bridge")
		return
	}
	for _, m := range v.Snapshot() {
		save := func() { v.put(m.copy()) }
		err := mgr.unmountLocked(ctx, v, m, save)
		if ctx.Err() != nil {
			v.alloc.Persist()
			return // a client shutdown: the next process releases
		}
		if err == nil {
			mgr.detached(ctx, v, m)
			continue
		}
		v.alloc.Persist()
		mgr.logger.Warn("failed to unmount volume; retrying in the background", "alloc_id", v.id, "volume_id", m.VolumeID, "error", err)
		if m.Claimed {
			_ = mgr.unpublish(ctx, v.id, m, structs.CSIVolumeClaimStateUnpublishing)
		}
		mgr.spawn(func() { mgr.retryRelease(v, m, save) })
	}
}

// retryRelease retries the node steps of a volume with backoff until
// they pass or the client stops (a restarted client resumes them from the
// persisted state). It never gives up: the claim stays unpublishing on the
// servers until this node says it has unpublished, or is down.
func (mgr *Manager) retryRelease(v *Volumes, m *MountState, save func()) {
	ctx := mgr.ctx
	for n := 1; ; n++ {
		if !waitOrDone(ctx, mgr.retry.next(n)) {
			return
		}
		err := mgr.unmountLocked(ctx, v, m, save)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			mgr.logger.Warn("failed to unmount volume; retrying", "alloc_id", v.id, "volume_id", m.VolumeID, "error", err)
			continue
		}
		mgr.detached(ctx, v, m)
		return
	}
}

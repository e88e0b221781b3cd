package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
)

// The CSI volume hook of an alloc runner. Before any task of an alloc
// whose group asks for CSI volumes starts, the client, per volume (in
// alias order): claims it from the servers, waits for the volume's node
// plugin to be healthy here, stages it (when the plugin stages) and
// publishes it for the alloc, then bind-mounts the published target into
// each task that mounts it. Once every task is dead it undoes all of it
// and releases the claim. Progress is persisted with the alloc, so a
// restarted client can release what an earlier process mounted.
//
// Host paths, as Nomad's csimanager lays them out under
// <StateDir>/csi/node/<plugin id>:
//
//	staging/<namespace>/<volume id>/<usage>
//	per-alloc/<alloc id>/<volume id>/<usage>
//
// where usage is ro-|rw- + attachment mode + "-" + access mode.

// Defaults of the volume hook.
const (
	defaultCSIPluginWait   = 2 * time.Minute
	defaultCSIRetryBase    = time.Second
	defaultCSIRetryMax     = time.Minute
	csiCallTimeout         = 2 * time.Minute
	csiNodeCallAttempts    = 3
	csiNodeCallRetryBase   = 100 * time.Millisecond
	csiNodeDirName         = "node"
	csiStagingDirName      = "staging"
	csiPerAllocDirName     = "per-alloc"
	csiVolumeSetupFailPref = "failed to set up volume"
)

// csiMountState is one volume of an alloc as far as the client got with
// it. No secret nor publish context is kept: releasing needs neither.
type csiMountState struct {
	Alias          string
	VolumeID       string
	Namespace      string
	PluginID       string `json:",omitempty"`
	ExternalID     string `json:",omitempty"`
	Mode           structs.CSIVolumeClaimMode
	AccessMode     structs.CSIVolumeAccessMode
	AttachmentMode structs.CSIVolumeAttachmentMode
	ReadOnly       bool   `json:",omitempty"`
	Usage          string `json:",omitempty"`
	StagingPath    string `json:",omitempty"` // empty: the plugin does not stage
	TargetPath     string `json:",omitempty"`
	// Claimed: the server holds a claim to release. Staged: this alloc
	// is a user of the staging target. Published: the target may be
	// published. Binds are the task bind mounts that may exist.
	Claimed   bool     `json:",omitempty"`
	Staged    bool     `json:",omitempty"`
	Published bool     `json:",omitempty"`
	Binds     []string `json:",omitempty"`
	// BindIDs are the kernel's mount IDs of the Binds made (by target):
	// a task that renames a directory above a bind moves the mount, and
	// unbind finds it by its ID.
	BindIDs map[string]uint64 `json:",omitempty"`
	Ready   bool              `json:",omitempty"`
}

func (m *csiMountState) copy() *csiMountState {
	c := *m
	c.Binds = slices.Clone(m.Binds)
	c.BindIDs = maps.Clone(m.BindIDs)
	return &c
}

// csiUsage counts the allocs using one staging target; its lock orders
// the stage and unstage calls of that target.
type csiUsage struct {
	mu    sync.Mutex
	users map[string]bool
}

// csiManager is the client's part of the volume hook that alloc runners
// share: the usage counts and the background release retries.
type csiManager struct {
	plugins *csiPlugins
	bridge  csibridge.Bridge
	server  ServerConn
	nodeID  string
	secret  string
	root    string // <StateDir>/csi/node
	logger  hclog.Logger
	// ctx ends with the client; spawn runs an owned goroutine.
	ctx   context.Context
	spawn func(func())

	pluginWait time.Duration
	retry      backoff

	mu     sync.Mutex
	usages map[string]*csiUsage
}

func newCSIManager(ctx context.Context, spawn func(func()), plugins *csiPlugins, bridge csibridge.Bridge, server ServerConn,
	nodeID, secret, stateDir string, pluginWait time.Duration, retry backoff, logger hclog.Logger) *csiManager {
	if pluginWait <= 0 {
		pluginWait = defaultCSIPluginWait
	}
	if retry.Base <= 0 {
		retry.Base = defaultCSIRetryBase
	}
	if retry.Max < retry.Base {
		retry.Max = max(defaultCSIRetryMax, retry.Base)
	}
	return &csiManager{plugins: plugins, bridge: bridge, server: server, nodeID: nodeID, secret: secret,
		root: filepath.Join(stateDir, "csi", csiNodeDirName), logger: logger, ctx: ctx, spawn: spawn,
		pluginWait: pluginWait, retry: retry, usages: map[string]*csiUsage{}}
}

func usageKey(m *csiMountState) string { return m.PluginID + "/" + m.StagingPath }

func (mgr *csiManager) usage(key string) *csiUsage {
	mgr.mu.Lock()
	defer mgr.mu.Unlock()
	u := mgr.usages[key]
	if u == nil {
		u = &csiUsage{users: map[string]bool{}}
		mgr.usages[key] = u
	}
	return u
}

// adopt counts a restored alloc's use of a staging target.
func (mgr *csiManager) adopt(allocID string, m *csiMountState) {
	if !m.Staged || m.StagingPath == "" {
		return
	}
	u := mgr.usage(usageKey(m))
	u.mu.Lock()
	u.users[allocID] = true
	u.mu.Unlock()
}

// csiUsageName is Nomad's usage: ro-|rw-, attachment, access.
func csiUsageName(readOnly bool, attach structs.CSIVolumeAttachmentMode, access structs.CSIVolumeAccessMode) string {
	p := "rw-"
	if readOnly {
		p = "ro-"
	}
	return p + string(attach) + "-" + string(access)
}

// pathElem refuses an ID that cannot be one path element.
func pathElem(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
		return fmt.Errorf("%s %q cannot be a directory name", what, s)
	}
	return nil
}

// csiVolumeAliases are the group's CSI volumes, sorted.
func csiVolumeAliases(tg *structs.TaskGroup) []string {
	var out []string
	for _, alias := range slices.Sorted(maps.Keys(tg.Volumes)) {
		if v := tg.Volumes[alias]; v != nil && v.Type == structs.VolumeTypeCSI {
			out = append(out, alias)
		}
	}
	return out
}

// retryableClaimErr tells the claim errors worth waiting out.
func retryableClaimErr(err error) bool {
	switch {
	case errors.Is(err, structs.ErrUnavailable), errors.Is(err, structs.ErrNoLeader):
		return true
	case errors.Is(err, structs.ErrConflict):
		// No kind tells a full volume from another conflict; Nomad's
		// message does.
		return strings.Contains(err.Error(), structs.CSIErrMaxClaims)
	}
	return false
}

// claim claims the volume, retrying what may pass, until ctx ends.
func (mgr *csiManager) claim(ctx context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
	for n := 1; ; n++ {
		cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
		reply, err := mgr.server.ClaimVolume(cctx, args)
		cancel()
		if err == nil {
			if reply == nil || reply.Volume == nil || reply.Volume.PluginID == "" {
				return nil, errors.New("claim reply names no volume plugin")
			}
			return reply, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("claim: %w (%v)", ctx.Err(), err)
		}
		if !retryableClaimErr(err) {
			return nil, fmt.Errorf("claim: %w", err)
		}
		wait := mgr.retry.next(n)
		mgr.logger.Warn("volume claim failed; retrying", "volume_id", args.VolumeID, "alloc_id", args.AllocationID, "error", err, "retry_in", wait)
		if !waitOrDone(ctx, wait) {
			return nil, fmt.Errorf("claim: %w (%v)", ctx.Err(), err)
		}
	}
}

// waitNodePlugin waits up to pluginWait for a healthy node instance of
// the plugin on this node.
func (mgr *csiManager) waitNodePlugin(ctx context.Context, pluginID string) (string, csibridge.Fingerprint, error) {
	timer := time.NewTimer(mgr.pluginWait)
	defer timer.Stop()
	for {
		ch := mgr.plugins.watch()
		if sock, fp, ok := mgr.plugins.healthyInstance(pluginID, true); ok {
			return sock, fp, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return "", csibridge.Fingerprint{}, fmt.Errorf("node plugin %q is not healthy on this node after %s", pluginID, mgr.pluginWait)
		case <-ctx.Done():
			return "", csibridge.Fingerprint{}, fmt.Errorf("waiting for node plugin %q: %w", pluginID, ctx.Err())
		}
	}
}

// nodeCall runs a node RPC with a timeout, retrying a few times the
// errors that say "later".
func nodeCall(ctx context.Context, call func(context.Context) error) error {
	var err error
	for i := range csiNodeCallAttempts {
		cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
		err = call(cctx)
		cancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, csibridge.ErrUnavailable) || errors.Is(err, csibridge.ErrAborted) ||
			errors.Is(err, csibridge.ErrResourceExhausted) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		if i+1 < csiNodeCallAttempts && !waitOrDone(ctx, csiNodeCallRetryBase<<i) {
			return err
		}
	}
	return err
}

func capability(req *structs.VolumeRequest, vol *structs.CSIVolume) csibridge.Capability {
	c := csibridge.Capability{AccessMode: string(req.AccessMode), AttachmentMode: string(req.AttachmentMode)}
	if req.AttachmentMode != structs.CSIVolumeAttachmentModeFilesystem {
		return c
	}
	if mo := vol.MountOptions; mo != nil {
		c.FSType, c.MountFlags = mo.FSType, slices.Clone(mo.MountFlags)
	}
	if mo := req.MountOptions; mo != nil {
		if mo.FSType != "" {
			c.FSType = mo.FSType
		}
		if len(mo.MountFlags) > 0 {
			c.MountFlags = slices.Clone(mo.MountFlags)
		}
	}
	return c
}

// mount does the steps of one volume that m does not record as done.
// save records m's progress.
func (mgr *csiManager) mount(ctx context.Context, ar *allocRunner, alloc *structs.Allocation, tg *structs.TaskGroup,
	req *structs.VolumeRequest, m *csiMountState, save func()) error {
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
	m.Usage = csiUsageName(m.ReadOnly, m.AttachmentMode, m.AccessMode)
	m.TargetPath = filepath.Join(root, csiPerAllocDirName, alloc.ID, m.VolumeID, m.Usage)
	m.StagingPath = ""
	if fp.NodeCaps.StageUnstage {
		m.StagingPath = filepath.Join(root, csiStagingDirName, m.Namespace, m.VolumeID, m.Usage)
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
			dirs, err := ar.dir.buildTask(t.Name)
			if err != nil {
				return err
			}
			dest := strings.TrimLeft(vm.Destination, "/")
			target, err := containedPath(dirs.Dir, dest)
			if err != nil {
				return fmt.Errorf("task %q: volume_mount destination: %w", t.Name, err)
			}
			if slices.Contains(m.Binds, target) {
				continue
			}
			m.Binds = append(m.Binds, target)
			save()
			id, err := ar.dir.bindMount(m.TargetPath, target, m.AttachmentMode == structs.CSIVolumeAttachmentModeBlockDevice,
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
func (mgr *csiManager) unmountNode(ctx context.Context, allocID string, dir *allocDir, m *csiMountState, save func()) error {
	for len(m.Binds) > 0 {
		target := m.Binds[len(m.Binds)-1]
		if err := dir.unbind(target, m.BindIDs[target]); err != nil {
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
func (mgr *csiManager) unmountLocked(ctx context.Context, ar *allocRunner, m *csiMountState, save func()) error {
	ar.csiNodeMu.Lock()
	defer ar.csiNodeMu.Unlock()
	cur := ar.csiGet(m.Alias)
	if cur == nil {
		m.Binds, m.BindIDs, m.Published, m.Staged = nil, nil, false, false
		return nil
	}
	*m = *cur
	return mgr.unmountNode(ctx, ar.id, ar.dir, m, save)
}

// nodeDetach undoes the node side of the alloc's uses of a volume at the
// leader's order (`volume detach`): the task bind mounts, the publication
// and, for the last user, the staging, the steps the alloc's end takes.
// The tasks keep running without the volume. The claim stays recorded
// (Claimed), so that the alloc's end still reports it released; the
// leader frees it meanwhile. Idempotent: a volume this alloc does not
// mount (any more) is detached already.
func (mgr *csiManager) nodeDetach(ctx context.Context, ar *allocRunner, ns, volID string) error {
	for _, m := range ar.csiSnapshot() {
		if m.Namespace != ns || m.VolumeID != volID {
			continue
		}
		save := func() {
			ar.csiPut(m.copy())
			ar.persist()
		}
		if err := mgr.unmountLocked(ctx, ar, m, save); err != nil {
			mgr.logger.Warn("failed to node-detach volume", "alloc_id", ar.id, "volume_id", volID, "alias", m.Alias, "error", err)
			return fmt.Errorf("volume %q of allocation %s: %w", volID, ar.id, err)
		}
		mgr.logger.Info("volume node-detached", "alloc_id", ar.id, "volume_id", volID, "alias", m.Alias)
	}
	return nil
}

// csiNodeDetach runs a node-detach op of the leader: see nodeDetach. An
// alloc this client does not run has nothing mounted here.
func (c *Client) csiNodeDetach(ctx context.Context, op *structs.CSIControllerOp) error {
	mgr := c.rcfg.Volumes
	if mgr == nil {
		return structs.NewError(structs.ErrUnavailable, "this client mounts no CSI volumes")
	}
	if op.AllocationID == "" || op.VolumeID == "" {
		return structs.NewError(structs.ErrInvalid, "node-detach names no allocation or volume")
	}
	c.mu.Lock()
	ar := c.runners[op.AllocationID]
	c.mu.Unlock()
	if ar == nil {
		return nil
	}
	return mgr.nodeDetach(ctx, ar, op.Namespace, op.VolumeID)
}

// unpublish tells the servers the claim is released up to state.
func (mgr *csiManager) unpublish(ctx context.Context, allocID string, m *csiMountState, state structs.CSIVolumeClaimState) error {
	cctx, cancel := context.WithTimeout(ctx, csiCallTimeout)
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
func (mgr *csiManager) detached(ctx context.Context, ar *allocRunner, m *csiMountState) {
	if m.Claimed {
		if err := mgr.unpublish(ctx, ar.id, m, structs.CSIVolumeClaimStateNodeDetached); err != nil && !finalReleaseErr(err) && ctx.Err() == nil {
			ar.persist()
			mgr.spawn(func() { mgr.retryDetached(ar, m) })
			return
		}
	}
	ar.csiDrop(m.Alias)
	ar.persist()
}

// retryDetached retries a node-detached report until it passes, is
// refused for good or the client stops (a restarted client reports it
// again from the persisted state).
func (mgr *csiManager) retryDetached(ar *allocRunner, m *csiMountState) {
	ctx := mgr.ctx
	for n := 1; ; n++ {
		if !waitOrDone(ctx, mgr.retry.next(n)) {
			return
		}
		err := mgr.unpublish(ctx, ar.id, m, structs.CSIVolumeClaimStateNodeDetached)
		if ctx.Err() != nil {
			return
		}
		if err == nil || finalReleaseErr(err) {
			ar.csiDrop(m.Alias)
			ar.persist()
			return
		}
	}
}

// release undoes every volume of the alloc and releases the claims. A
// volume whose node steps fail is released as Unpublishing at once and
// its node steps retried in the background.
func (mgr *csiManager) release(ctx context.Context, ar *allocRunner) {
	for _, m := range ar.csiSnapshot() {
		save := func() { ar.csiPut(m.copy()) }
		err := mgr.unmountLocked(ctx, ar, m, save)
		if ctx.Err() != nil {
			ar.persist()
			return // a client shutdown: the next process releases
		}
		if err == nil {
			mgr.detached(ctx, ar, m)
			continue
		}
		ar.persist()
		mgr.logger.Warn("failed to unmount volume; retrying in the background", "alloc_id", ar.id, "volume_id", m.VolumeID, "error", err)
		if m.Claimed {
			_ = mgr.unpublish(ctx, ar.id, m, structs.CSIVolumeClaimStateUnpublishing)
		}
		mgr.spawn(func() { mgr.retryRelease(ar, m, save) })
	}
}

// retryRelease retries the node steps of a volume with backoff until
// they pass or the client stops (a restarted client resumes them from the
// persisted state). It never gives up: the claim stays unpublishing on the
// servers until this node says it has unpublished, or is down.
func (mgr *csiManager) retryRelease(ar *allocRunner, m *csiMountState, save func()) {
	ctx := mgr.ctx
	for n := 1; ; n++ {
		if !waitOrDone(ctx, mgr.retry.next(n)) {
			return
		}
		err := mgr.unmountLocked(ctx, ar, m, save)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			mgr.logger.Warn("failed to unmount volume; retrying", "alloc_id", ar.id, "volume_id", m.VolumeID, "error", err)
			continue
		}
		mgr.detached(ctx, ar, m)
		return
	}
}

// csiSnapshot copies the alloc's volume states, in alias order.
func (ar *allocRunner) csiSnapshot() []*csiMountState {
	ar.csiMu.Lock()
	defer ar.csiMu.Unlock()
	out := make([]*csiMountState, 0, len(ar.csi))
	for _, m := range ar.csi {
		out = append(out, m.copy())
	}
	slices.SortFunc(out, func(a, b *csiMountState) int { return strings.Compare(a.Alias, b.Alias) })
	return out
}

func (ar *allocRunner) csiPut(m *csiMountState) {
	ar.csiMu.Lock()
	defer ar.csiMu.Unlock()
	for i, o := range ar.csi {
		if o.Alias == m.Alias {
			ar.csi[i] = m
			return
		}
	}
	ar.csi = append(ar.csi, m)
}

func (ar *allocRunner) csiDrop(alias string) {
	ar.csiMu.Lock()
	defer ar.csiMu.Unlock()
	ar.csi = slices.DeleteFunc(ar.csi, func(m *csiMountState) bool { return m.Alias == alias })
}

func (ar *allocRunner) csiGet(alias string) *csiMountState {
	ar.csiMu.Lock()
	defer ar.csiMu.Unlock()
	for _, m := range ar.csi {
		if m.Alias == alias {
			return m.copy()
		}
	}
	return nil
}

// csiHeld reports whether task bind mounts may remain in the alloc dir,
// which must then not be removed (that would empty the volumes).
func (ar *allocRunner) csiHeld() bool {
	ar.csiMu.Lock()
	defer ar.csiMu.Unlock()
	for _, m := range ar.csi {
		if len(m.Binds) > 0 {
			return true
		}
	}
	return false
}

// setupVolumes mounts the group's CSI volumes; ctx ends early on a stop.
// The error names the volume.
func (ar *allocRunner) setupVolumes(ctx context.Context) error {
	tg := ar.group()
	aliases := csiVolumeAliases(tg)
	if len(aliases) == 0 {
		return nil
	}
	mgr := ar.cfg.Volumes
	alloc := ar.allocSnapshot()
	for _, alias := range aliases {
		req := tg.Volumes[alias]
		if mgr == nil {
			return fmt.Errorf("%s %q: this client has no csi-bridge to mount CSI volumes", csiVolumeSetupFailPref, alias)
		}
		m := ar.csiGet(alias)
		if m != nil && m.Ready {
			continue
		}
		if m == nil {
			m = &csiMountState{Alias: alias, VolumeID: req.VolumeID(alloc.Name), Namespace: alloc.Namespace,
				Mode: structs.CSIVolumeClaimWrite, AccessMode: req.AccessMode, AttachmentMode: req.AttachmentMode, ReadOnly: req.ReadOnly}
			if req.ReadOnly {
				m.Mode = structs.CSIVolumeClaimRead
			}
		}
		save := func() {
			ar.csiPut(m.copy())
			ar.persist()
		}
		if err := mgr.mount(ctx, ar, alloc, tg, req, m, save); err != nil {
			return fmt.Errorf("%s %q (%s): %w", csiVolumeSetupFailPref, alias, m.VolumeID, err)
		}
	}
	return nil
}

// runVolumeSetup runs setupVolumes, cut short by a stop or destroy of
// the alloc; it reports whether tasks may go on (false also after a
// stop, whose kill the run loop handles).
func (ar *allocRunner) runVolumeSetup() (ok bool) {
	tg := ar.group()
	if tg == nil || len(csiVolumeAliases(tg)) == 0 {
		return true
	}
	ctx, cancel := context.WithCancel(ar.ctx)
	defer cancel()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-ar.changed:
				ar.mu.Lock()
				stop := ar.stopReq
				ar.mu.Unlock()
				if stop {
					cancel()
				}
			}
		}
	}()
	err := ar.setupVolumes(ctx)
	close(done)
	wg.Wait()
	ar.notify() // a wake-up the watcher took belongs to the run loop
	if err == nil {
		return true
	}
	ar.mu.Lock()
	stopped := ar.stopReq
	ar.mu.Unlock()
	if ar.ctx.Err() != nil || stopped {
		return false
	}
	ar.logger.Error("volume setup failed", "error", err)
	for _, tr := range ar.tasks {
		tr.failBeforeStart(evSetupFailure(err))
	}
	return false
}

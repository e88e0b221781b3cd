package csivolumes

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"

	"github.com/drover-org/drover/core/server/volumewatcher"
	"github.com/drover-org/drover/core/structs"
)

// Claims and releases of CSI volumes (Nomad's CSIVolume.Claim and
// CSIVolume.Unpublish). Both run on the leader. A claim is checked against
// the stored volume first, then published by a controller when the plugin
// needs it, and then written through Raft together with everything a
// release needs (CSI node ID, external volume ID, publish context,
// controller node), so a release never has to look them up.
//
// A release has one driver, the volume watcher on the leader (and `volume
// detach`, which runs the same steps at once): a client only reports how
// far its node got (unpublishing, node-detached), one write; the watcher,
// woken by it, detaches through the controller and frees, one more. Only
// the states where a release stops are written (see releaseOne), so a new
// leader resumes from the last one and repeats only idempotent steps.

// claimLocks serializes claims and releases of one volume on the leader,
// so a claim's check and its write see no other claim in between. Striped:
// bounded whatever the number of volumes.
type claimLocks [64]sync.Mutex

func (l *claimLocks) lock(ns, id string) func() {
	m := &l[l.stripe(ns, id)]
	m.Lock()
	return m.Unlock
}

func (l *claimLocks) stripe(ns, id string) int {
	h := fnv.New32a()
	h.Write([]byte(ns))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(len(l)))
}

// lockAll locks the stripes of several volumes, each once and in stripe
// order, so two callers locking overlapping sets cannot deadlock, and
// returns the unlock. Nothing holding a stripe takes another but through
// lockAll.
func (l *claimLocks) lockAll(keys [][2]string) func() {
	var held [len(claimLocks{})]bool
	for _, k := range keys {
		held[l.stripe(k[0], k[1])] = true
	}
	for i := range held {
		if held[i] {
			l[i].Lock()
		}
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			if held[i] {
				l[i].Unlock()
			}
		}
	}
}

// CheckClaimArgs refuses a malformed claim, before the node is
// authenticated.
func CheckClaimArgs(args *structs.CSIVolumeClaimArgs) error {
	switch {
	case args == nil:
		return structs.NewError(structs.ErrInvalid, "missing claim")
	case !structs.ValidCSIID(args.VolumeID):
		return structs.NewError(structs.ErrInvalid, "VolumeID %q: must be 1 to %d bytes of letters, digits and _ . - [ ]", args.VolumeID, structs.MaxCSIVolumeIDBytes)
	case args.AllocationID == "":
		return structs.NewError(structs.ErrInvalid, "AllocationID: missing")
	case !validClaimMode(args.Mode):
		return structs.NewError(structs.ErrInvalid, "Mode: %s is not a claim a client may take (read or write)", args.Mode)
	case args.AccessMode != structs.CSIVolumeAccessModeUnknown && !args.AccessMode.Valid():
		return structs.NewError(structs.ErrInvalid, "AccessMode: %q is not one of %s", args.AccessMode, "single-node-reader-only, single-node-writer, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer")
	case args.AttachmentMode != structs.CSIVolumeAttachmentModeUnknown && !args.AttachmentMode.Valid():
		return structs.NewError(structs.ErrInvalid, "AttachmentMode: %q is not file-system or block-device", args.AttachmentMode)
	case len(args.ExternalNodeID) > structs.MaxCSIExternalIDBytes:
		return structs.NewError(structs.ErrInvalid, "ExternalNodeID: longer than %d bytes", structs.MaxCSIExternalIDBytes)
	}
	return nil
}

// Claim claims a volume for one of node's allocations (args checked by
// CheckClaimArgs, node authenticated). It is idempotent: a claim the
// allocation already holds is answered from state.
func (vs *Volumes) Claim(ctx context.Context, node *structs.Node, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
	st := vs.state()
	alloc, err := st.AllocByID(nil, args.AllocationID)
	if err != nil {
		return nil, err
	}
	switch {
	case alloc == nil || alloc.NodeID != node.ID:
		return nil, structs.NewError(structs.ErrNotFound, "allocation %s not found on node %s", args.AllocationID, node.ID)
	case alloc.Namespace != args.Namespace:
		return nil, structs.NewError(structs.ErrInvalid, "allocation %s is in namespace %q, not %q", alloc.ID, alloc.Namespace, args.Namespace)
	case alloc.TerminalStatus():
		return nil, structs.NewError(structs.ErrInvalid, "allocation %s is terminal: it may not claim volumes", alloc.ID)
	}

	defer vs.locks.lock(args.Namespace, args.VolumeID)()
	vol, err := st.CSIVolumeByID(nil, args.Namespace, args.VolumeID)
	if err != nil {
		return nil, err
	}
	if vol == nil {
		return nil, structs.NewError(structs.ErrNotFound, "volume not found: %s", args.VolumeID)
	}
	if c := vol.ClaimFor(alloc.ID); c != nil && vol.PastClaims[alloc.ID] == nil {
		return &structs.CSIVolumeClaimReply{Volume: vol, Claim: c, PublishContext: maps.Clone(c.PublishContext), Index: vol.ModifyIndex}, nil
	}
	plugin, err := st.CSIPluginByID(nil, vol.PluginID)
	if err != nil {
		return nil, err
	}
	claim := &structs.CSIVolumeClaim{
		AllocationID: alloc.ID, NodeID: node.ID, ExternalNodeID: args.ExternalNodeID,
		Mode: args.Mode, AccessMode: args.AccessMode, AttachmentMode: args.AttachmentMode,
		State: structs.CSIVolumeClaimStateTaken, ExternalVolumeID: vol.RemoteID(),
	}
	if claim.ExternalNodeID == "" {
		if info := node.CSINodePlugins[vol.PluginID]; info != nil && info.NodeInfo != nil {
			claim.ExternalNodeID = info.NodeInfo.ID
		}
	}
	// Check before publishing: the write below applies the same rules, and
	// nothing else claims this volume while the lock is held.
	if err := vol.Copy().Claim(claim, alloc); err != nil {
		return nil, err
	}
	published := false
	if NeedsController(plugin) {
		if claim.ExternalNodeID == "" {
			return nil, structs.NewError(structs.ErrUnavailable, "volume %q: node %s reports no CSI node ID for plugin %s yet", vol.ID, node.ID, vol.PluginID)
		}
		op := &structs.CSIControllerOp{
			Kind: structs.CSIControllerOpPublish, PluginID: vol.PluginID,
			ExternalVolumeID: claim.ExternalVolumeID, ExternalNodeID: claim.ExternalNodeID,
			AccessMode: claim.AccessMode, AttachmentMode: claim.AttachmentMode, MountOptions: vol.MountOptions,
			ReadOnly: claim.Mode == structs.CSIVolumeClaimRead, Secrets: vol.Secrets, VolumeContext: vol.Context,
		}
		r, by, err := vs.ControllerCall(ctx, op)
		if err != nil {
			return nil, structs.NewError(kindOf(err), "volume %q: controller publish: %v", vol.ID, err)
		}
		if len(r.PublishContext) > structs.MaxCSIPublishContextEntries {
			return nil, structs.NewError(structs.ErrInvalid, "volume %q: controller publish context has %d entries, more than %d", vol.ID, len(r.PublishContext), structs.MaxCSIPublishContextEntries)
		}
		claim.PublishContext, claim.ControllerNodeID = r.PublishContext, by
		published = true
	}
	idx, err := vs.apply(structs.CSIVolumeClaimBatchRequestType, &structs.CSIVolumeClaimBatchRequest{
		Claims: []*structs.CSIVolumeClaimRequest{{Namespace: vol.Namespace, VolumeID: vol.ID, Claim: claim}},
	})
	if err != nil {
		if published && refused(err) {
			// The claim was refused for good: undo the attach.
			vs.controllerUnpublish(ctx, vol, claim)
		}
		return nil, err
	}
	vs.logger.Info("csi volume claimed", "namespace", vol.Namespace, "volume", vol.ID, "alloc_id", alloc.ID,
		"node_id", node.ID, "mode", claim.Mode.String(), "controller_node_id", claim.ControllerNodeID, "index", idx)
	out, err := vs.state().CSIVolumeByID(nil, vol.Namespace, vol.ID)
	if err != nil {
		return nil, err
	}
	stored := claim
	if out != nil {
		if c := out.ClaimFor(alloc.ID); c != nil {
			stored = c
		}
	}
	return &structs.CSIVolumeClaimReply{Volume: out, Claim: stored, PublishContext: maps.Clone(claim.PublishContext), Index: idx}, nil
}

// refused reports a deterministic refusal by the FSM (as opposed to an
// apply whose outcome is unknown).
func refused(err error) bool {
	return errors.Is(err, structs.ErrInvalid) || errors.Is(err, structs.ErrConflict) || errors.Is(err, structs.ErrNotFound)
}

// kindOf returns err's kind, ErrUnavailable for an unkinded one.
func kindOf(err error) error {
	for _, k := range []error{structs.ErrNotFound, structs.ErrPermissionDenied, structs.ErrNoLeader, structs.ErrInvalid,
		structs.ErrConflict, structs.ErrTooLarge} {
		if errors.Is(err, k) {
			return k
		}
	}
	return structs.ErrUnavailable
}

func (vs *Volumes) controllerUnpublish(ctx context.Context, vol *structs.CSIVolume, c *structs.CSIVolumeClaim) {
	_, _, err := vs.ControllerCall(ctx, &structs.CSIControllerOp{
		Kind: structs.CSIControllerOpUnpublish, PluginID: vol.PluginID,
		ExternalVolumeID: c.ExternalVolumeID, ExternalNodeID: c.ExternalNodeID, Secrets: vol.Secrets,
	})
	if err != nil && !errors.Is(err, structs.ErrNotFound) {
		vs.logger.Warn("csi controller unpublish of a refused claim failed; the volume may stay attached",
			"namespace", vol.Namespace, "volume", vol.ID, "node_id", c.NodeID, "error", err)
	}
}

// Unpublish is a client's release of one of its (authenticated) node's
// claims: it records how far the node got (see reportRelease).
func (vs *Volumes) Unpublish(node *structs.Node, args *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error) {
	c := args.Claim
	switch {
	case c.AllocationID == "":
		return nil, structs.NewError(structs.ErrInvalid, "Claim.AllocationID: missing")
	case c.NodeID != "" && c.NodeID != node.ID:
		return nil, structs.NewError(structs.ErrPermissionDenied, "a client releases only its own node's claims")
	case !validClaimMode(c.Mode):
		return nil, structs.NewError(structs.ErrInvalid, "Claim.Mode: %s is not a claim a client releases (read or write)", c.Mode)
	case c.State != structs.CSIVolumeClaimStateUnpublishing && c.State != structs.CSIVolumeClaimStateNodeDetached:
		return nil, structs.NewError(structs.ErrInvalid, "Claim.State: a client reports unpublishing or node-detached, not %s", c.State)
	}
	idx, err := vs.reportRelease(args.Namespace, args.VolumeID, c.AllocationID, node.ID, c.State)
	if err != nil {
		return nil, err
	}
	return &structs.CSIVolumeUnpublishReply{Index: idx}, nil
}

// reportRelease records how far a client got with the node steps of its
// allocation's claim: node-detached (done) or unpublishing (not yet). It
// only records: the volume watcher, woken by the write, owns the release
// from there (controller detach, free), so a claim has one driver and a
// client's report costs one write. A report behind the stored state
// writes nothing. An unpublishing claim of a live node answers that it
// waits for the node, as the watcher would.
func (vs *Volumes) reportRelease(ns, volID, allocID, nodeID string, reported structs.CSIVolumeClaimState) (uint64, error) {
	defer vs.locks.lock(ns, volID)()
	vol, err := vs.state().CSIVolumeRaw(nil, ns, volID)
	if err != nil {
		return 0, err
	}
	if vol == nil {
		return 0, structs.NewError(structs.ErrNotFound, "volume not found: %s", volID)
	}
	held := vol.ClaimFor(allocID)
	if held == nil {
		return vol.ModifyIndex, nil // freed meanwhile
	}
	if held.NodeID != nodeID {
		return 0, structs.NewError(structs.ErrPermissionDenied, "the claim of allocation %s is on another node", allocID)
	}
	claim := held.Copy()
	claim.State = reported
	idx := vol.ModifyIndex
	if past := vol.PastClaims[allocID]; RecordReport(past, reported) {
		b := newClaimBatch(vol)
		b.add(claim, reported)
		if idx, err = vs.writeClaimBatch(b); err != nil {
			return idx, err
		}
	} else {
		claim.State = past.State
	}
	if claim.State == structs.CSIVolumeClaimStateUnpublishing {
		node, err := vs.state().NodeByID(nil, nodeID)
		if err != nil {
			return idx, err
		}
		if node != nil && !node.TerminalStatus() {
			return idx, structs.NewError(structs.ErrUnavailable, "volume %q: waiting for node %s to unpublish the claim of allocation %s",
				vol.ID, nodeID, allocID)
		}
	}
	return idx, nil
}

// UnpublishClaim drives one claim towards freed (see releaseOne). A claim
// without an allocation ID (Mode GC, with NodeID: `volume detach`)
// releases every claim of that node. It must run on the leader.
func (vs *Volumes) UnpublishClaim(ctx context.Context, ns, volID string, claim *structs.CSIVolumeClaim) (uint64, error) {
	if claim == nil {
		return 0, structs.NewError(structs.ErrInvalid, "missing volume claim")
	}
	if claim.AllocationID != "" {
		idx, errs, err := vs.releaseClaims(ctx, ns, volID, []*structs.CSIVolumeClaim{claim})
		if err != nil {
			return idx, err
		}
		return idx, errs[0]
	}
	return vs.detachNode(ctx, ns, volID, claim.NodeID)
}

// releaseClaims runs the releases of claims of one volume (a volume
// watcher's pass), in order, and writes the states they reach in one Raft
// entry. It returns the entry's index, each claim's error (nil: freed),
// and the error that failed them all (no volume, the write failed).
func (vs *Volumes) releaseClaims(ctx context.Context, ns, volID string, claims []*structs.CSIVolumeClaim) (uint64, []error, error) {
	if volID == "" {
		return 0, nil, structs.NewError(structs.ErrInvalid, "missing volume ID")
	}
	defer vs.locks.lock(ns, volID)()
	vol, err := vs.state().CSIVolumeRaw(nil, ns, volID)
	if err != nil {
		return 0, nil, err
	}
	if vol == nil {
		return 0, nil, structs.NewError(structs.ErrNotFound, "no such volume: %s", volID)
	}
	b := newClaimBatch(vol)
	errs := make([]error, len(claims))
	for i, c := range claims {
		if c == nil || c.AllocationID == "" {
			errs[i] = structs.NewError(structs.ErrInvalid, "a released claim names no allocation")
			continue
		}
		errs[i] = vs.releaseOne(ctx, b, c, false)
	}
	idx, err := vs.writeClaimBatch(b)
	return idx, errs, err
}

// detachNode is `volume detach`: it releases every claim node holds of
// the volume, node-detaching those of a live node through its client, and
// writes what they reach in one Raft entry. The first claim that fails
// stops it.
func (vs *Volumes) detachNode(ctx context.Context, ns, volID, nodeID string) (uint64, error) {
	if volID == "" {
		return 0, structs.NewError(structs.ErrInvalid, "missing volume ID")
	}
	if nodeID == "" {
		return 0, structs.NewError(structs.ErrInvalid, "detach requires node ID")
	}
	if len(nodeID) > maxDetachNodeIDBytes {
		return 0, structs.NewError(structs.ErrInvalid, "node ID: longer than %d bytes", maxDetachNodeIDBytes)
	}
	defer vs.locks.lock(ns, volID)()
	vol, err := vs.state().CSIVolumeRaw(nil, ns, volID)
	if err != nil {
		return 0, err
	}
	if vol == nil {
		return 0, structs.NewError(structs.ErrNotFound, "no such volume: %s", volID)
	}
	var ids []string
	for _, m := range []map[string]*structs.CSIVolumeClaim{vol.ReadClaims, vol.WriteClaims, vol.PastClaims} {
		for id, c := range m {
			if c != nil && c.NodeID == nodeID && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		// Nothing to detach: say why, rather than succeed at nothing.
		node, err := vs.state().NodeByID(nil, nodeID)
		if err != nil {
			return 0, err
		}
		if node == nil {
			return 0, structs.NewError(structs.ErrNotFound, "node not found: %s", nodeID)
		}
		return 0, structs.NewError(structs.ErrNotFound, "node %s holds no claim of volume %q", nodeID, vol.ID)
	}
	slices.Sort(ids)
	b := newClaimBatch(vol)
	for _, id := range ids {
		cur := b.vol.ClaimFor(id)
		if cur == nil {
			continue
		}
		step := &structs.CSIVolumeClaim{AllocationID: id, NodeID: nodeID, Mode: cur.Mode, State: structs.CSIVolumeClaimStateUnpublishing}
		if err := vs.releaseOne(ctx, b, step, true); err != nil {
			// What the claims before it reached is kept.
			if idx, werr := vs.writeClaimBatch(b); werr != nil {
				return idx, werr
			}
			return b.vol.ModifyIndex, err
		}
	}
	return vs.writeClaimBatch(b)
}

// maxDetachNodeIDBytes bounds the node ID of a detach (it is looked up,
// never stored).
const maxDetachNodeIDBytes = 128

// claimBatch gathers the claim states one pass over a volume reaches, to
// write them in one Raft entry. vol is the volume as the batch leaves it,
// so that each release of the pass sees those before it.
type claimBatch struct {
	vol    *structs.CSIVolume
	claims []*structs.CSIVolumeClaimRequest
	frees  bool
}

func newClaimBatch(vol *structs.CSIVolume) *claimBatch {
	return &claimBatch{vol: vol.Copy()}
}

// add records claim at state.
func (b *claimBatch) add(claim *structs.CSIVolumeClaim, state structs.CSIVolumeClaimState) {
	c := claim.Copy()
	c.State = state
	b.claims = append(b.claims, &structs.CSIVolumeClaimRequest{Namespace: b.vol.Namespace, VolumeID: b.vol.ID, Claim: c})
	b.frees = b.frees || state == structs.CSIVolumeClaimStateReadyToFree
	// The FSM applies the same; a release state is never refused.
	_ = b.vol.Claim(c.Copy(), nil)
}

// writeClaimBatch writes the batch (nothing when it is empty) and returns
// the volume's index after it. A batch that frees claims carries evals of
// the jobs waiting for the volume.
func (vs *Volumes) writeClaimBatch(b *claimBatch) (uint64, error) {
	if len(b.claims) == 0 {
		return b.vol.ModifyIndex, nil
	}
	req := &structs.CSIVolumeClaimBatchRequest{Claims: b.claims}
	if b.frees {
		evals, err := vs.WaiterEvals(b.vol.Namespace, []string{b.vol.ID})
		if err != nil {
			return b.vol.ModifyIndex, err
		}
		req.Evals = evals
	}
	idx, err := vs.apply(structs.CSIVolumeClaimBatchRequestType, req)
	if err != nil {
		return b.vol.ModifyIndex, err
	}
	for _, r := range b.claims {
		if c := r.Claim; c.State == structs.CSIVolumeClaimStateReadyToFree {
			vs.logger.Info("csi volume claim freed", "namespace", r.Namespace, "volume", r.VolumeID, "alloc_id", c.AllocationID,
				"node_id", c.NodeID, "mode", c.Mode.String(), "index", idx)
		}
	}
	return idx, nil
}

// releaseOne takes one allocation's claim from the state it is in to
// freed, adding the state it reaches to b. With pushNode (`volume
// detach`), a claim whose live node has not unpublished is node-detached
// by that node's client on the leader's order; without it (the volume
// watcher), the release waits for the client to report it.
//
// Only the states a release may stop at are written: unpublishing while
// it waits for a live node or when the node fails a detach, node-detached
// when the controller detach fails, and freed. A step done but not
// written (the node found down or node-detached, the controller detached)
// is done again by whoever resumes from the last state written, a new
// leader included: each is idempotent (a controller's NotFound counts as
// detached). So a release the client reported costs its report and the
// free, and a pass frees all it can of a volume in one write.
func (vs *Volumes) releaseOne(ctx context.Context, b *claimBatch, in *structs.CSIVolumeClaim, pushNode bool) error {
	vol := b.vol
	held := vol.ClaimFor(in.AllocationID)
	if held == nil {
		return nil // freed already
	}
	claim := held.Copy()
	past := vol.PastClaims[in.AllocationID]
	claim.State = ResumeState(past, in.State)
	// stop keeps the state reached, unless it is the one stored: where
	// the release stops, a later one resumes.
	stop := func(err error) error {
		if WriteAtStop(past, claim.State) {
			b.add(claim, claim.State)
		}
		return err
	}
	steps := StepsFrom(claim.State)

	if steps.Node {
		// The node unpublishes its own mounts: a client reports
		// NodeDetached once it has. Without it, the node must be gone or
		// down before the claim moves on, or (detach) be told to.
		node, err := vs.state().NodeByID(nil, claim.NodeID)
		if err != nil {
			return stop(err)
		}
		switch NodeStepFor(node != nil && !node.TerminalStatus(), pushNode) {
		case NodeWait:
			return stop(errWaitForNode{structs.NewError(structs.ErrUnavailable, "volume %q: waiting for node %s to unpublish the claim of allocation %s",
				vol.ID, claim.NodeID, claim.AllocationID)})
		case NodePush:
			if err := vs.nodeDetach(ctx, vol, claim); err != nil {
				return stop(err)
			}
		}
		claim.State = structs.CSIVolumeClaimStateNodeDetached
	}

	if steps.Controller {
		plugin, err := vs.state().CSIPluginByID(nil, vol.PluginID)
		if err != nil {
			return stop(err)
		}
		if ControllerUnpublishes(plugin, claim) && !vs.otherLiveClaimOnNode(vol, claim) {
			_, _, err := vs.ControllerCall(ctx, &structs.CSIControllerOp{
				Kind: structs.CSIControllerOpUnpublish, PluginID: vol.PluginID,
				ExternalVolumeID: claim.ExternalVolumeID, ExternalNodeID: claim.ExternalNodeID, Secrets: vol.Secrets,
			})
			if err != nil && !errors.Is(err, structs.ErrNotFound) {
				return stop(structs.NewError(kindOf(err), "could not detach from controller: %v", err))
			}
		}
		claim.State = structs.CSIVolumeClaimStateControllerDetached
	}
	b.add(claim, structs.CSIVolumeClaimStateReadyToFree)
	return nil
}

// errWaitForNode is a release waiting for its live node's client to
// report the node steps done. That report, or the node going down, writes
// the volume: the volume watcher waits for the write, not a backoff.
type errWaitForNode struct{ error }

func (e errWaitForNode) Unwrap() error { return e.error }

// nodeDetach has the client of claim's node unpublish and unstage the
// claim's allocation's volume, through the node's queue on the leader
// (the client pulls it like controller work), and waits up to
// csiControllerTimeout for its answer. The client's error comes back
// with its kind.
func (vs *Volumes) nodeDetach(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error {
	ctx, cancel := context.WithTimeout(ctx, csiControllerTimeout)
	defer cancel()
	op := &structs.CSIControllerOp{
		Kind: structs.CSIControllerOpNodeDetach, PluginID: vol.PluginID, ExternalVolumeID: claim.ExternalVolumeID,
		Namespace: vol.Namespace, VolumeID: vol.ID, AllocationID: claim.AllocationID,
	}
	_, running, err := vs.queue.call(ctx, claim.NodeID, op)
	if running != nil {
		// The client still runs it: forget it once it answers.
		vs.queue.linger(running, func() {})
	}
	if err != nil {
		return structs.NewError(kindOf(err), "volume %q: node %s could not unpublish the claim of allocation %s: %v",
			vol.ID, claim.NodeID, claim.AllocationID, err)
	}
	vs.logger.Info("csi volume node-detached", "namespace", vol.Namespace, "volume", vol.ID, "alloc_id", claim.AllocationID,
		"node_id", claim.NodeID)
	return nil
}

// otherLiveClaimOnNode reports whether another allocation that is not
// terminal still claims vol on claim's node: the volume stays attached.
func (vs *Volumes) otherLiveClaimOnNode(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) bool {
	for _, m := range []map[string]*structs.CSIVolumeClaim{vol.ReadClaims, vol.WriteClaims} {
		for id, c := range m {
			if id == claim.AllocationID || c == nil || c.NodeID != claim.NodeID || vol.PastClaims[id] != nil {
				continue
			}
			a, err := vs.state().AllocByID(nil, id)
			if err == nil && a != nil && !a.ClientTerminalStatus() {
				return true
			}
		}
	}
	return false
}

// CheckDoneArgs refuses a malformed report of controller results, before
// the node is authenticated.
func CheckDoneArgs(args *structs.CSIControllerDoneArgs) error {
	if args == nil {
		return structs.NewError(structs.ErrInvalid, "missing results")
	}
	if len(args.Results) > structs.MaxCSIControllerOpsPerPoll {
		return structs.NewError(structs.ErrInvalid, "Results: %d, more than %d", len(args.Results), structs.MaxCSIControllerOpsPerPoll)
	}
	return nil
}

// ControllerDone takes an authenticated controller client's results
// (args checked by CheckDoneArgs); overlong messages are cut.
func (vs *Volumes) ControllerDone(args *structs.CSIControllerDoneArgs) {
	for _, r := range args.Results {
		if r != nil && len(r.Error) > structs.MaxCSIErrorBytes {
			r.Error = r.Error[:structs.MaxCSIErrorBytes]
		}
		if r != nil && r.Validation != nil && len(r.Validation.Message) > structs.MaxCSIErrorBytes {
			r.Validation.Message = r.Validation.Message[:structs.MaxCSIErrorBytes]
		}
	}
	vs.queue.done(args.NodeID, args.Results)
}

// UnpublishClaims is the volume watcher's release of claims of one volume
// (volumewatcher.Unpublisher): one pass, one write. A claim waiting for
// its live node's client is volumewatcher.ErrWaiting.
func (vs *Volumes) UnpublishClaims(ctx context.Context, ns, volID string, claims []*structs.CSIVolumeClaim) []error {
	_, errs, err := vs.releaseClaims(ctx, ns, volID, claims)
	if err != nil {
		errs = make([]error, len(claims))
		for i := range errs {
			errs[i] = err
		}
	}
	for i, e := range errs {
		if errors.As(e, new(errWaitForNode)) {
			errs[i] = fmt.Errorf("%w: %w", volumewatcher.ErrWaiting, e)
		}
	}
	return errs
}

// LockStripes is the number of claim lock stripes: however many volumes,
// at most this many claims run at once.
const LockStripes = len(claimLocks{})

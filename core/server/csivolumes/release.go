package csivolumes

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/drover-org/drover/core/server/volumewatcher"
	"github.com/drover-org/drover/core/structs"
)

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

package csivolumes

import (
	"context"
	"errors"
	"maps"

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

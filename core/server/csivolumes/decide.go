package csivolumes

import "github.com/drover-org/drover/core/structs"

// The pure decisions of claims and releases. A release takes a claim
// through unpublishing (the node unmounts) → node-detached (a controller
// detaches, when the plugin needs one) → controller-detached → freed
// (ready-to-free). Only the states where a release stops are written.

// NeedsController reports whether claims of the plugin's volumes go
// through a controller's publish and unpublish: the plugin requires a
// controller and none of its controllers lacks attach/detach.
func NeedsController(p *structs.CSIPlugin) bool {
	if p == nil || !p.ControllerRequired {
		return false
	}
	for _, info := range p.Controllers {
		if info != nil && info.ControllerInfo != nil && !info.ControllerInfo.SupportsAttachDetach {
			return false
		}
	}
	return true
}

func validClaimMode(m structs.CSIVolumeClaimMode) bool {
	return m == structs.CSIVolumeClaimRead || m == structs.CSIVolumeClaimWrite
}

// ReleaseRank orders the states of a release (the wire numbers do not):
// 0 for a state that is not one.
func ReleaseRank(st structs.CSIVolumeClaimState) int {
	switch st {
	case structs.CSIVolumeClaimStateUnpublishing:
		return 1
	case structs.CSIVolumeClaimStateNodeDetached:
		return 2
	case structs.CSIVolumeClaimStateControllerDetached:
		return 3
	case structs.CSIVolumeClaimStateReadyToFree:
		return 4
	}
	return 0
}

// ResumeState is the state a release resumes from: the furthest of
// unpublishing, the stored past claim's state (nil: none) and the state
// asked for.
func ResumeState(past *structs.CSIVolumeClaim, asked structs.CSIVolumeClaimState) structs.CSIVolumeClaimState {
	st := structs.CSIVolumeClaimStateUnpublishing
	if past != nil && ReleaseRank(past.State) > ReleaseRank(st) {
		st = past.State
	}
	if ReleaseRank(asked) > ReleaseRank(st) {
		st = asked
	}
	return st
}

// RecordReport reports whether a client's report of a release state
// moves the stored release (past, nil: none) forward: a report behind it
// writes nothing.
func RecordReport(past *structs.CSIVolumeClaim, reported structs.CSIVolumeClaimState) bool {
	return past == nil || ReleaseRank(past.State) < ReleaseRank(reported)
}

// WriteAtStop reports whether a release that stops at st writes it: not
// when it is the state stored already.
func WriteAtStop(past *structs.CSIVolumeClaim, st structs.CSIVolumeClaimState) bool {
	return past == nil || past.State != st
}

// Steps are what a release still needs before the claim is freed.
type Steps struct {
	// Node: the node unpublishes (or is gone).
	Node bool
	// Controller: a controller detaches, if the plugin needs one
	// (ControllerUnpublishes).
	Controller bool
}

// StepsFrom returns the steps a release resuming from st needs.
func StepsFrom(st structs.CSIVolumeClaimState) Steps {
	return Steps{
		Node:       st == structs.CSIVolumeClaimStateUnpublishing,
		Controller: st == structs.CSIVolumeClaimStateUnpublishing || st == structs.CSIVolumeClaimStateNodeDetached,
	}
}

// NodeStep is what the node step of a release does.
type NodeStep int

const (
	// NodeGone: the node is gone or down; the step is done.
	NodeGone NodeStep = iota
	// NodeWait: wait for the live node's client to report it done.
	NodeWait
	// NodePush: have the live node's client node-detach now (`volume
	// detach`).
	NodePush
)

// NodeStepFor returns the node step for a node that is live or not, when
// the release pushes the node (detach) or waits for it (the watcher).
func NodeStepFor(nodeLive, pushNode bool) NodeStep {
	switch {
	case !nodeLive:
		return NodeGone
	case pushNode:
		return NodePush
	}
	return NodeWait
}

// ControllerUnpublishes reports whether releasing claim goes through a
// controller unpublish: the plugin needs a controller and the claim
// knows its node's CSI ID. (No other live claim on the node must hold
// the volume attached; the caller checks that last, it reads state.)
func ControllerUnpublishes(p *structs.CSIPlugin, claim *structs.CSIVolumeClaim) bool {
	return NeedsController(p) && claim.ExternalNodeID != ""
}

package csivolumes

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

const (
	taken     = structs.CSIVolumeClaimStateTaken
	unpub     = structs.CSIVolumeClaimStateUnpublishing
	nodeDet   = structs.CSIVolumeClaimStateNodeDetached
	ctrlDet   = structs.CSIVolumeClaimStateControllerDetached
	readyFree = structs.CSIVolumeClaimStateReadyToFree
)

func past(st structs.CSIVolumeClaimState) *structs.CSIVolumeClaim {
	return &structs.CSIVolumeClaim{AllocationID: "a", State: st}
}

func TestResumeState(t *testing.T) {
	for _, tc := range []struct {
		name  string
		past  *structs.CSIVolumeClaim
		asked structs.CSIVolumeClaimState
		want  structs.CSIVolumeClaimState
	}{
		{"nothing stored, nothing asked", nil, taken, unpub},
		{"nothing stored, client reported node-detached", nil, nodeDet, nodeDet},
		{"stored node-detached, asked unpublishing", past(nodeDet), unpub, nodeDet},
		{"stored unpublishing, asked node-detached", past(unpub), nodeDet, nodeDet},
		{"stored controller-detached", past(ctrlDet), unpub, ctrlDet},
		{"stored ready-to-free, asked node-detached", past(readyFree), nodeDet, readyFree},
		{"stored taken is no release state", past(taken), taken, unpub},
	} {
		if got := ResumeState(tc.past, tc.asked); got != tc.want {
			t.Errorf("%s: ResumeState = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRecordReportAndWriteAtStop(t *testing.T) {
	for _, tc := range []struct {
		name             string
		past             *structs.CSIVolumeClaim
		st               structs.CSIVolumeClaimState
		record, writeAtS bool
	}{
		{"first report", nil, unpub, true, true},
		{"report ahead", past(unpub), nodeDet, true, true},
		{"same report again", past(nodeDet), nodeDet, false, false},
		{"report behind", past(nodeDet), unpub, false, true},
		{"report behind a free", past(readyFree), nodeDet, false, true},
	} {
		if got := RecordReport(tc.past, tc.st); got != tc.record {
			t.Errorf("%s: RecordReport = %v, want %v", tc.name, got, tc.record)
		}
		if got := WriteAtStop(tc.past, tc.st); got != tc.writeAtS {
			t.Errorf("%s: WriteAtStop = %v, want %v", tc.name, got, tc.writeAtS)
		}
	}
}

func TestStepsFrom(t *testing.T) {
	for _, tc := range []struct {
		st   structs.CSIVolumeClaimState
		want Steps
	}{
		{unpub, Steps{Node: true, Controller: true}},
		{nodeDet, Steps{Controller: true}},
		{ctrlDet, Steps{}},
		{readyFree, Steps{}},
	} {
		if got := StepsFrom(tc.st); got != tc.want {
			t.Errorf("StepsFrom(%s) = %+v, want %+v", tc.st, got, tc.want)
		}
	}
}

func TestNodeStepFor(t *testing.T) {
	for _, tc := range []struct {
		live, push bool
		want       NodeStep
	}{
		{false, false, NodeGone},
		{false, true, NodeGone},
		{true, false, NodeWait},
		{true, true, NodePush},
	} {
		if got := NodeStepFor(tc.live, tc.push); got != tc.want {
			t.Errorf("NodeStepFor(live=%v, push=%v) = %d, want %d", tc.live, tc.push, got, tc.want)
		}
	}
}

func TestControllerUnpublishes(t *testing.T) {
	ctrl := func(attach bool) *structs.CSIInfo {
		return &structs.CSIInfo{Healthy: true, ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: attach}}
	}
	withNode := &structs.CSIVolumeClaim{ExternalNodeID: "csi-n1"}
	for _, tc := range []struct {
		name   string
		plugin *structs.CSIPlugin
		claim  *structs.CSIVolumeClaim
		want   bool
	}{
		{"no plugin", nil, withNode, false},
		{"node-only plugin", &structs.CSIPlugin{}, withNode, false},
		{"controller with attach", &structs.CSIPlugin{ControllerRequired: true, Controllers: map[string]*structs.CSIInfo{"n": ctrl(true)}}, withNode, true},
		{"a controller without attach", &structs.CSIPlugin{ControllerRequired: true, Controllers: map[string]*structs.CSIInfo{"n": ctrl(true), "m": ctrl(false)}}, withNode, false},
		{"claim without a CSI node ID", &structs.CSIPlugin{ControllerRequired: true, Controllers: map[string]*structs.CSIInfo{"n": ctrl(true)}}, &structs.CSIVolumeClaim{}, false},
	} {
		if got := ControllerUnpublishes(tc.plugin, tc.claim); got != tc.want {
			t.Errorf("%s: ControllerUnpublishes = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReleaseRankOrders(t *testing.T) {
	order := []structs.CSIVolumeClaimState{taken, unpub, nodeDet, ctrlDet, readyFree}
	for i := 1; i < len(order); i++ {
		if ReleaseRank(order[i-1]) >= ReleaseRank(order[i]) {
			t.Errorf("rank of %s (%d) not below %s (%d)", order[i-1], ReleaseRank(order[i-1]), order[i], ReleaseRank(order[i]))
		}
	}
}

func TestClaimLockStripes(t *testing.T) {
	var l claimLocks
	// lockAll with the same volume twice and overlapping sets takes each
	// stripe once (a second Lock of one stripe would deadlock).
	unlock := l.lockAll([][2]string{{"default", "v1"}, {"default", "v1"}, {"default", "v2"}})
	unlock()
	if s1, s2 := l.stripe("default", "v1"), l.stripe("default", "v1"); s1 != s2 || s1 < 0 || s1 >= LockStripes {
		t.Fatalf("stripe of one volume: %d then %d (of %d)", s1, s2, LockStripes)
	}
	l.lock("default", "v1")()
}

package fsm

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// Evals blocked on a volume are released when a volume is registered or a
// claim is freed; the checkpoints before freed, and a refused entry, keep
// them blocked.
func TestVolumesFreedHook(t *testing.T) {
	f, rec := testFSM(t)
	vol := &structs.CSIVolume{ID: "v", Namespace: structs.DefaultNamespace, PluginID: "hp", ExternalID: "ext-v",
		RequestedCapabilities: []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}
	mustApply(t, f, 10, structs.CSIVolumeRegisterRequestType, structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{vol}})

	claim := func(vol string, state structs.CSIVolumeClaimState) structs.CSIVolumeClaimBatchRequest {
		return structs.CSIVolumeClaimBatchRequest{Claims: []*structs.CSIVolumeClaimRequest{{
			Namespace: structs.DefaultNamespace, VolumeID: vol,
			Claim: &structs.CSIVolumeClaim{AllocationID: "a1", NodeID: "n1", Mode: structs.CSIVolumeClaimWrite, State: state},
		}}}
	}
	mustApply(t, f, 11, structs.CSIVolumeClaimBatchRequestType, claim("v", structs.CSIVolumeClaimStateUnpublishing))
	mustApply(t, f, 12, structs.CSIVolumeClaimBatchRequestType, claim("v", structs.CSIVolumeClaimStateNodeDetached))
	mustApply(t, f, 13, structs.CSIVolumeClaimBatchRequestType, claim("v", structs.CSIVolumeClaimStateControllerDetached))
	if resp := apply(t, f, 14, structs.CSIVolumeClaimBatchRequestType, claim("missing", structs.CSIVolumeClaimStateReadyToFree)); resp == nil {
		t.Fatal("a claim on a missing volume applied")
	}
	if resp := apply(t, f, 15, structs.CSIVolumeRegisterRequestType, structs.CSIVolumeRegisterRequest{
		Volumes: []*structs.CSIVolume{{ID: "bad", Namespace: structs.DefaultNamespace}}}); resp == nil {
		t.Fatal("a volume without a plugin registered")
	}
	free := claim("v", structs.CSIVolumeClaimStateReadyToFree)
	free.Evals = []*structs.Evaluation{mockEval(structs.DefaultNamespace, "waiting", structs.EvalStatusPending)}
	mustApply(t, f, 16, structs.CSIVolumeClaimBatchRequestType, free)
	// The eval of a waiting job is written with the freed claim.
	if ev, err := f.State().EvalByID(nil, free.Evals[0].ID); err != nil || ev == nil || ev.CreateIndex != 16 {
		t.Fatalf("eval written with the freed claim: %+v %v", ev, err)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.volumesFreed; len(got) != 2 || got[0] != 10 || got[1] != 16 {
		t.Errorf("VolumesFreed at %v, want [10 16] (the registration and the freed claim)", got)
	}
	if len(rec.evals) != 1 || rec.evals[0].JobID != "waiting" {
		t.Errorf("evals committed: %+v", rec.evals)
	}
}

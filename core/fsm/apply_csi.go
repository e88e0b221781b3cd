package fsm

import (
	"github.com/drover-org/drover/core/structs"
)

// Appliers of the CSI entries. The endpoints validate and check requests
// against the state first; the state store refuses what no longer fits
// (a claim that lost the race for a writer slot, a volume that gained a
// claim before its deregistration), all or nothing, and the refusal is the
// entry's response.

func (f *FSM) applyCSIVolumeRegister(index uint64, buf []byte) any {
	req := decode[structs.CSIVolumeRegisterRequest](structs.CSIVolumeRegisterRequestType, index, buf)
	if err := f.State().At(at(req.Now)).UpsertCSIVolumes(index, req.Volumes, req.Evals...); err != nil {
		return err
	}
	f.evalsCommitted(req.Evals)
	f.hooks.VolumesFreed(index)
	return nil
}

func (f *FSM) applyCSIVolumeDeregister(index uint64, buf []byte) any {
	req := decode[structs.CSIVolumeDeregisterRequest](structs.CSIVolumeDeregisterRequestType, index, buf)
	return f.State().DeleteCSIVolumes(index, req.Namespace, req.VolumeIDs, req.Force)
}

func (f *FSM) applyCSIVolumeClaimBatch(index uint64, buf []byte) any {
	req := decode[structs.CSIVolumeClaimBatchRequest](structs.CSIVolumeClaimBatchRequestType, index, buf)
	if err := f.State().At(at(req.Now)).CSIVolumeClaims(index, req.Claims, req.Evals...); err != nil {
		return err
	}
	f.evalsCommitted(req.Evals)
	// Only a freed claim gives a slot back: the checkpoints before it
	// still hold the claim's place.
	for _, c := range req.Claims {
		if c != nil && c.Claim != nil && c.Claim.State == structs.CSIVolumeClaimStateReadyToFree {
			f.hooks.VolumesFreed(index)
			break
		}
	}
	return nil
}

func (f *FSM) applyCSIPluginDelete(index uint64, buf []byte) any {
	req := decode[structs.CSIPluginDeleteRequest](structs.CSIPluginDeleteRequestType, index, buf)
	return f.State().DeleteCSIPlugins(index, req.IDs)
}

var csiTypeNames = map[structs.MessageType]string{
	structs.CSIVolumeRegisterRequestType:   "CSIVolumeRegister",
	structs.CSIVolumeDeregisterRequestType: "CSIVolumeDeregister",
	structs.CSIVolumeClaimBatchRequestType: "CSIVolumeClaimBatch",
	structs.CSIPluginDeleteRequestType:     "CSIPluginDelete",
}

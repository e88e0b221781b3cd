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
	return f.State().At(at(req.Now)).UpsertCSIVolumes(index, req.Volumes)
}

func (f *FSM) applyCSIVolumeDeregister(index uint64, buf []byte) any {
	req := decode[structs.CSIVolumeDeregisterRequest](structs.CSIVolumeDeregisterRequestType, index, buf)
	return f.State().DeleteCSIVolumes(index, req.Namespace, req.VolumeIDs, req.Force)
}

func (f *FSM) applyCSIVolumeClaimBatch(index uint64, buf []byte) any {
	req := decode[structs.CSIVolumeClaimBatchRequest](structs.CSIVolumeClaimBatchRequestType, index, buf)
	return f.State().At(at(req.Now)).CSIVolumeClaims(index, req.Claims)
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

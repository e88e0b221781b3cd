package fsm

import (
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Appliers of the service registration entries. The endpoint checks the
// caller and bounds the request; the state store applies what still fits
// (a registration of an allocation that stopped meanwhile is skipped), so
// none of these entries fails on its content.

func (f *FSM) applyServiceRegistrationUpsert(index uint64, buf []byte) any {
	req := decode[structs.ServiceRegistrationUpsertRequest](structs.ServiceRegistrationUpsertRequestType, index, buf)
	if len(req.DeleteAllocIDs) == 0 {
		return f.State().UpsertServiceRegistrations(index, req.Services)
	}
	return f.State().WriteTxn(index, func(tx *state.Txn) error {
		if err := tx.DeleteServiceRegistrationsByAllocIDs(req.DeleteAllocIDs); err != nil {
			return err
		}
		return tx.UpsertServiceRegistrations(req.Services)
	})
}

func (f *FSM) applyServiceRegistrationDeleteByID(index uint64, buf []byte) any {
	req := decode[structs.ServiceRegistrationDeleteByIDRequest](structs.ServiceRegistrationDeleteByIDRequestType, index, buf)
	return f.State().DeleteServiceRegistrationByID(index, req.Namespace, req.ID)
}

func (f *FSM) applyServiceRegistrationDeleteByNodeID(index uint64, buf []byte) any {
	req := decode[structs.ServiceRegistrationDeleteByNodeIDRequest](structs.ServiceRegistrationDeleteByNodeIDRequestType, index, buf)
	return f.State().DeleteServiceRegistrationsByNodeID(index, req.NodeID)
}

func (f *FSM) applyServiceRegistrationDeleteByAllocIDs(index uint64, buf []byte) any {
	req := decode[structs.ServiceRegistrationDeleteByAllocIDsRequest](structs.ServiceRegistrationDeleteByAllocIDsRequestType, index, buf)
	return f.State().DeleteServiceRegistrationsByAllocIDs(index, req.AllocIDs)
}

var serviceTypeNames = map[structs.MessageType]string{
	structs.ServiceRegistrationUpsertRequestType:           "ServiceRegistrationUpsert",
	structs.ServiceRegistrationDeleteByIDRequestType:       "ServiceRegistrationDeleteByID",
	structs.ServiceRegistrationDeleteByNodeIDRequestType:   "ServiceRegistrationDeleteByNodeID",
	structs.ServiceRegistrationDeleteByAllocIDsRequestType: "ServiceRegistrationDeleteByAllocIDs",
}

package fsm

import (
	"github.com/drover-org/drover/core/structs"
)

// Variables and the keyring (types 90-93). The entries carry sealed items
// and wrapped keys only; the endpoint sealed them before proposing.

func (f *FSM) applyVariable(index uint64, buf []byte) any {
	req := decode[structs.VariableApplyRequest](structs.VariableApplyRequestType, index, buf)
	v, err := f.State().At(at(req.Now)).ApplyVariable(index, req)
	if err != nil {
		return err
	}
	return v
}

func (f *FSM) applyRootKeyUpsert(index uint64, buf []byte) any {
	req := decode[structs.RootKeyUpsertRequest](structs.RootKeyUpsertRequestType, index, buf)
	return f.State().UpsertRootKey(index, req.Key, req.Activate)
}

func (f *FSM) applyRootKeyState(index uint64, buf []byte) any {
	req := decode[structs.RootKeyStateRequest](structs.RootKeyStateRequestType, index, buf)
	return f.State().SetRootKeysState(index, req.KeyIDs, req.State)
}

func (f *FSM) applyVariablesRekey(index uint64, buf []byte) any {
	req := decode[structs.VariablesRekeyRequest](structs.VariablesRekeyRequestType, index, buf)
	return f.State().RekeyVariables(index, req.Vars)
}

func (f *FSM) applyRootKeyDelete(index uint64, buf []byte) any {
	req := decode[structs.RootKeyDeleteRequest](structs.RootKeyDeleteRequestType, index, buf)
	return f.State().DeleteRootKey(index, req.KeyID)
}

var varTypeNames = map[structs.MessageType]string{
	structs.VariableApplyRequestType:  "VariableApply",
	structs.RootKeyUpsertRequestType:  "RootKeyUpsert",
	structs.RootKeyStateRequestType:   "RootKeyState",
	structs.VariablesRekeyRequestType: "VariablesRekey",
	structs.RootKeyDeleteRequestType:  "RootKeyDelete",
}

package fsm

import (
	"github.com/drover-org/drover/core/structs"
)

// Appliers of the auth method, binding rule and autopilot entries. The
// endpoints validate and fill in everything (IDs, times); the state store
// refuses what does not fit the stored state (a binding rule of a method
// that is gone).

func (f *FSM) applyACLAuthMethodUpsert(index uint64, buf []byte) any {
	req := decode[structs.ACLAuthMethodUpsertRequest](structs.ACLAuthMethodUpsertRequestType, index, buf)
	return f.State().UpsertACLAuthMethods(index, req.AuthMethods)
}

func (f *FSM) applyACLAuthMethodDelete(index uint64, buf []byte) any {
	req := decode[structs.ACLAuthMethodDeleteRequest](structs.ACLAuthMethodDeleteRequestType, index, buf)
	return f.State().DeleteACLAuthMethods(index, req.Names)
}

func (f *FSM) applyACLBindingRuleUpsert(index uint64, buf []byte) any {
	req := decode[structs.ACLBindingRuleUpsertRequest](structs.ACLBindingRuleUpsertRequestType, index, buf)
	return f.State().UpsertACLBindingRules(index, req.BindingRules)
}

func (f *FSM) applyACLBindingRuleDelete(index uint64, buf []byte) any {
	req := decode[structs.ACLBindingRuleDeleteRequest](structs.ACLBindingRuleDeleteRequestType, index, buf)
	return f.State().DeleteACLBindingRules(index, req.IDs)
}

// applyAutopilotConfig answers whether it wrote (false: a CAS whose index
// did not match).
func (f *FSM) applyAutopilotConfig(index uint64, buf []byte) any {
	req := decode[structs.AutopilotSetConfigRequest](structs.AutopilotConfigRequestType, index, buf)
	c := req.Config
	wrote, err := f.State().AutopilotSetConfig(index, &c, req.CAS, req.Index)
	if err != nil {
		return err
	}
	return wrote
}

var aclAuthTypeNames = map[structs.MessageType]string{
	structs.ACLAuthMethodUpsertRequestType:  "ACLAuthMethodUpsert",
	structs.ACLAuthMethodDeleteRequestType:  "ACLAuthMethodDelete",
	structs.ACLBindingRuleUpsertRequestType: "ACLBindingRuleUpsert",
	structs.ACLBindingRuleDeleteRequestType: "ACLBindingRuleDelete",
	structs.AutopilotConfigRequestType:      "AutopilotConfig",
}

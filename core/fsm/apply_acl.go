package fsm

import (
	"github.com/drover-org/drover/core/structs"
)

// Appliers of the ACL entries (§6). The endpoints validate and fill in
// everything (IDs, times); the appliers only write, and the state store
// refuses what does not fit the stored state (a second bootstrap, an
// exchange of a one-time token already gone).

func (f *FSM) applyACLPolicyUpsert(index uint64, buf []byte) any {
	req := decode[structs.ACLPolicyUpsertRequest](structs.ACLPolicyUpsertRequestType, index, buf)
	return f.State().UpsertACLPolicies(index, req.Policies)
}

func (f *FSM) applyACLPolicyDelete(index uint64, buf []byte) any {
	req := decode[structs.ACLPolicyDeleteRequest](structs.ACLPolicyDeleteRequestType, index, buf)
	return f.State().DeleteACLPolicies(index, req.Names)
}

func (f *FSM) applyACLTokenUpsert(index uint64, buf []byte) any {
	req := decode[structs.ACLTokenUpsertRequest](structs.ACLTokenUpsertRequestType, index, buf)
	return f.State().UpsertACLTokens(index, req.Tokens)
}

func (f *FSM) applyACLTokenDelete(index uint64, buf []byte) any {
	req := decode[structs.ACLTokenDeleteRequest](structs.ACLTokenDeleteRequestType, index, buf)
	return f.State().DeleteACLTokens(index, req.AccessorIDs)
}

func (f *FSM) applyACLTokenBootstrap(index uint64, buf []byte) any {
	req := decode[structs.ACLTokenBootstrapRequest](structs.ACLTokenBootstrapRequestType, index, buf)
	if req.Token == nil {
		return structs.NewError(structs.ErrInvalid, "ACL bootstrap: missing token")
	}
	return f.State().BootstrapACLTokens(index, req.ResetIndex, req.Token)
}

func (f *FSM) applyOneTimeTokenUpsert(index uint64, buf []byte) any {
	req := decode[structs.OneTimeTokenUpsertRequest](structs.OneTimeTokenUpsertRequestType, index, buf)
	if req.OneTimeToken == nil {
		return structs.NewError(structs.ErrInvalid, "one-time token upsert: missing token")
	}
	return f.State().UpsertOneTimeToken(index, req.OneTimeToken)
}

// applyOneTimeTokenDelete deletes by accessor; an entry carrying the
// secret is an exchange, checked here against the stored token so that
// only the first of concurrent exchanges succeeds. An exchange with an
// ExchangeID marks the token spent by it (expiry removes it); one without
// (an entry of an older version) deletes it, as that version did.
func (f *FSM) applyOneTimeTokenDelete(index uint64, buf []byte) any {
	req := decode[structs.OneTimeTokenDeleteRequest](structs.OneTimeTokenDeleteRequestType, index, buf)
	if req.OneTimeSecretID == "" {
		return f.State().DeleteOneTimeTokens(index, req.AccessorIDs)
	}
	if len(req.AccessorIDs) != 1 {
		return structs.NewError(structs.ErrInvalid, "one-time token exchange: must name exactly one accessor (got %d)", len(req.AccessorIDs))
	}
	return f.State().At(at(req.Now)).ExchangeOneTimeToken(index, req.AccessorIDs[0], req.OneTimeSecretID, req.ExchangeID)
}

func (f *FSM) applyOneTimeTokenExpire(index uint64, buf []byte) any {
	req := decode[structs.OneTimeTokenExpireRequest](structs.OneTimeTokenExpireRequestType, index, buf)
	return f.State().At(at(req.Now)).ExpireOneTimeTokens(index)
}

func (f *FSM) applyACLRoleUpsert(index uint64, buf []byte) any {
	req := decode[structs.ACLRoleUpsertRequest](structs.ACLRoleUpsertRequestType, index, buf)
	return f.State().UpsertACLRoles(index, req.Roles)
}

func (f *FSM) applyACLRoleDelete(index uint64, buf []byte) any {
	req := decode[structs.ACLRoleDeleteRequest](structs.ACLRoleDeleteRequestType, index, buf)
	return f.State().DeleteACLRoles(index, req.IDs)
}

var aclTypeNames = map[structs.MessageType]string{
	structs.ACLPolicyUpsertRequestType:    "ACLPolicyUpsert",
	structs.ACLPolicyDeleteRequestType:    "ACLPolicyDelete",
	structs.ACLTokenUpsertRequestType:     "ACLTokenUpsert",
	structs.ACLTokenDeleteRequestType:     "ACLTokenDelete",
	structs.ACLTokenBootstrapRequestType:  "ACLTokenBootstrap",
	structs.OneTimeTokenUpsertRequestType: "OneTimeTokenUpsert",
	structs.OneTimeTokenDeleteRequestType: "OneTimeTokenDelete",
	structs.OneTimeTokenExpireRequestType: "OneTimeTokenExpire",
	structs.ACLRoleUpsertRequestType:      "ACLRoleUpsert",
	structs.ACLRoleDeleteRequestType:      "ACLRoleDelete",
}

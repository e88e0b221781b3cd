package aclendpoint

import (
	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// source reads the ACL tables of one state snapshot, so that a token and
// its policies are read from the same state.
type source struct{ snap *state.StateSnapshot }

func (s source) ACLTokenBySecretID(secretID string) (*structs.ACLToken, error) {
	return s.snap.ACLTokenBySecretID(nil, secretID)
}

func (s source) ACLRoleByID(id string) (*structs.ACLRole, error) {
	return s.snap.ACLRoleByID(nil, id)
}

func (s source) ACLPolicyByName(name string) (*structs.ACLPolicy, error) {
	return s.snap.ACLPolicyByName(nil, name)
}

// ResolveToken resolves an ACL secret against the replicated state: ""
// is the anonymous token (the ACL of the policy named "anonymous", or one
// allowing nothing without it); a secret no token has, or an expired
// token, is an error of kind structs.ErrPermissionDenied. With ACLs off
// every caller is management and the token is nil. Compiled ACLs are
// cached by the versions of the policies they come from.
func (a *ACL) ResolveToken(secretID string) (*structs.ACLToken, *acl.ACL, error) {
	if !a.cfg.Enabled {
		return nil, acl.ManagementACL, nil
	}
	store := a.cfg.State()
	a.mu.Lock()
	if a.store != store {
		if a.store != nil {
			a.resolver.Purge()
		}
		a.store = store
	}
	a.mu.Unlock()
	snap, err := store.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	// Secrets are UUIDs: anything else names no token and is refused
	// before it reaches the state store.
	if secretID != "" && !structs.IsUUID(secretID) {
		return nil, nil, acl.ErrTokenNotFound
	}
	return a.resolver.ResolveSecret(source{snap}, secretID, a.cfg.Now())
}

// ResolveReply is a token as a client agent needs it to authorize the
// requests of its own HTTP API (logs, agent info): the token without its
// secret, and the policies it names as the servers hold them now. Enabled
// false says the servers run without ACLs.
type ResolveReply struct {
	Enabled  bool
	Token    *structs.ACLToken
	Policies []*structs.ACLPolicy
}

// resolveForClient looks a secret up for a client agent. An unknown or
// expired secret is the same permission-denied error a server's own
// resolution gives, so the client answers as a server would.
func (a *ACL) resolveForClient(secretID string) (*ResolveReply, error) {
	if !a.cfg.Enabled {
		return &ResolveReply{}, nil
	}
	tok, _, err := a.ResolveToken(secretID)
	if err != nil {
		return nil, err
	}
	snap, err := a.cfg.State().Snapshot()
	if err != nil {
		return nil, err
	}
	reply := &ResolveReply{Enabled: true, Token: tok.Redacted()}
	names, err := acl.EffectivePolicyNames(source{snap}, tok)
	if err != nil {
		return nil, err
	}
	// The client resolves from this reply alone, without roles: the
	// token it gets names its effective policies (its own and its
	// roles'), so that the role-derived ones count there too.
	if tok != nil && len(tok.Roles) > 0 {
		reply.Token.Policies = names
	}
	for _, name := range names {
		p, err := snap.ACLPolicyByName(nil, name)
		if err != nil {
			return nil, err
		}
		if p != nil {
			reply.Policies = append(reply.Policies, p)
		}
	}
	return reply, nil
}

// caller resolves the caller's secret; with ACLs off it refuses, as
// every ACL endpoint but ResolveToken does.
func (a *ACL) caller(secret string) (*structs.ACLToken, *acl.ACL, error) {
	if !a.cfg.Enabled {
		return nil, nil, errDisabled
	}
	return a.ResolveToken(secret)
}

// requireManagement refuses a caller that is not management; what names
// the operation for the error.
func (a *ACL) requireManagement(secret, what string) error {
	_, c, err := a.caller(secret)
	if err != nil {
		return err
	}
	return requireManagement(c, what)
}

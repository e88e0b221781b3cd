package aclendpoint

import (
	"context"
	"slices"

	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Policy and token CRUD (NOMAD-BEHAVIOR §6.1).

// UpsertACLPolicies creates or replaces policies, all in one Raft entry,
// after checking each one's name, description and rules. It needs a
// management token.
func (a *ACL) UpsertACLPolicies(ctx context.Context, secret string, policies []*structs.ACLPolicy) (uint64, error) {
	if r, ok, err := leaderrpc.Forward[PolicyUpsertArgs, IndexReply](ctx, a.cfg.Leader, "ACL.UpsertPolicies",
		&PolicyUpsertArgs{SecretID: secret, Policies: policies}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := a.requireManagement(secret, "writing ACL policies"); err != nil {
		return 0, err
	}
	copies, err := preparePolicies(policies)
	if err != nil {
		return 0, err
	}
	idx, err := a.apply(structs.ACLPolicyUpsertRequestType, &structs.ACLPolicyUpsertRequest{Policies: copies})
	if err != nil {
		return 0, err
	}
	for _, p := range copies {
		a.logger.Info("ACL policy upserted", "policy", p.Name, "index", idx)
	}
	return idx, nil
}

// DeleteACLPolicies deletes policies by name; a missing one is
// structs.ErrNotFound and deletes nothing. Tokens naming a deleted policy
// keep the name, as in Nomad: it grants nothing until a policy of that
// name exists again. It needs a management token.
func (a *ACL) DeleteACLPolicies(ctx context.Context, secret string, names []string) (uint64, error) {
	if r, ok, err := leaderrpc.Forward[PolicyDeleteArgs, IndexReply](ctx, a.cfg.Leader, "ACL.DeletePolicies",
		&PolicyDeleteArgs{SecretID: secret, Names: names}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := a.requireManagement(secret, "deleting ACL policies"); err != nil {
		return 0, err
	}
	if err := checkRequestCount("Names", len(names)); err != nil {
		return 0, err
	}
	st := a.cfg.State()
	for _, n := range names {
		if !structs.ValidACLPolicyName(n) {
			return 0, structs.NewError(structs.ErrInvalid, "policy name %q: must match %s", bounded(n), structs.ACLPolicyNameRule)
		}
		p, err := st.ACLPolicyByName(nil, n)
		if err != nil {
			return 0, err
		}
		if p == nil {
			return 0, structs.NewError(structs.ErrNotFound, "ACL policy not found: %s", n)
		}
	}
	idx, err := a.apply(structs.ACLPolicyDeleteRequestType, &structs.ACLPolicyDeleteRequest{Names: slices.Clone(names)})
	if err != nil {
		return 0, err
	}
	for _, n := range names {
		a.logger.Info("ACL policy deleted", "policy", n, "index", idx)
	}
	return idx, nil
}

// ListACLPolicies lists the policies whose name starts with prefix, by
// name. As in Nomad, a management token sees every policy and any other
// token only the policies it holds.
func (a *ACL) ListACLPolicies(_ context.Context, secret, prefix string) ([]*structs.ACLPolicyListStub, uint64, error) {
	tok, c, err := a.caller(secret)
	if err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	idx := st.Index(state.TableACLPolicies)
	policies, err := st.ACLPolicies(nil, prefix)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.ACLPolicyListStub, 0, len(policies))
	for _, p := range policies {
		if mayReadPolicy(tok, c, p.Name) {
			out = append(out, p.Stub())
		}
	}
	return out, idx, nil
}

// GetACLPolicy returns a policy to a management token or to a token that
// holds it; anyone else is denied, whether or not the policy exists.
func (a *ACL) GetACLPolicy(_ context.Context, secret, name string) (*structs.ACLPolicy, uint64, error) {
	tok, c, err := a.caller(secret)
	if err != nil {
		return nil, 0, err
	}
	if !mayReadPolicy(tok, c, name) {
		return nil, 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied: reading ACL policy %q needs a management token or a token holding it", bounded(name))
	}
	p, err := a.cfg.State().ACLPolicyByName(nil, name)
	if err != nil {
		return nil, 0, err
	}
	if p == nil {
		return nil, 0, structs.NewError(structs.ErrNotFound, "ACL policy not found")
	}
	cp := *p
	cp.Hash = slices.Clone(p.Hash)
	return &cp, p.ModifyIndex, nil
}

// UpsertACLTokens creates and updates tokens in one Raft entry and
// returns them as stored, secrets included. A token without AccessorID
// is created: random AccessorID and SecretID, CreateTime now, and
// ExpirationTTL turned into ExpirationTime. A token with one updates the
// stored token: its SecretID, CreateTime and expiration are kept (an
// update that names another expiration, or another Global, is refused).
// Client tokens must name at least one policy, each of which must exist;
// management tokens none. It needs a management token.
func (a *ACL) UpsertACLTokens(ctx context.Context, secret string, tokens []*structs.ACLToken) ([]*structs.ACLToken, uint64, error) {
	if r, ok, err := leaderrpc.Forward[TokenUpsertArgs, TokensReply](ctx, a.cfg.Leader, "ACL.UpsertTokens",
		&TokenUpsertArgs{SecretID: secret, Tokens: tokens}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Tokens, r.Index, nil
	}
	if err := a.requireManagement(secret, "writing ACL tokens"); err != nil {
		return nil, 0, err
	}
	copies, err := prepareTokens(a.cfg.State(), tokens, a.cfg.Now().UTC(), newSecrets)
	if err != nil {
		return nil, 0, err
	}
	idx, err := a.apply(structs.ACLTokenUpsertRequestType, &structs.ACLTokenUpsertRequest{Tokens: copies})
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.ACLToken, 0, len(copies))
	for _, t := range copies {
		stored, err := a.cfg.State().ACLTokenByAccessorID(nil, t.AccessorID)
		if err != nil {
			return nil, 0, err
		}
		if stored == nil {
			return nil, 0, structs.NewError(structs.ErrUnavailable, "ACL token %s not found after its write", t.AccessorID)
		}
		a.logger.Info("ACL token upserted", "accessor_id", t.AccessorID, "type", t.Type, "index", idx)
		out = append(out, stored.Copy())
	}
	return out, idx, nil
}

// DeleteACLTokens deletes tokens by accessor, with their one-time tokens;
// a missing one is structs.ErrNotFound and deletes nothing. It needs a
// management token.
func (a *ACL) DeleteACLTokens(ctx context.Context, secret string, accessors []string) (uint64, error) {
	if r, ok, err := leaderrpc.Forward[TokenDeleteArgs, IndexReply](ctx, a.cfg.Leader, "ACL.DeleteTokens",
		&TokenDeleteArgs{SecretID: secret, AccessorIDs: accessors}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := a.requireManagement(secret, "deleting ACL tokens"); err != nil {
		return 0, err
	}
	if err := checkRequestCount("AccessorIDs", len(accessors)); err != nil {
		return 0, err
	}
	st := a.cfg.State()
	for _, id := range accessors {
		if !structs.IsUUID(id) {
			return 0, structs.NewError(structs.ErrInvalid, "token AccessorID %q: must be a UUID", bounded(id))
		}
		t, err := st.ACLTokenByAccessorID(nil, id)
		if err != nil {
			return 0, err
		}
		if t == nil {
			return 0, structs.NewError(structs.ErrNotFound, "ACL token not found: %s", id)
		}
	}
	idx, err := a.apply(structs.ACLTokenDeleteRequestType, &structs.ACLTokenDeleteRequest{AccessorIDs: slices.Clone(accessors)})
	if err != nil {
		return 0, err
	}
	for _, id := range accessors {
		a.logger.Info("ACL token deleted", "accessor_id", id, "index", idx)
	}
	return idx, nil
}

// ListACLTokens lists the tokens whose accessor starts with prefix, as
// stubs without secrets. It needs a management token.
func (a *ACL) ListACLTokens(_ context.Context, secret, prefix string) ([]*structs.ACLTokenListStub, uint64, error) {
	if err := a.requireManagement(secret, "listing ACL tokens"); err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	idx := st.Index(state.TableACLTokens)
	toks, err := st.ACLTokens(nil, prefix)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.ACLTokenListStub, 0, len(toks))
	for _, t := range toks {
		out = append(out, t.Stub())
	}
	return out, idx, nil
}

// GetACLToken returns a token, secret included, to a management token or
// to the token itself; anyone else is denied.
func (a *ACL) GetACLToken(_ context.Context, secret, accessor string) (*structs.ACLToken, uint64, error) {
	tok, c, err := a.caller(secret)
	if err != nil {
		return nil, 0, err
	}
	if !mayReadToken(tok, c, accessor) {
		return nil, 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied: reading another ACL token needs a management token")
	}
	if !structs.IsUUID(accessor) {
		return nil, 0, structs.NewError(structs.ErrNotFound, "ACL token not found")
	}
	t, err := a.cfg.State().ACLTokenByAccessorID(nil, accessor)
	if err != nil {
		return nil, 0, err
	}
	if t == nil {
		return nil, 0, structs.NewError(structs.ErrNotFound, "ACL token not found")
	}
	return t.Copy(), t.ModifyIndex, nil
}

// ACLTokenSelf returns the caller's own token; without a secret that is
// the anonymous token, as in Nomad.
func (a *ACL) ACLTokenSelf(_ context.Context, secret string) (*structs.ACLToken, uint64, error) {
	tok, _, err := a.caller(secret)
	if err != nil {
		return nil, 0, err
	}
	return tok.Copy(), tok.ModifyIndex, nil
}

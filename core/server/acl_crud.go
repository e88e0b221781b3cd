package server

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// ACL policy and token CRUD (NOMAD-BEHAVIOR §6.1). Like the bootstrap and
// one-time token endpoints, each method authorizes its caller from the
// secret it is given: writes and token listings need a management token;
// a client token may read its own token and the policies it holds. Writes
// go to the leader; reads answer from the local state.

// MaxACLObjectsPerRequest bounds the policies or tokens one write names.
const MaxACLObjectsPerRequest = 64

// RPC arguments and replies of the ACL CRUD writes.
type (
	ACLPolicyUpsertArgs struct {
		SecretID string
		Policies []*structs.ACLPolicy
	}
	ACLPolicyDeleteArgs struct {
		SecretID string
		Names    []string
	}
	ACLTokenUpsertArgs struct {
		SecretID string
		Tokens   []*structs.ACLToken
	}
	ACLTokenDeleteArgs struct {
		SecretID    string
		AccessorIDs []string
	}
	ACLTokensReply struct {
		Tokens []*structs.ACLToken
		Index  uint64
	}
)

// registerACLCRUDRPC exposes the CRUD writes, which followers forward to
// the leader. They are absent from rpcAccess: server-only.
func (s *Server) registerACLCRUDRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "ACL.UpsertPolicies", func(ctx context.Context, a *ACLPolicyUpsertArgs) (*IndexReply, error) {
		idx, err := s.UpsertACLPolicies(mark(ctx), a.SecretID, a.Policies)
		return &IndexReply{Index: idx}, err
	})
	rpc.Handle(rs, "ACL.DeletePolicies", func(ctx context.Context, a *ACLPolicyDeleteArgs) (*IndexReply, error) {
		idx, err := s.DeleteACLPolicies(mark(ctx), a.SecretID, a.Names)
		return &IndexReply{Index: idx}, err
	})
	rpc.Handle(rs, "ACL.UpsertTokens", func(ctx context.Context, a *ACLTokenUpsertArgs) (*ACLTokensReply, error) {
		toks, idx, err := s.UpsertACLTokens(mark(ctx), a.SecretID, a.Tokens)
		return &ACLTokensReply{Tokens: toks, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.DeleteTokens", func(ctx context.Context, a *ACLTokenDeleteArgs) (*IndexReply, error) {
		idx, err := s.DeleteACLTokens(mark(ctx), a.SecretID, a.AccessorIDs)
		return &IndexReply{Index: idx}, err
	})
}

// aclCaller resolves the caller's secret; with ACLs off it refuses, as
// every ACL endpoint does.
func (s *Server) aclCaller(secret string) (*structs.ACLToken, *acl.ACL, error) {
	if !s.cfg.ACLEnabled {
		return nil, nil, errACLDisabled
	}
	return s.ResolveToken(secret)
}

// requireACLManagement refuses a caller that is not management; what
// names the operation for the error.
func (s *Server) requireACLManagement(secret, what string) error {
	_, a, err := s.aclCaller(secret)
	if err != nil {
		return err
	}
	if !a.IsManagement() {
		return structs.NewError(structs.ErrPermissionDenied, "Permission denied: %s needs a management token", what)
	}
	return nil
}

func checkACLRequestCount(field string, n int) error {
	switch {
	case n == 0:
		return structs.NewError(structs.ErrInvalid, "%s: at least one is required", field)
	case n > MaxACLObjectsPerRequest:
		return structs.NewError(structs.ErrInvalid, "%s: %d in one request, more than %d; exceeds limit MaxACLObjectsPerRequest",
			field, n, MaxACLObjectsPerRequest)
	}
	return nil
}

// UpsertACLPolicies creates or replaces policies, all in one Raft entry,
// after checking each one's name, description and rules. It needs a
// management token.
func (s *Server) UpsertACLPolicies(ctx context.Context, secret string, policies []*structs.ACLPolicy) (uint64, error) {
	if r, ok, err := forward[ACLPolicyUpsertArgs, IndexReply](ctx, s, "ACL.UpsertPolicies",
		&ACLPolicyUpsertArgs{SecretID: secret, Policies: policies}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := s.requireACLManagement(secret, "writing ACL policies"); err != nil {
		return 0, err
	}
	if err := checkACLRequestCount("Policies", len(policies)); err != nil {
		return 0, err
	}
	seen := make(map[string]bool, len(policies))
	copies := make([]*structs.ACLPolicy, 0, len(policies))
	for _, p := range policies {
		if err := p.Validate(); err != nil {
			return 0, err
		}
		if _, err := acl.ParsePolicy(p.Name, p.Rules); err != nil {
			return 0, structs.NewError(structs.ErrInvalid, "policy %q: rules: %v", p.Name, err)
		}
		if seen[p.Name] {
			return 0, structs.NewError(structs.ErrInvalid, "policy %q: named twice in one request", p.Name)
		}
		seen[p.Name] = true
		c := &structs.ACLPolicy{Name: p.Name, Description: p.Description, Rules: p.Rules}
		c.SetHash()
		copies = append(copies, c)
	}
	idx, err := s.raftApply(structs.ACLPolicyUpsertRequestType, &structs.ACLPolicyUpsertRequest{Policies: copies})
	if err != nil {
		return 0, err
	}
	for _, p := range copies {
		s.logger.Info("ACL policy upserted", "policy", p.Name, "index", idx)
	}
	return idx, nil
}

// DeleteACLPolicies deletes policies by name; a missing one is
// structs.ErrNotFound and deletes nothing. Tokens naming a deleted policy
// keep the name, as in Nomad: it grants nothing until a policy of that
// name exists again. It needs a management token.
func (s *Server) DeleteACLPolicies(ctx context.Context, secret string, names []string) (uint64, error) {
	if r, ok, err := forward[ACLPolicyDeleteArgs, IndexReply](ctx, s, "ACL.DeletePolicies",
		&ACLPolicyDeleteArgs{SecretID: secret, Names: names}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := s.requireACLManagement(secret, "deleting ACL policies"); err != nil {
		return 0, err
	}
	if err := checkACLRequestCount("Names", len(names)); err != nil {
		return 0, err
	}
	st := s.State()
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
	idx, err := s.raftApply(structs.ACLPolicyDeleteRequestType, &structs.ACLPolicyDeleteRequest{Names: slices.Clone(names)})
	if err != nil {
		return 0, err
	}
	for _, n := range names {
		s.logger.Info("ACL policy deleted", "policy", n, "index", idx)
	}
	return idx, nil
}

// ListACLPolicies lists the policies whose name starts with prefix, by
// name. As in Nomad, a management token sees every policy and any other
// token only the policies it holds.
func (s *Server) ListACLPolicies(_ context.Context, secret, prefix string) ([]*structs.ACLPolicyListStub, uint64, error) {
	tok, a, err := s.aclCaller(secret)
	if err != nil {
		return nil, 0, err
	}
	st := s.State()
	idx := st.Index(state.TableACLPolicies)
	policies, err := st.ACLPolicies(nil, prefix)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.ACLPolicyListStub, 0, len(policies))
	for _, p := range policies {
		if a.IsManagement() || slices.Contains(tok.Policies, p.Name) {
			out = append(out, p.Stub())
		}
	}
	return out, idx, nil
}

// GetACLPolicy returns a policy to a management token or to a token that
// holds it; anyone else is denied, whether or not the policy exists.
func (s *Server) GetACLPolicy(_ context.Context, secret, name string) (*structs.ACLPolicy, uint64, error) {
	tok, a, err := s.aclCaller(secret)
	if err != nil {
		return nil, 0, err
	}
	if !a.IsManagement() && !slices.Contains(tok.Policies, name) {
		return nil, 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied: reading ACL policy %q needs a management token or a token holding it", bounded(name))
	}
	p, err := s.State().ACLPolicyByName(nil, name)
	if err != nil {
		return nil, 0, err
	}
	if p == nil {
		return nil, 0, structs.NewError(structs.ErrNotFound, "ACL policy not found")
	}
	c := *p
	c.Hash = slices.Clone(p.Hash)
	return &c, p.ModifyIndex, nil
}

// UpsertACLTokens creates and updates tokens in one Raft entry and
// returns them as stored, secrets included. A token without AccessorID
// is created: random AccessorID and SecretID, CreateTime now, and
// ExpirationTTL turned into ExpirationTime. A token with one updates the
// stored token: its SecretID, CreateTime and expiration are kept (an
// update that names another expiration, or another Global, is refused).
// Client tokens must name at least one policy, each of which must exist;
// management tokens none. It needs a management token.
func (s *Server) UpsertACLTokens(ctx context.Context, secret string, tokens []*structs.ACLToken) ([]*structs.ACLToken, uint64, error) {
	if r, ok, err := forward[ACLTokenUpsertArgs, ACLTokensReply](ctx, s, "ACL.UpsertTokens",
		&ACLTokenUpsertArgs{SecretID: secret, Tokens: tokens}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Tokens, r.Index, nil
	}
	if err := s.requireACLManagement(secret, "writing ACL tokens"); err != nil {
		return nil, 0, err
	}
	if err := checkACLRequestCount("Tokens", len(tokens)); err != nil {
		return nil, 0, err
	}
	st := s.State()
	now := s.cfg.Now().UTC()
	seen := make(map[string]bool, len(tokens))
	copies := make([]*structs.ACLToken, 0, len(tokens))
	for _, in := range tokens {
		if in == nil {
			return nil, 0, structs.NewError(structs.ErrInvalid, "token: missing")
		}
		t := &structs.ACLToken{Name: in.Name, Type: in.Type, Policies: slices.Clone(in.Policies), Global: in.Global}
		var existing *structs.ACLToken
		if in.AccessorID == "" {
			t.AccessorID, t.SecretID = uuid.NewString(), uuid.NewString()
			t.CreateTime = now
			t.ExpirationTTL = in.ExpirationTTL
			if in.ExpirationTime != nil {
				e := *in.ExpirationTime
				t.ExpirationTime = &e
			}
			t.Canonicalize(now)
		} else {
			if !structs.IsUUID(in.AccessorID) {
				return nil, 0, structs.NewError(structs.ErrInvalid, "token AccessorID %q: must be a UUID", bounded(in.AccessorID))
			}
			var err error
			if existing, err = st.ACLTokenByAccessorID(nil, in.AccessorID); err != nil {
				return nil, 0, err
			}
			if existing == nil {
				return nil, 0, structs.NewError(structs.ErrNotFound, "ACL token not found: %s", in.AccessorID)
			}
			if in.SecretID != "" && in.SecretID != existing.SecretID {
				return nil, 0, structs.NewError(structs.ErrInvalid, "token %s SecretID: cannot be changed", in.AccessorID)
			}
			t.AccessorID, t.SecretID, t.CreateTime = existing.AccessorID, existing.SecretID, existing.CreateTime
			t.ExpirationTTL = existing.ExpirationTTL
			switch {
			case in.ExpirationTime != nil:
				e := *in.ExpirationTime
				t.ExpirationTime = &e
			case in.ExpirationTTL == 0 && existing.ExpirationTime != nil:
				// An update that says nothing of the expiration keeps it.
				e := *existing.ExpirationTime
				t.ExpirationTime = &e
			}
		}
		if err := t.Validate(structs.DefaultACLTokenMinExpirationTTL, structs.DefaultACLTokenMaxExpirationTTL, existing); err != nil {
			return nil, 0, err
		}
		if existing != nil && in.ExpirationTTL != 0 && in.ExpirationTTL != existing.ExpirationTTL {
			return nil, 0, structs.NewError(structs.ErrInvalid, "token expiration TTL: cannot be changed on an existing token")
		}
		for i, p := range t.Policies {
			pol, err := st.ACLPolicyByName(nil, p)
			if err != nil {
				return nil, 0, err
			}
			if pol == nil {
				return nil, 0, structs.NewError(structs.ErrInvalid, "token policies[%d] %q: no such ACL policy", i, p)
			}
		}
		if seen[t.AccessorID] {
			return nil, 0, structs.NewError(structs.ErrInvalid, "token %s: named twice in one request", t.AccessorID)
		}
		seen[t.AccessorID] = true
		t.SetHash()
		copies = append(copies, t)
	}
	idx, err := s.raftApply(structs.ACLTokenUpsertRequestType, &structs.ACLTokenUpsertRequest{Tokens: copies})
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.ACLToken, 0, len(copies))
	for _, t := range copies {
		stored, err := s.State().ACLTokenByAccessorID(nil, t.AccessorID)
		if err != nil {
			return nil, 0, err
		}
		if stored == nil {
			return nil, 0, structs.NewError(structs.ErrUnavailable, "ACL token %s not found after its write", t.AccessorID)
		}
		s.logger.Info("ACL token upserted", "accessor_id", t.AccessorID, "type", t.Type, "index", idx)
		out = append(out, stored.Copy())
	}
	return out, idx, nil
}

// DeleteACLTokens deletes tokens by accessor, with their one-time tokens;
// a missing one is structs.ErrNotFound and deletes nothing. It needs a
// management token.
func (s *Server) DeleteACLTokens(ctx context.Context, secret string, accessors []string) (uint64, error) {
	if r, ok, err := forward[ACLTokenDeleteArgs, IndexReply](ctx, s, "ACL.DeleteTokens",
		&ACLTokenDeleteArgs{SecretID: secret, AccessorIDs: accessors}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := s.requireACLManagement(secret, "deleting ACL tokens"); err != nil {
		return 0, err
	}
	if err := checkACLRequestCount("AccessorIDs", len(accessors)); err != nil {
		return 0, err
	}
	st := s.State()
	for _, a := range accessors {
		if !structs.IsUUID(a) {
			return 0, structs.NewError(structs.ErrInvalid, "token AccessorID %q: must be a UUID", bounded(a))
		}
		t, err := st.ACLTokenByAccessorID(nil, a)
		if err != nil {
			return 0, err
		}
		if t == nil {
			return 0, structs.NewError(structs.ErrNotFound, "ACL token not found: %s", a)
		}
	}
	idx, err := s.raftApply(structs.ACLTokenDeleteRequestType, &structs.ACLTokenDeleteRequest{AccessorIDs: slices.Clone(accessors)})
	if err != nil {
		return 0, err
	}
	for _, a := range accessors {
		s.logger.Info("ACL token deleted", "accessor_id", a, "index", idx)
	}
	return idx, nil
}

// ListACLTokens lists the tokens whose accessor starts with prefix, as
// stubs without secrets. It needs a management token.
func (s *Server) ListACLTokens(_ context.Context, secret, prefix string) ([]*structs.ACLTokenListStub, uint64, error) {
	if err := s.requireACLManagement(secret, "listing ACL tokens"); err != nil {
		return nil, 0, err
	}
	st := s.State()
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
func (s *Server) GetACLToken(_ context.Context, secret, accessor string) (*structs.ACLToken, uint64, error) {
	tok, a, err := s.aclCaller(secret)
	if err != nil {
		return nil, 0, err
	}
	if !a.IsManagement() && (tok == nil || tok.AccessorID != accessor) {
		return nil, 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied: reading another ACL token needs a management token")
	}
	if !structs.IsUUID(accessor) {
		return nil, 0, structs.NewError(structs.ErrNotFound, "ACL token not found")
	}
	t, err := s.State().ACLTokenByAccessorID(nil, accessor)
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
func (s *Server) ACLTokenSelf(_ context.Context, secret string) (*structs.ACLToken, uint64, error) {
	tok, _, err := s.aclCaller(secret)
	if err != nil {
		return nil, 0, err
	}
	return tok.Copy(), tok.ModifyIndex, nil
}

// bounded cuts a caller's value short for an error message.
func bounded(s string) string {
	const limit = 64
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}

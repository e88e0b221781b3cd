package aclendpoint

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// ACL auth methods and binding rules (Nomad's /v1/acl/auth-method* and
// /v1/acl/binding-rule*). Writes and reads need a management token, but
// the listing of auth methods, which `login` reads to find the default
// method and which shows no configuration, is open to anyone (as Nomad's).

// RPC arguments of the auth method and binding rule endpoints.
type (
	AuthMethodUpsertArgs struct {
		SecretID    string
		AuthMethods []*structs.ACLAuthMethod
	}
	AuthMethodDeleteArgs struct {
		SecretID string
		Names    []string
	}
	AuthMethodsReply struct {
		AuthMethods []*structs.ACLAuthMethod
		Index       uint64
	}
	BindingRuleUpsertArgs struct {
		SecretID     string
		BindingRules []*structs.ACLBindingRule
	}
	BindingRuleDeleteArgs struct {
		SecretID string
		IDs      []string
	}
	BindingRulesReply struct {
		BindingRules []*structs.ACLBindingRule
		Index        uint64
	}
	LoginArgs struct {
		AuthMethodName string
		LoginToken     string
	}
)

func registerAuth(rs *rpc.Server, a *ACL, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "ACL.UpsertAuthMethods", func(ctx context.Context, args *AuthMethodUpsertArgs) (*AuthMethodsReply, error) {
		out, idx, err := a.UpsertACLAuthMethods(mark(ctx), args.SecretID, args.AuthMethods)
		return &AuthMethodsReply{AuthMethods: out, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.CreateAuthMethods", func(ctx context.Context, args *AuthMethodUpsertArgs) (*AuthMethodsReply, error) {
		out, idx, err := a.CreateACLAuthMethods(mark(ctx), args.SecretID, args.AuthMethods)
		return &AuthMethodsReply{AuthMethods: out, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.DeleteAuthMethods", func(ctx context.Context, args *AuthMethodDeleteArgs) (*IndexReply, error) {
		idx, err := a.DeleteACLAuthMethods(mark(ctx), args.SecretID, args.Names)
		return &IndexReply{Index: idx}, err
	})
	rpc.Handle(rs, "ACL.UpsertBindingRules", func(ctx context.Context, args *BindingRuleUpsertArgs) (*BindingRulesReply, error) {
		out, idx, err := a.UpsertACLBindingRules(mark(ctx), args.SecretID, args.BindingRules)
		return &BindingRulesReply{BindingRules: out, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.DeleteBindingRules", func(ctx context.Context, args *BindingRuleDeleteArgs) (*IndexReply, error) {
		idx, err := a.DeleteACLBindingRules(mark(ctx), args.SecretID, args.IDs)
		return &IndexReply{Index: idx}, err
	})
	rpc.Handle(rs, "ACL.Login", func(ctx context.Context, args *LoginArgs) (*TokenReply, error) {
		tok, idx, err := a.Login(mark(ctx), args.AuthMethodName, args.LoginToken)
		return &TokenReply{Token: tok, Index: idx}, err
	})
}

// prepareAuthMethods checks the methods of an upsert and returns the
// copies to store: defaults filled in, keys parsed (a key that does not
// parse is refused here, not at the first login), create time kept on
// update. create says the request made a new method: its name must be
// free; otherwise it must exist.
func prepareAuthMethods(st *state.StateStore, methods []*structs.ACLAuthMethod, create bool, now time.Time) ([]*structs.ACLAuthMethod, error) {
	if err := checkRequestCount("AuthMethods", len(methods)); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	defaults := 0
	out := make([]*structs.ACLAuthMethod, 0, len(methods))
	for _, in := range methods {
		if in == nil {
			return nil, structs.NewError(structs.ErrInvalid, "auth method: missing")
		}
		m := in.Copy()
		m.Hash, m.CreateIndex, m.ModifyIndex = nil, 0, 0
		m.Canonicalize()
		if err := m.Validate(); err != nil {
			return nil, err
		}
		if err := checkInterpolation("auth method TokenNameFormat", m.TokenNameFormat, tokenNameVars); err != nil {
			return nil, err
		}
		if m.Config != nil && len(m.Config.JWTValidationPubKeys) > 0 {
			if _, err := parsePublicKeys(m.Config.JWTValidationPubKeys); err != nil {
				return nil, err
			}
		}
		old, err := st.ACLAuthMethodByName(nil, m.Name)
		if err != nil {
			return nil, err
		}
		switch {
		case create && old != nil:
			return nil, structs.NewError(structs.ErrInvalid, "auth method %q: already exists; update it at /v1/acl/auth-method/%s", m.Name, m.Name)
		case !create && old == nil:
			return nil, structs.NewError(structs.ErrNotFound, "ACL auth method not found: %s", m.Name)
		}
		if seen[m.Name] {
			return nil, structs.NewError(structs.ErrInvalid, "auth method %q: named twice in one request", m.Name)
		}
		seen[m.Name] = true
		if m.Default {
			defaults++
		}
		m.CreateTime, m.ModifyTime = now, now
		if old != nil {
			m.CreateTime = old.CreateTime
		}
		m.SetHash()
		out = append(out, m)
	}
	if defaults > 1 {
		return nil, structs.NewError(structs.ErrInvalid, "auth methods: at most one may be the Default (got %d)", defaults)
	}
	if create {
		all, err := st.ACLAuthMethods(nil)
		if err != nil {
			return nil, err
		}
		if n := len(all) + len(out); n > structs.MaxACLAuthMethods {
			return nil, structs.NewError(structs.ErrInvalid, "auth methods: a cluster holds at most %d (this write would make %d); exceeds limit MaxACLAuthMethods",
				structs.MaxACLAuthMethods, n)
		}
	}
	return out, nil
}

// UpsertACLAuthMethods creates (create) or updates auth methods in one
// Raft entry and returns them as stored. Writing a method as Default
// takes the flag from the method that had it. It needs a management
// token.
func (a *ACL) UpsertACLAuthMethods(ctx context.Context, secret string, methods []*structs.ACLAuthMethod) ([]*structs.ACLAuthMethod, uint64, error) {
	return a.upsertAuthMethods(ctx, secret, methods, false)
}

// CreateACLAuthMethods is UpsertACLAuthMethods for new methods: a name
// already taken is refused.
func (a *ACL) CreateACLAuthMethods(ctx context.Context, secret string, methods []*structs.ACLAuthMethod) ([]*structs.ACLAuthMethod, uint64, error) {
	return a.upsertAuthMethods(ctx, secret, methods, true)
}

func (a *ACL) upsertAuthMethods(ctx context.Context, secret string, methods []*structs.ACLAuthMethod, create bool) ([]*structs.ACLAuthMethod, uint64, error) {
	method := "ACL.UpsertAuthMethods"
	if create {
		method = "ACL.CreateAuthMethods"
	}
	if r, ok, err := leaderrpc.Forward[AuthMethodUpsertArgs, AuthMethodsReply](ctx, a.cfg.Leader, method,
		&AuthMethodUpsertArgs{SecretID: secret, AuthMethods: methods}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.AuthMethods, r.Index, nil
	}
	if err := a.requireManagement(secret, "writing ACL auth methods"); err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	copies, err := prepareAuthMethods(st, methods, create, a.cfg.Now().UTC())
	if err != nil {
		return nil, 0, err
	}
	idx, err := a.apply(structs.ACLAuthMethodUpsertRequestType, &structs.ACLAuthMethodUpsertRequest{AuthMethods: copies})
	if err != nil {
		return nil, 0, err
	}
	st = a.cfg.State()
	out := make([]*structs.ACLAuthMethod, 0, len(copies))
	for _, c := range copies {
		a.logger.Info("ACL auth method upserted", "auth_method", c.Name, "type", c.Type, "default", c.Default, "index", idx)
		m, err := st.ACLAuthMethodByName(nil, c.Name)
		if err != nil {
			return nil, 0, err
		}
		if m != nil {
			out = append(out, m.Copy())
		}
	}
	return out, idx, nil
}

// DeleteACLAuthMethods deletes auth methods by name, with their binding
// rules; a missing one is structs.ErrNotFound and deletes nothing. Tokens
// a login made stay valid until they expire. It needs a management token.
func (a *ACL) DeleteACLAuthMethods(ctx context.Context, secret string, names []string) (uint64, error) {
	if r, ok, err := leaderrpc.Forward[AuthMethodDeleteArgs, IndexReply](ctx, a.cfg.Leader, "ACL.DeleteAuthMethods",
		&AuthMethodDeleteArgs{SecretID: secret, Names: names}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := a.requireManagement(secret, "deleting ACL auth methods"); err != nil {
		return 0, err
	}
	if err := checkRequestCount("Names", len(names)); err != nil {
		return 0, err
	}
	st := a.cfg.State()
	for _, n := range names {
		m, err := st.ACLAuthMethodByName(nil, n)
		if err != nil {
			return 0, err
		}
		if m == nil {
			return 0, structs.NewError(structs.ErrNotFound, "ACL auth method not found: %s", bounded(n))
		}
	}
	idx, err := a.apply(structs.ACLAuthMethodDeleteRequestType, &structs.ACLAuthMethodDeleteRequest{Names: slices.Clone(names)})
	if err != nil {
		return 0, err
	}
	for _, n := range names {
		a.logger.Info("ACL auth method deleted", "auth_method", n, "index", idx)
	}
	return idx, nil
}

// ListACLAuthMethods lists every auth method as stubs (name, type,
// default). Anyone may list them, as in Nomad: `login` needs the default.
func (a *ACL) ListACLAuthMethods(_ context.Context, secret string) ([]*structs.ACLAuthMethodListStub, uint64, error) {
	if _, _, err := a.caller(secret); err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	idx := st.Index(state.TableACLAuthMethods)
	methods, err := st.ACLAuthMethods(nil)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.ACLAuthMethodListStub, 0, len(methods))
	for _, m := range methods {
		out = append(out, m.Stub())
	}
	return out, idx, nil
}

// GetACLAuthMethod returns an auth method with its configuration. It
// needs a management token.
func (a *ACL) GetACLAuthMethod(_ context.Context, secret, name string) (*structs.ACLAuthMethod, uint64, error) {
	if err := a.requireManagement(secret, "reading ACL auth methods"); err != nil {
		return nil, 0, err
	}
	m, err := a.cfg.State().ACLAuthMethodByName(nil, name)
	if err != nil {
		return nil, 0, err
	}
	if m == nil {
		return nil, 0, structs.NewError(structs.ErrNotFound, "ACL auth method not found")
	}
	return m.Copy(), m.ModifyIndex, nil
}

// prepareBindingRules checks the rules of an upsert against st: the
// selector parses, the BindName interpolation is well formed, the method
// exists; a rule without ID is created, one with an ID must exist.
func prepareBindingRules(st *state.StateStore, rules []*structs.ACLBindingRule, now time.Time, newID func() string) ([]*structs.ACLBindingRule, error) {
	if err := checkRequestCount("BindingRules", len(rules)); err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	added := map[string]int{} // new rules by method
	out := make([]*structs.ACLBindingRule, 0, len(rules))
	for _, in := range rules {
		if err := in.Validate(); err != nil {
			return nil, err
		}
		r := in.Copy()
		r.Hash, r.CreateIndex, r.ModifyIndex = nil, 0, 0
		if _, err := parseSelector(r.Selector); err != nil {
			return nil, err
		}
		if err := checkBindName(r.BindName); err != nil {
			return nil, err
		}
		m, err := st.ACLAuthMethodByName(nil, r.AuthMethod)
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, structs.NewError(structs.ErrInvalid, "binding rule AuthMethod %q: no such auth method", r.AuthMethod)
		}
		r.CreateTime, r.ModifyTime = now, now
		if r.ID == "" {
			r.ID = newID()
			added[r.AuthMethod]++
			have, err := st.ACLBindingRulesByAuthMethod(nil, r.AuthMethod)
			if err != nil {
				return nil, err
			}
			if n := len(have) + added[r.AuthMethod]; n > structs.MaxACLBindingRulesPerMethod {
				return nil, structs.NewError(structs.ErrInvalid, "binding rules of auth method %q: at most %d (this write would make %d); exceeds limit MaxACLBindingRulesPerMethod",
					r.AuthMethod, structs.MaxACLBindingRulesPerMethod, n)
			}
		} else {
			old, err := st.ACLBindingRuleByID(nil, r.ID)
			if err != nil {
				return nil, err
			}
			if old == nil {
				return nil, structs.NewError(structs.ErrNotFound, "ACL binding rule not found: %s", r.ID)
			}
			r.CreateTime = old.CreateTime
		}
		if ids[r.ID] {
			return nil, structs.NewError(structs.ErrInvalid, "binding rule %s: named twice in one request", r.ID)
		}
		ids[r.ID] = true
		r.SetHash()
		out = append(out, r)
	}
	return out, nil
}

// UpsertACLBindingRules creates or updates binding rules in one Raft
// entry and returns them as stored. It needs a management token.
func (a *ACL) UpsertACLBindingRules(ctx context.Context, secret string, rules []*structs.ACLBindingRule) ([]*structs.ACLBindingRule, uint64, error) {
	if r, ok, err := leaderrpc.Forward[BindingRuleUpsertArgs, BindingRulesReply](ctx, a.cfg.Leader, "ACL.UpsertBindingRules",
		&BindingRuleUpsertArgs{SecretID: secret, BindingRules: rules}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.BindingRules, r.Index, nil
	}
	if err := a.requireManagement(secret, "writing ACL binding rules"); err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	copies, err := prepareBindingRules(st, rules, a.cfg.Now().UTC(), uuid.NewString)
	if err != nil {
		return nil, 0, err
	}
	idx, err := a.apply(structs.ACLBindingRuleUpsertRequestType, &structs.ACLBindingRuleUpsertRequest{BindingRules: copies})
	if err != nil {
		return nil, 0, err
	}
	ids := make([]string, 0, len(copies))
	for _, c := range copies {
		a.logger.Info("ACL binding rule upserted", "id", c.ID, "auth_method", c.AuthMethod, "bind_type", c.BindType, "index", idx)
		ids = append(ids, c.ID)
	}
	st = a.cfg.State()
	out, err := readBack(ids, func(id string) (*structs.ACLBindingRule, error) { return st.ACLBindingRuleByID(nil, id) },
		(*structs.ACLBindingRule).Copy)
	if err != nil {
		return nil, 0, err
	}
	return out, idx, nil
}

// DeleteACLBindingRules deletes binding rules by ID; a missing one is
// structs.ErrNotFound and deletes nothing. It needs a management token.
func (a *ACL) DeleteACLBindingRules(ctx context.Context, secret string, ids []string) (uint64, error) {
	if r, ok, err := leaderrpc.Forward[BindingRuleDeleteArgs, IndexReply](ctx, a.cfg.Leader, "ACL.DeleteBindingRules",
		&BindingRuleDeleteArgs{SecretID: secret, IDs: ids}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := a.requireManagement(secret, "deleting ACL binding rules"); err != nil {
		return 0, err
	}
	if err := checkRequestCount("IDs", len(ids)); err != nil {
		return 0, err
	}
	st := a.cfg.State()
	if err := requireStored("binding rule", ids, func(id string) (*structs.ACLBindingRule, error) { return st.ACLBindingRuleByID(nil, id) }); err != nil {
		return 0, err
	}
	idx, err := a.apply(structs.ACLBindingRuleDeleteRequestType, &structs.ACLBindingRuleDeleteRequest{IDs: slices.Clone(ids)})
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		a.logger.Info("ACL binding rule deleted", "id", id, "index", idx)
	}
	return idx, nil
}

// ListACLBindingRules lists the binding rules whose ID starts with
// prefix. It needs a management token.
func (a *ACL) ListACLBindingRules(_ context.Context, secret, prefix string) ([]*structs.ACLBindingRuleListStub, uint64, error) {
	if err := a.requireManagement(secret, "listing ACL binding rules"); err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	idx := st.Index(state.TableACLBindingRules)
	rules, err := st.ACLBindingRules(nil, prefix)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.ACLBindingRuleListStub, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.Stub())
	}
	return out, idx, nil
}

// GetACLBindingRule returns a binding rule. It needs a management token.
func (a *ACL) GetACLBindingRule(_ context.Context, secret, id string) (*structs.ACLBindingRule, uint64, error) {
	if err := a.requireManagement(secret, "reading ACL binding rules"); err != nil {
		return nil, 0, err
	}
	r, err := a.cfg.State().ACLBindingRuleByID(nil, id)
	if err != nil {
		return nil, 0, err
	}
	if r == nil {
		return nil, 0, structs.NewError(structs.ErrNotFound, "ACL binding rule not found")
	}
	return r.Copy(), r.ModifyIndex, nil
}

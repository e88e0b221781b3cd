package aclendpoint

import (
	"context"
	"slices"
	"sort"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// loginBindings is what the binding rules of a method grant one login.
type loginBindings struct {
	management bool
	roles      []*structs.ACLTokenRoleLink
	policies   []string
}

// bindLogin evaluates the method's rules over the login's mapped claims:
// every rule whose selector matches binds its (interpolated) BindName. A
// role or policy binding that names no existing role or policy binds
// nothing, as does a rule whose BindName reads a claim the login lacks.
func bindLogin(st *state.StateStore, rules []*structs.ACLBindingRule, d *claimData) (*loginBindings, error) {
	b := &loginBindings{}
	roles := map[string]*structs.ACLTokenRoleLink{}
	policies := map[string]bool{}
	for _, r := range rules {
		sel, err := parseSelector(r.Selector)
		if err != nil {
			// Checked on write; a rule that no longer parses grants
			// nothing.
			continue
		}
		if sel != nil && !sel.eval(d) {
			continue
		}
		if r.BindType == structs.ACLBindingRuleBindTypeManagement {
			b.management = true
			continue
		}
		name, ok := interpolateBindName(r.BindName, d)
		if !ok {
			continue
		}
		switch r.BindType {
		case structs.ACLBindingRuleBindTypeRole:
			role, err := st.ACLRoleByName(nil, name)
			if err != nil {
				return nil, err
			}
			if role != nil {
				roles[role.ID] = &structs.ACLTokenRoleLink{ID: role.ID, Name: role.Name}
			}
		case structs.ACLBindingRuleBindTypePolicy:
			if !structs.ValidACLPolicyName(name) {
				continue
			}
			p, err := st.ACLPolicyByName(nil, name)
			if err != nil {
				return nil, err
			}
			if p != nil {
				policies[p.Name] = true
			}
		}
	}
	for _, l := range roles {
		b.roles = append(b.roles, l)
	}
	sort.Slice(b.roles, func(i, j int) bool { return b.roles[i].Name < b.roles[j].Name })
	for p := range policies {
		b.policies = append(b.policies, p)
	}
	slices.Sort(b.policies)
	if len(b.roles) > structs.MaxACLTokenRoles {
		b.roles = b.roles[:structs.MaxACLTokenRoles]
	}
	if len(b.policies) > structs.MaxACLTokenPolicies {
		b.policies = b.policies[:structs.MaxACLTokenPolicies]
	}
	return b, nil
}

// Login exchanges a JWT for an ACL token: the token is verified against
// the auth method (the default method when name is empty), the method's
// binding rules decide the token's roles and policies (or make it a
// management token), and the token lives for the method's MaxTokenTTL.
// No caller token is needed. The new token, secret included, is
// returned.
func (a *ACL) Login(ctx context.Context, name, loginToken string) (*structs.ACLToken, uint64, error) {
	if r, ok, err := leaderrpc.Forward[LoginArgs, TokenReply](ctx, a.cfg.Leader, "ACL.Login",
		&LoginArgs{AuthMethodName: name, LoginToken: loginToken}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Token, r.Index, nil
	}
	if !a.cfg.Enabled {
		return nil, 0, errDisabled
	}
	if loginToken == "" {
		return nil, 0, structs.NewError(structs.ErrInvalid, "LoginToken: missing")
	}
	st := a.cfg.State()
	m, err := a.loginMethod(st, name)
	if err != nil {
		return nil, 0, err
	}
	now := a.cfg.Now().UTC()
	claims, err := a.verifyJWT(ctx, m, loginToken, now)
	if err != nil {
		a.logger.Warn("ACL login refused", "auth_method", m.Name, "error", err)
		return nil, 0, err
	}
	data, err := mapClaims(claims, m.Config)
	if err != nil {
		return nil, 0, err
	}
	rules, err := st.ACLBindingRulesByAuthMethod(nil, m.Name)
	if err != nil {
		return nil, 0, err
	}
	b, err := bindLogin(st, rules, data)
	if err != nil {
		return nil, 0, err
	}
	if !b.management && len(b.roles) == 0 && len(b.policies) == 0 {
		a.logger.Warn("ACL login refused", "auth_method", m.Name, "error", errNoBindings)
		return nil, 0, errNoBindings
	}
	tok := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(),
		Name: loginTokenName(m, data), Type: structs.ACLClientToken,
		Policies: b.policies, Roles: b.roles, Global: m.TokenLocality == structs.ACLAuthMethodTokenLocalityGlobal,
		ExpirationTTL: m.MaxTokenTTL}
	if b.management {
		tok.Type, tok.Policies, tok.Roles = structs.ACLManagementToken, nil, nil
	}
	tok.Canonicalize(now)
	if err := tok.Validate(structs.DefaultACLTokenMinExpirationTTL, structs.DefaultACLTokenMaxExpirationTTL, nil); err != nil {
		return nil, 0, err
	}
	tok.SetHash()
	idx, err := a.apply(structs.ACLTokenUpsertRequestType, &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{tok}})
	if err != nil {
		return nil, 0, err
	}
	stored, err := a.cfg.State().ACLTokenByAccessorID(nil, tok.AccessorID)
	if err != nil {
		return nil, 0, err
	}
	if stored == nil {
		return nil, 0, structs.NewError(structs.ErrUnavailable, "ACL token %s not found after its write", tok.AccessorID)
	}
	a.logger.Info("ACL login", "auth_method", m.Name, "accessor_id", tok.AccessorID, "type", tok.Type,
		"roles", len(tok.Roles), "policies", len(tok.Policies), "index", idx)
	return stored.Copy(), idx, nil
}

// tokenNameVars are the variables a TokenNameFormat may read besides
// ${value.<claim>}.
var tokenNameVars = []string{"auth_method_type", "auth_method_name"}

// loginTokenName names a login's token from the method's TokenNameFormat;
// without one, or when it reads a claim the login lacks, the name is
// "token created via login: <method>".
func loginTokenName(m *structs.ACLAuthMethod, d *claimData) string {
	fallback := "token created via login: " + m.Name
	if m.TokenNameFormat == "" {
		return fallback
	}
	name, ok := interpolate(m.TokenNameFormat, d, map[string]string{"auth_method_type": m.Type, "auth_method_name": m.Name})
	if !ok || name == "" {
		return fallback
	}
	if len(name) > structs.MaxACLTokenNameLength {
		name = name[:structs.MaxACLTokenNameLength]
	}
	return name
}

// loginMethod finds the method a login names, or the default one.
func (a *ACL) loginMethod(st *state.StateStore, name string) (*structs.ACLAuthMethod, error) {
	if name != "" {
		m, err := st.ACLAuthMethodByName(nil, name)
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, structs.NewError(structs.ErrNotFound, "auth-method %q not found", bounded(name))
		}
		return m, nil
	}
	methods, err := st.ACLAuthMethods(nil)
	if err != nil {
		return nil, err
	}
	for _, m := range methods {
		if m.Default {
			return m, nil
		}
	}
	return nil, structs.NewError(structs.ErrInvalid, "AuthMethodName: missing, and no auth method is the default")
}

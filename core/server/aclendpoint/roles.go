package aclendpoint

import (
	"context"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// ACL roles (Nomad's /v1/acl/role*): named sets of policy links that
// tokens hold. Writes need a management token; a role is read by a
// management token or a token that holds it.

// RPC arguments of the role endpoints.
type (
	RoleUpsertArgs struct {
		SecretID string
		Roles    []*structs.ACLRole
	}
	RoleDeleteArgs struct {
		SecretID string
		IDs      []string
	}
	RolesReply struct {
		Roles []*structs.ACLRole
		Index uint64
	}
)

func registerRoles(rs *rpc.Server, a *ACL, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "ACL.UpsertRoles", func(ctx context.Context, args *RoleUpsertArgs) (*RolesReply, error) {
		roles, idx, err := a.UpsertACLRoles(mark(ctx), args.SecretID, args.Roles)
		return &RolesReply{Roles: roles, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.DeleteRoles", func(ctx context.Context, args *RoleDeleteArgs) (*IndexReply, error) {
		idx, err := a.DeleteACLRoles(mark(ctx), args.SecretID, args.IDs)
		return &IndexReply{Index: idx}, err
	})
}

// prepareRoles checks the roles of an upsert against st and returns the
// copies to store: a role without ID is created (a new UUID; its name
// must be free), one with an ID must exist. Policy links need not name
// existing policies (as Nomad's); a name twice in one request is refused.
func prepareRoles(st *state.StateStore, roles []*structs.ACLRole, newID func() string) ([]*structs.ACLRole, error) {
	if err := checkRequestCount("Roles", len(roles)); err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(roles))
	ids := make(map[string]bool, len(roles))
	out := make([]*structs.ACLRole, 0, len(roles))
	for _, in := range roles {
		if err := in.Validate(); err != nil {
			return nil, err
		}
		r := in.Copy()
		r.Hash, r.CreateIndex, r.ModifyIndex = nil, 0, 0
		if r.ID == "" {
			r.ID = newID()
		} else {
			old, err := st.ACLRoleByID(nil, r.ID)
			if err != nil {
				return nil, err
			}
			if old == nil {
				return nil, structs.NewError(structs.ErrNotFound, "ACL role not found: %s", r.ID)
			}
		}
		other, err := st.ACLRoleByName(nil, r.Name)
		if err != nil {
			return nil, err
		}
		if other != nil && other.ID != r.ID {
			return nil, structs.NewError(structs.ErrInvalid, "role name %q: already used by role %s", r.Name, other.ID)
		}
		if names[r.Name] || ids[r.ID] {
			return nil, structs.NewError(structs.ErrInvalid, "role %q: named twice in one request", r.Name)
		}
		names[r.Name], ids[r.ID] = true, true
		r.SetHash()
		out = append(out, r)
	}
	return out, nil
}

// UpsertACLRoles creates or updates roles in one Raft entry and returns
// them as stored. It needs a management token.
func (a *ACL) UpsertACLRoles(ctx context.Context, secret string, roles []*structs.ACLRole) ([]*structs.ACLRole, uint64, error) {
	if r, ok, err := leaderrpc.Forward[RoleUpsertArgs, RolesReply](ctx, a.cfg.Leader, "ACL.UpsertRoles",
		&RoleUpsertArgs{SecretID: secret, Roles: roles}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Roles, r.Index, nil
	}
	if err := a.requireManagement(secret, "writing ACL roles"); err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	copies, err := prepareRoles(st, roles, uuid.NewString)
	if err != nil {
		return nil, 0, err
	}
	idx, err := a.apply(structs.ACLRoleUpsertRequestType, &structs.ACLRoleUpsertRequest{Roles: copies})
	if err != nil {
		return nil, 0, err
	}
	ids := make([]string, 0, len(copies))
	for _, c := range copies {
		a.logger.Info("ACL role upserted", "role", c.Name, "id", c.ID, "index", idx)
		ids = append(ids, c.ID)
	}
	st = a.cfg.State()
	out, err := readBack(ids, func(id string) (*structs.ACLRole, error) { return st.ACLRoleByID(nil, id) }, (*structs.ACLRole).Copy)
	if err != nil {
		return nil, 0, err
	}
	return out, idx, nil
}

// DeleteACLRoles deletes roles by ID; a missing one is structs.ErrNotFound
// and deletes nothing. Tokens holding a deleted role keep the link, which
// grants nothing. It needs a management token.
func (a *ACL) DeleteACLRoles(ctx context.Context, secret string, ids []string) (uint64, error) {
	if r, ok, err := leaderrpc.Forward[RoleDeleteArgs, IndexReply](ctx, a.cfg.Leader, "ACL.DeleteRoles",
		&RoleDeleteArgs{SecretID: secret, IDs: ids}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if err := a.requireManagement(secret, "deleting ACL roles"); err != nil {
		return 0, err
	}
	if err := checkRequestCount("IDs", len(ids)); err != nil {
		return 0, err
	}
	st := a.cfg.State()
	if err := requireStored("role", ids, func(id string) (*structs.ACLRole, error) { return st.ACLRoleByID(nil, id) }); err != nil {
		return 0, err
	}
	idx, err := a.apply(structs.ACLRoleDeleteRequestType, &structs.ACLRoleDeleteRequest{IDs: append([]string(nil), ids...)})
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		a.logger.Info("ACL role deleted", "id", id, "index", idx)
	}
	return idx, nil
}

// holdsRole reports whether tok links to the role.
func holdsRole(tok *structs.ACLToken, id string) bool {
	if tok == nil {
		return false
	}
	for _, l := range tok.Roles {
		if l != nil && l.ID == id {
			return true
		}
	}
	return false
}

// ListACLRoles lists the roles whose ID starts with prefix: all of them
// to a management token, the ones it holds to any other.
func (a *ACL) ListACLRoles(_ context.Context, secret, prefix string) ([]*structs.ACLRoleListStub, uint64, error) {
	tok, c, err := a.caller(secret)
	if err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	idx := st.Index(state.TableACLRoles)
	roles, err := st.ACLRoles(nil, prefix)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.ACLRoleListStub, 0, len(roles))
	for _, r := range roles {
		if c.IsManagement() || holdsRole(tok, r.ID) {
			out = append(out, r.Stub())
		}
	}
	return out, idx, nil
}

// GetACLRole returns a role by ID, or by name when byName, to a management
// token or a token holding it; anyone else is denied.
func (a *ACL) GetACLRole(_ context.Context, secret, key string, byName bool) (*structs.ACLRole, uint64, error) {
	tok, c, err := a.caller(secret)
	if err != nil {
		return nil, 0, err
	}
	st := a.cfg.State()
	var r *structs.ACLRole
	if byName {
		r, err = st.ACLRoleByName(nil, key)
	} else {
		r, err = st.ACLRoleByID(nil, key)
	}
	if err != nil {
		return nil, 0, err
	}
	if !c.IsManagement() && (r == nil || !holdsRole(tok, r.ID)) {
		return nil, 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied: reading an ACL role needs a management token or a token holding it")
	}
	if r == nil {
		return nil, 0, structs.NewError(structs.ErrNotFound, "ACL role not found")
	}
	return r.Copy(), r.ModifyIndex, nil
}

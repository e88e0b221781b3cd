package state

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// TableACLRoles holds ACL roles (see schema.TableACLRoles).
const TableACLRoles = schema.TableACLRoles

// UpsertACLRoles writes roles; an existing role (same ID) keeps its
// CreateIndex. Every role is validated and must carry an ID; a name that
// is another role's is structs.ErrConflict. One bad role writes none.
func (s *StateStore) UpsertACLRoles(index uint64, roles []*structs.ACLRole) error {
	return s.write(index, func(t *writeTxn) error {
		for _, r := range roles {
			if err := r.Validate(); err != nil {
				return err
			}
			if r.ID == "" {
				return structs.NewError(structs.ErrInvalid, "ACL role %q: missing ID", r.Name)
			}
			raw, err := t.first(TableACLRoles, "name", r.Name)
			if err != nil {
				return err
			}
			if raw != nil && raw.(*structs.ACLRole).ID != r.ID {
				return structs.NewError(structs.ErrConflict, "ACL role name %q: already another role's", r.Name)
			}
			raw, err = t.first(TableACLRoles, "id", r.ID)
			if err != nil {
				return err
			}
			r.CreateIndex = index
			if raw != nil {
				r.CreateIndex = raw.(*structs.ACLRole).CreateIndex
			}
			r.ModifyIndex = index
			if len(r.Hash) == 0 {
				r.SetHash()
			}
			if err := t.insert(TableACLRoles, r); err != nil {
				return err
			}
		}
		t.tables[TableACLRoles] = struct{}{}
		return nil
	})
}

// DeleteACLRoles deletes roles by ID; an ID that does not exist is
// structs.ErrNotFound and deletes nothing. Tokens holding a deleted role
// keep the link, which then grants nothing.
func (s *StateStore) DeleteACLRoles(index uint64, ids []string) error {
	return s.write(index, func(t *writeTxn) error {
		for _, id := range ids {
			raw, err := t.first(TableACLRoles, "id", id)
			if err != nil {
				return err
			}
			if raw == nil {
				return structs.NewError(structs.ErrNotFound, "ACL role %q not found", id)
			}
			if err := t.delete(TableACLRoles, raw); err != nil {
				return err
			}
		}
		t.tables[TableACLRoles] = struct{}{}
		return nil
	})
}

// ACLRoleByID returns a role, or nil.
func (s *StateStore) ACLRoleByID(ws memdb.WatchSet, id string) (*structs.ACLRole, error) {
	return first[*structs.ACLRole](s, ws, TableACLRoles, "id", id)
}

// ACLRoleByName returns a role, or nil.
func (s *StateStore) ACLRoleByName(ws memdb.WatchSet, name string) (*structs.ACLRole, error) {
	return first[*structs.ACLRole](s, ws, TableACLRoles, "name", name)
}

// ACLRoles returns the roles whose ID starts with prefix, by ID.
func (s *StateStore) ACLRoles(ws memdb.WatchSet, prefix string) ([]*structs.ACLRole, error) {
	return list[*structs.ACLRole](s, ws, nil, TableACLRoles, "id_prefix", prefix)
}

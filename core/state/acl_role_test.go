package state

import (
	"testing"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

func mockRole(name string, policies ...string) *structs.ACLRole {
	r := &structs.ACLRole{ID: uuid.NewString(), Name: name}
	for _, p := range policies {
		r.Policies = append(r.Policies, &structs.ACLRolePolicyLink{Name: p})
	}
	return r
}

func TestStateStore_ACLRoles(t *testing.T) {
	s := testStore(t)
	ops, dev := mockRole("ops", "a", "absent"), mockRole("dev", "b")
	must(t, s.UpsertACLRoles(5, []*structs.ACLRole{ops, dev}))
	upd := mockRole("ops", "a")
	upd.ID, upd.Description = ops.ID, "changed"
	must(t, s.UpsertACLRoles(6, []*structs.ACLRole{upd}))

	r, err := s.ACLRoleByID(nil, ops.ID)
	if err != nil || r == nil || r.CreateIndex != 5 || r.ModifyIndex != 6 || r.Description != "changed" || len(r.Hash) == 0 {
		t.Fatalf("role ops = %+v, %v; want created 5 modified 6 with a hash", r, err)
	}
	if r, _ := s.ACLRoleByName(nil, "dev"); r == nil || r.ID != dev.ID {
		t.Errorf("role by name dev = %+v", r)
	}
	if rs, _ := s.ACLRoles(nil, ""); len(rs) != 2 {
		t.Errorf("lists %d roles, want 2", len(rs))
	}
	if rs, _ := s.ACLRoles(nil, dev.ID[:8]); len(rs) != 1 || rs[0].ID != dev.ID {
		t.Errorf("prefix lists %+v, want dev", rs)
	}
	if s.Index(TableACLRoles) != 6 {
		t.Errorf("roles index %d, want 6", s.Index(TableACLRoles))
	}

	// A name that is another role's is a conflict, and writes nothing.
	clash := mockRole("dev", "c")
	if err := s.UpsertACLRoles(7, []*structs.ACLRole{mockRole("fresh", "a"), clash}); structs.KindName(err) != "conflict" {
		t.Errorf("name clash: %v, want ErrConflict", err)
	}
	if r, _ := s.ACLRoleByName(nil, "fresh"); r != nil {
		t.Error("a refused upsert wrote a role")
	}
	if err := s.UpsertACLRoles(7, []*structs.ACLRole{{Name: "noid", Policies: []*structs.ACLRolePolicyLink{{Name: "a"}}}}); structs.KindName(err) != "invalid" {
		t.Errorf("role without an ID: %v, want ErrInvalid", err)
	}
	if err := s.UpsertACLRoles(7, []*structs.ACLRole{mockRole("bad name", "a")}); structs.KindName(err) != "invalid" {
		t.Errorf("bad role name: %v, want ErrInvalid", err)
	}

	// Delete: a missing ID deletes nothing.
	if err := s.DeleteACLRoles(8, []string{dev.ID, uuid.NewString()}); structs.KindName(err) != "not_found" {
		t.Errorf("delete of a missing role: %v, want ErrNotFound", err)
	}
	if r, _ := s.ACLRoleByID(nil, dev.ID); r == nil {
		t.Error("a refused delete removed a role")
	}
	must(t, s.DeleteACLRoles(9, []string{dev.ID}))
	if r, _ := s.ACLRoleByID(nil, dev.ID); r != nil {
		t.Error("deleted role still there")
	}
	// Its name is free again.
	must(t, s.UpsertACLRoles(10, []*structs.ACLRole{mockRole("dev", "b")}))
}

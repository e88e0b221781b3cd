package aclendpoint

import (
	"context"
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestACLRoleCRUD(t *testing.T) {
	s := aclServer(t, newTestClock(), nil)
	ctx := context.Background()
	mgmt, _, err := s.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertACLPolicies(ctx, mgmt.SecretID, []*structs.ACLPolicy{{Name: "ro", Rules: `namespace "default" { policy = "read" }`}}); err != nil {
		t.Fatal(err)
	}
	link := []*structs.ACLRolePolicyLink{{Name: "ro"}, {Name: "later"}}
	roles, idx, err := s.UpsertACLRoles(ctx, mgmt.SecretID, []*structs.ACLRole{{Name: "ops", Description: "d", Policies: link}})
	if err != nil || len(roles) != 1 || !structs.IsUUID(roles[0].ID) || roles[0].CreateIndex != idx || len(roles[0].Hash) == 0 {
		t.Fatalf("create: %+v %v", roles, err)
	}
	ops := roles[0]
	if _, _, err := s.UpsertACLRoles(ctx, mgmt.SecretID, []*structs.ACLRole{{Name: "ops", Policies: link}}); structs.HTTPStatus(err) != 400 {
		t.Errorf("second role named ops: %v, want 400", err)
	}
	if _, _, err := s.UpsertACLRoles(ctx, mgmt.SecretID, []*structs.ACLRole{{Name: "x"}}); structs.HTTPStatus(err) != 400 {
		t.Errorf("role without policies: %v, want 400", err)
	}

	toks, _, err := s.UpsertACLTokens(ctx, mgmt.SecretID, []*structs.ACLToken{{Name: "r", Type: "client", Roles: []*structs.ACLTokenRoleLink{{Name: "ops"}}}})
	if err != nil || len(toks[0].Roles) != 1 || toks[0].Roles[0].ID != ops.ID {
		t.Fatalf("token with a role: %+v %v", toks, err)
	}
	holder := toks[0]
	_, c, err := s.ResolveToken(holder.SecretID)
	if err != nil || !c.AllowNamespaceOperation("default", "read-job") || c.AllowNamespaceOperation("default", "submit-job") {
		t.Fatalf("holder's ACL: %v; want the role's policy", err)
	}
	if r, _, err := s.GetACLRole(ctx, holder.SecretID, "ops", true); err != nil || r.ID != ops.ID {
		t.Errorf("holder reads its role by name: %+v %v", r, err)
	}
	if l, _, err := s.ListACLRoles(ctx, holder.SecretID, ""); err != nil || len(l) != 1 {
		t.Errorf("holder lists: %d %v", len(l), err)
	}
	if _, _, err := s.UpsertACLRoles(ctx, holder.SecretID, []*structs.ACLRole{{Name: "y", Policies: link}}); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("client writes a role: %v", err)
	}

	// Update keeps the ID and CreateIndex; the new links apply at once.
	upd := ops.Copy()
	upd.Policies = []*structs.ACLRolePolicyLink{{Name: "later"}}
	roles, _, err = s.UpsertACLRoles(ctx, mgmt.SecretID, []*structs.ACLRole{upd})
	if err != nil || roles[0].ID != ops.ID || roles[0].CreateIndex != ops.CreateIndex || roles[0].ModifyIndex <= ops.ModifyIndex {
		t.Fatalf("update: %+v %v", roles, err)
	}
	if _, c, _ := s.ResolveToken(holder.SecretID); c.AllowNamespace("default") {
		t.Error("holder still reads default after its role lost the policy")
	}

	if _, err := s.DeleteACLRoles(ctx, mgmt.SecretID, []string{"not-a-uuid"}); structs.HTTPStatus(err) != 400 {
		t.Errorf("delete by a bad ID: %v", err)
	}
	if _, err := s.DeleteACLRoles(ctx, mgmt.SecretID, []string{ops.ID}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetACLRole(ctx, mgmt.SecretID, ops.ID, false); !errors.Is(err, structs.ErrNotFound) {
		t.Errorf("read after delete: %v", err)
	}
	// The token keeps its link, which grants nothing now.
	if tok, _, err := s.ResolveToken(holder.SecretID); err != nil || len(tok.Roles) != 1 {
		t.Errorf("holder after delete: %+v %v", tok, err)
	}
}

package httpapi

import (
	"reflect"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
)

// The official client manages roles, and a token holding a role gets its
// policies at request time.
func TestACLRolesWithNomadClient(t *testing.T) {
	c := aclTestServer(t, true)
	mgmt, _, err := c.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecretID(mgmt.SecretID)
	if _, err := c.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "readers", Rules: `namespace "default" { policy = "read" }`}, nil); err != nil {
		t.Fatal(err)
	}

	if _, _, err := c.ACLRoles().Create(&nomadapi.ACLRole{Name: "bad name"}, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("role with a bad name and no policies: %v; want 400", err)
	}
	role, _, err := c.ACLRoles().Create(&nomadapi.ACLRole{Name: "ops", Description: "d",
		Policies: []*nomadapi.ACLRolePolicyLink{{Name: "readers"}, {Name: "not-yet"}}}, nil)
	if err != nil || role.ID == "" || role.Name != "ops" || len(role.Policies) != 2 || role.CreateIndex == 0 {
		t.Fatalf("role create: %+v, %v", role, err)
	}
	// As Nomad's api tests check: the create answer is the role as read.
	if got, _, err := c.ACLRoles().Get(role.ID, nil); err != nil || !reflect.DeepEqual(got, role) {
		t.Errorf("role get: %+v, %v; want %+v", got, err, role)
	}
	if got, _, err := c.ACLRoles().GetByName("ops", nil); err != nil || got.ID != role.ID {
		t.Errorf("role get by name: %+v, %v", got, err)
	}
	if list, _, err := c.ACLRoles().List(nil); err != nil || len(list) != 1 || list[0].ID != role.ID || len(list[0].Policies) != 2 {
		t.Errorf("role list: %+v, %v", list, err)
	}

	tok, _, err := c.ACLTokens().Create(&nomadapi.ACLToken{Name: "r", Type: "client",
		Roles: []*nomadapi.ACLTokenRoleLink{{Name: "ops"}}}, nil)
	if err != nil || len(tok.Roles) != 1 || tok.Roles[0].ID != role.ID || tok.Roles[0].Name != "ops" {
		t.Fatalf("token with a role: %+v, %v", tok, err)
	}
	if _, _, err := c.ACLTokens().Create(&nomadapi.ACLToken{Name: "r", Type: "client",
		Roles: []*nomadapi.ACLTokenRoleLink{{Name: "nosuch"}}}, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("token with an unknown role: %v; want 400", err)
	}
	rc := aclClientLike(t, c, tok.SecretID)
	if _, _, err := rc.Jobs().List(nil); err != nil {
		t.Errorf("job list through the role's policy: %v", err)
	}
	if got, _, err := rc.ACLRoles().Get(role.ID, nil); err != nil || got.ID != role.ID {
		t.Errorf("holder reads its role: %+v, %v", got, err)
	}
	if _, _, err := rc.ACLRoles().Create(&nomadapi.ACLRole{Name: "x", Policies: []*nomadapi.ACLRolePolicyLink{{Name: "readers"}}}, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("client creates a role: %v; want 403", err)
	}

	role.Description = "changed"
	upd, _, err := c.ACLRoles().Update(role, nil)
	if err != nil || upd.ID != role.ID || upd.Description != "changed" || upd.ModifyIndex <= role.ModifyIndex {
		t.Fatalf("role update: %+v, %v", upd, err)
	}

	// Deleting the role takes its policies from the token at once.
	if _, err := c.ACLRoles().Delete(role.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rc.Jobs().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("job list after the role is deleted: %v; want 403", err)
	}
	if _, _, err := c.ACLRoles().Get(role.ID, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("role get after delete: %v; want 404", err)
	}
}

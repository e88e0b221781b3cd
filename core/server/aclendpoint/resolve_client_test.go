package aclendpoint

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

func TestResolveForClient(t *testing.T) {
	if r, err := newTestACL(t, nil).resolveForClient(uuid.NewString()); err != nil || r.Enabled || r.Token != nil {
		t.Fatalf("with ACLs off: %+v, %v; want a reply that says disabled", r, err)
	}

	s := aclServer(t, nil, nil)
	st := s.State()
	pols := []*structs.ACLPolicy{
		{Name: "read-default", Rules: `namespace "default" { policy = "read" }`},
		{Name: "other", Rules: `node { policy = "read" }`},
	}
	if err := st.UpsertACLPolicies(1000, pols); err != nil {
		t.Fatal(err)
	}
	reader := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: "r", Type: structs.ACLClientToken,
		Policies: []string{"read-default", "read-default", "gone"}}
	if err := st.UpsertACLTokens(1001, []*structs.ACLToken{reader}); err != nil {
		t.Fatal(err)
	}

	r, err := s.resolveForClient(reader.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Enabled || r.Token == nil || r.Token.AccessorID != reader.AccessorID {
		t.Fatalf("reply %+v; want the reader token", r)
	}
	if r.Token.SecretID != "" {
		t.Error("the reply carries the token's secret")
	}
	if len(r.Policies) != 1 || r.Policies[0].Name != "read-default" {
		t.Errorf("policies %+v; want read-default alone (once, and no policy the token does not name)", r.Policies)
	}

	// A token holding a role: the reply's token names the role's policies
	// too, since the client resolves without roles.
	role := &structs.ACLRole{ID: uuid.NewString(), Name: "ops", Policies: []*structs.ACLRolePolicyLink{{Name: "other"}}}
	if err := st.UpsertACLRoles(1002, []*structs.ACLRole{role}); err != nil {
		t.Fatal(err)
	}
	holder := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: "h", Type: structs.ACLClientToken,
		Policies: []string{"read-default"}, Roles: []*structs.ACLTokenRoleLink{{ID: role.ID, Name: "ops"}}}
	if err := st.UpsertACLTokens(1003, []*structs.ACLToken{holder}); err != nil {
		t.Fatal(err)
	}
	hr, err := s.resolveForClient(holder.SecretID)
	if err != nil || len(hr.Policies) != 2 || len(hr.Token.Policies) != 2 || hr.Token.Policies[0] != "other" || hr.Token.Policies[1] != "read-default" {
		t.Errorf("role holder: %+v (token %+v), %v; want both policies, in the reply and on the token", hr, hr.Token, err)
	}
	if sp, _ := st.ACLTokenByAccessorID(nil, holder.AccessorID); len(sp.Policies) != 1 {
		t.Errorf("the stored token was changed: %+v", sp.Policies)
	}

	anon, err := s.resolveForClient("")
	if err != nil || anon.Token == nil || len(anon.Policies) != 0 {
		t.Errorf("anonymous: %+v, %v; want the anonymous token without policies", anon, err)
	}
	if _, err := s.resolveForClient(uuid.NewString()); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("unknown secret: %v; want permission denied", err)
	}
}

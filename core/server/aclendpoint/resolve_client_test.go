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

	anon, err := s.resolveForClient("")
	if err != nil || anon.Token == nil || len(anon.Policies) != 0 {
		t.Errorf("anonymous: %+v, %v; want the anonymous token without policies", anon, err)
	}
	if _, err := s.resolveForClient(uuid.NewString()); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("unknown secret: %v; want permission denied", err)
	}
}

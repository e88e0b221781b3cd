package aclendpoint

import (
	"context"
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// The CRUD round trip at the server: writes, refusals, reads by a
// client token, and deletion. The HTTP tests (core/httpapi) walk the same
// methods through the official client and the ACL matrix.
func TestACLCRUDRoundTrip(t *testing.T) {
	s := aclServer(t, newTestClock(), nil)
	ctx := context.Background()
	mgmt, _, err := s.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertACLPolicies(ctx, mgmt.SecretID, []*structs.ACLPolicy{{Name: "bad name"}}); structs.HTTPStatus(err) != 400 {
		t.Fatalf("bad policy name: %v", err)
	}
	if _, err := s.UpsertACLPolicies(ctx, mgmt.SecretID, []*structs.ACLPolicy{{Name: "ro", Rules: `namespace "default" { policy = "read" }`}}); err != nil {
		t.Fatal(err)
	}
	// As Nomad's, a token may name a policy that does not exist yet.
	if _, _, err := s.UpsertACLTokens(ctx, mgmt.SecretID, []*structs.ACLToken{{Type: "client", Policies: []string{"nope"}}}); err != nil {
		t.Fatalf("token naming an absent policy: %v", err)
	}
	toks, _, err := s.UpsertACLTokens(ctx, mgmt.SecretID, []*structs.ACLToken{{Name: "c", Type: "client", Policies: []string{"ro"}}})
	if err != nil {
		t.Fatal(err)
	}
	client := toks[0]
	if !structs.IsUUID(client.SecretID) || !structs.IsUUID(client.AccessorID) || client.CreateIndex == 0 {
		t.Fatalf("created token %+v", client.Redacted())
	}
	if _, _, err := s.ListACLTokens(ctx, client.SecretID, ""); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("client lists tokens: %v", err)
	}
	if p, _, err := s.GetACLPolicy(ctx, client.SecretID, "ro"); err != nil || p.Name != "ro" {
		t.Fatalf("client reads its policy: %v %v", p, err)
	}
	if self, _, err := s.ACLTokenSelf(ctx, client.SecretID); err != nil || self.AccessorID != client.AccessorID {
		t.Fatalf("self: %v %v", self, err)
	}
	stubs, _, err := s.ListACLTokens(ctx, mgmt.SecretID, "")
	if err != nil || len(stubs) != 3 {
		t.Fatalf("list: %d %v, want bootstrap, absent-policy and client tokens", len(stubs), err)
	}
	if _, err := s.DeleteACLTokens(ctx, mgmt.SecretID, []string{client.AccessorID}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetACLToken(ctx, mgmt.SecretID, client.AccessorID); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("deleted token: %v", err)
	}
}

func TestACLCRUDRefusals(t *testing.T) {
	ctx := context.Background()
	if _, err := newTestACL(t, nil).UpsertACLPolicies(ctx, "", []*structs.ACLPolicy{{Name: "p"}}); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("with ACLs off: %v; want ACL support disabled", err)
	}
	s := aclServer(t, newTestClock(), nil)
	mgmt, _, err := s.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	many := make([]*structs.ACLPolicy, MaxObjectsPerRequest+1)
	for i := range many {
		many[i] = &structs.ACLPolicy{Name: "p" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Rules: `node { policy = "read" }`}
	}
	if _, err := s.UpsertACLPolicies(ctx, mgmt.SecretID, many); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("%d policies in one request: %v; want refused", len(many), err)
	}
	tok := &structs.ACLToken{AccessorID: mgmt.AccessorID, SecretID: "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11", Type: "management"}
	if _, _, err := s.UpsertACLTokens(ctx, mgmt.SecretID, []*structs.ACLToken{tok}); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("changing a token's secret: %v; want refused", err)
	}
	if got, _ := s.State().ACLTokenByAccessorID(nil, mgmt.AccessorID); got == nil || got.SecretID != mgmt.SecretID {
		t.Errorf("the refused update changed the token: %+v", got)
	}
}

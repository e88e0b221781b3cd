package aclendpoint

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

func TestResolveToken(t *testing.T) {
	s := aclServer(t, nil, nil)
	st := s.State()
	readDefault := &structs.ACLPolicy{Name: "read-default", Rules: `namespace "default" { policy = "read" }`}
	if err := st.UpsertACLPolicies(1000, []*structs.ACLPolicy{readDefault}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	mgmt := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: "m", Type: structs.ACLManagementToken}
	reader := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: "r", Type: structs.ACLClientToken,
		Policies: []string{"read-default"}}
	expired := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: "e", Type: structs.ACLClientToken,
		Policies: []string{"read-default"}, ExpirationTime: &past}
	if err := st.UpsertACLTokens(1001, []*structs.ACLToken{mgmt, reader, expired}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		secret     string
		denied     bool
		management bool
		readsDef   bool
	}{
		{name: "anonymous without an anonymous policy", secret: ""},
		{name: "management", secret: mgmt.SecretID, management: true, readsDef: true},
		{name: "client token", secret: reader.SecretID, readsDef: true},
		{name: "unknown secret", secret: uuid.NewString(), denied: true},
		{name: "not a uuid", secret: "secret'; DROP TABLE", denied: true},
		{name: "expired", secret: expired.SecretID, denied: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, a, err := s.ResolveToken(tt.secret)
			if tt.denied {
				if !errors.Is(err, structs.ErrPermissionDenied) {
					t.Fatalf("err = %v, want permission denied", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tok == nil {
				t.Fatal("no token")
			}
			if a.IsManagement() != tt.management {
				t.Errorf("management = %v, want %v", a.IsManagement(), tt.management)
			}
			if got := a.AllowNamespaceOperation("default", "read-job"); got != tt.readsDef {
				t.Errorf("read-job in default = %v, want %v", got, tt.readsDef)
			}
			if !tt.management && a.AllowNamespaceOperation("other", "read-job") {
				t.Error("a non-management token reads namespace other")
			}
		})
	}

	// The anonymous policy grants the anonymous caller, and a policy
	// change is seen at once (the cache keys on policy versions).
	anon := &structs.ACLPolicy{Name: "anonymous", Rules: `namespace "default" { policy = "read" }`}
	if err := st.UpsertACLPolicies(1002, []*structs.ACLPolicy{anon}); err != nil {
		t.Fatal(err)
	}
	if _, a, err := s.ResolveToken(""); err != nil || !a.AllowNamespaceOperation("default", "read-job") {
		t.Fatalf("anonymous with the anonymous policy: err %v, reads default %v", err, a != nil && a.AllowNamespaceOperation("default", "read-job"))
	}
	narrowed := &structs.ACLPolicy{Name: "read-default", Rules: `namespace "other" { policy = "read" }`}
	if err := st.UpsertACLPolicies(1003, []*structs.ACLPolicy{narrowed}); err != nil {
		t.Fatal(err)
	}
	_, a, err := s.ResolveToken(reader.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	if a.AllowNamespaceOperation("default", "read-job") || !a.AllowNamespaceOperation("other", "read-job") {
		t.Error("the resolved ACL does not follow the policy's new rules")
	}
}

func TestResolveTokenACLDisabledIsManagement(t *testing.T) {
	s := newTestACL(t, nil)
	if s.ACLEnabled() {
		t.Fatal("ACLs on by default")
	}
	for _, secret := range []string{"", "not-a-token", uuid.NewString()} {
		_, a, err := s.ResolveToken(secret)
		if err != nil || !a.IsManagement() {
			t.Errorf("ResolveToken(%q) with ACLs off = %v, management %v; want management", secret, err, a != nil && a.IsManagement())
		}
	}
}

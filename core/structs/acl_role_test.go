package structs

import (
	"strings"
	"testing"
)

func TestACLRoleValidate(t *testing.T) {
	link := func(names ...string) []*ACLRolePolicyLink {
		out := make([]*ACLRolePolicyLink, len(names))
		for i, n := range names {
			out[i] = &ACLRolePolicyLink{Name: n}
		}
		return out
	}
	many := make([]string, MaxACLRolePolicies+1)
	for i := range many {
		many[i] = "p" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + "-" + string(rune('a'+i/26%26))
	}
	tests := []struct {
		name    string
		role    *ACLRole
		wantErr string
	}{
		{name: "ok", role: &ACLRole{Name: "ops", Policies: link("a", "not-yet")}},
		{name: "ok with ID", role: &ACLRole{ID: "11111111-1111-4111-8111-111111111111", Name: "ops", Policies: link("a")}},
		{name: "nil", role: nil, wantErr: "role: missing"},
		{name: "bad ID", role: &ACLRole{ID: "x", Name: "ops", Policies: link("a")}, wantErr: `role ID "x": must be a UUID`},
		{name: "bad name", role: &ACLRole{Name: "a b", Policies: link("a")}, wantErr: "role name \"a b\": must match"},
		{name: "long name", role: &ACLRole{Name: strings.Repeat("a", 129), Policies: link("a")}, wantErr: "must match"},
		{name: "long description", role: &ACLRole{Name: "r", Description: strings.Repeat("d", 257), Policies: link("a")},
			wantErr: "description: must be at most 256 bytes (got 257)"},
		{name: "no policies", role: &ACLRole{Name: "r"}, wantErr: "at least one policy link is required"},
		{name: "too many policies", role: &ACLRole{Name: "r", Policies: link(many...)}, wantErr: "exceeds limit MaxACLRolePolicies"},
		{name: "nil link", role: &ACLRole{Name: "r", Policies: []*ACLRolePolicyLink{nil}}, wantErr: "policies[0]: missing"},
		{name: "bad link", role: &ACLRole{Name: "r", Policies: link("a", "b c")}, wantErr: `policies[1] name "b c": must match`},
		{name: "twice", role: &ACLRole{Name: "r", Policies: link("a", "a")}, wantErr: `policies[1] "a": linked twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.role.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if KindName(err) != "invalid" || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate: %v; want ErrInvalid with %q", err, tt.wantErr)
			}
		})
	}
}

func TestACLRoleHashAndCopy(t *testing.T) {
	r := &ACLRole{Name: "r", Policies: []*ACLRolePolicyLink{{Name: "a"}, {Name: "b"}}}
	h1 := string(r.SetHash())
	c := r.Copy()
	c.Policies[0].Name = "changed"
	if r.Policies[0].Name != "a" {
		t.Fatal("Copy shares policy links with the original")
	}
	if string(c.SetHash()) == h1 {
		t.Error("hash did not change with a policy link")
	}
	// Field boundaries are part of the digest.
	a := &ACLRole{Name: "ab", Policies: []*ACLRolePolicyLink{{Name: "c"}}}
	b := &ACLRole{Name: "a", Description: "b", Policies: []*ACLRolePolicyLink{{Name: "c"}}}
	if string(a.SetHash()) == string(b.SetHash()) {
		t.Error("different roles share a hash")
	}
	if got := r.Stub(); got.Name != "r" || len(got.Policies) != 2 || string(got.Hash) != h1 {
		t.Errorf("stub %+v", got)
	}
}

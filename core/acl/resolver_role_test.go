package acl

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// roleSource is a memSource with roles.
type roleSource struct {
	*memSource
	roles map[string]*structs.ACLRole
}

func (s roleSource) ACLRoleByID(id string) (*structs.ACLRole, error) { return s.roles[id], s.err }

func TestResolveRoles(t *testing.T) {
	mem := newMemSource()
	mem.putPolicy("readers", `namespace "*" { policy = "read" }`)
	mem.putPolicy("submit", `namespace "default" { capabilities = ["submit-job"] }`)
	src := roleSource{memSource: mem, roles: map[string]*structs.ACLRole{
		"r1": {ID: "r1", Name: "ops", Policies: []*structs.ACLRolePolicyLink{{Name: "submit"}, {Name: "not-yet"}}},
	}}
	tok := mem.putToken("holder", "readers")
	tok.Roles = []*structs.ACLTokenRoleLink{{ID: "r1", Name: "ops"}}
	onlyRole := mem.putToken("role-only", "x")
	onlyRole.Policies = nil
	onlyRole.Type = structs.ACLClientToken
	onlyRole.Roles = []*structs.ACLTokenRoleLink{{ID: "r1"}}

	r := NewResolver(0)
	resolve := func(secret string) *ACL {
		t.Helper()
		_, a, err := r.ResolveSecret(src, secret, now)
		if err != nil {
			t.Fatalf("resolve %s: %v", secret, err)
		}
		return a
	}
	if a := resolve("holder"); !a.AllowNamespaceOperation("default", "submit-job") || !a.AllowNamespaceOperation("x", "read-job") {
		t.Error("holder: want its policy and its role's")
	}
	if a := resolve("role-only"); !a.AllowNamespaceOperation("default", "submit-job") || a.AllowNamespace("x") {
		t.Error("role-only: want exactly the role's policies")
	}
	names, err := EffectivePolicyNames(src, tok)
	if err != nil || len(names) != 3 || names[0] != "not-yet" || names[1] != "readers" || names[2] != "submit" {
		t.Errorf("effective names %v, %v", names, err)
	}

	// A role deleted (or changed) takes effect at the next request.
	delete(src.roles, "r1")
	if a := resolve("holder"); a.AllowNamespaceOperation("default", "submit-job") || !a.AllowNamespaceOperation("x", "read-job") {
		t.Error("holder after its role is deleted: want its own policy only")
	}
	if a := resolve("role-only"); a.AllowNamespace("default") {
		t.Error("role-only after its role is deleted: want nothing")
	}
	// A Source without roles grants nothing through role links.
	if names, _ := EffectivePolicyNames(mem, tok); len(names) != 1 || names[0] != "readers" {
		t.Errorf("names without a RoleSource %v", names)
	}
}

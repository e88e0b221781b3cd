package httpapi

import (
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/server/aclendpoint"
)

// aclCRUDMatrixCases are the ACL matrix's cases of the policy and token
// routes, which authorize their callers themselves.
func aclCRUDMatrixCases(w *aclWorld, nobody string) []matrixCase {
	policy := map[string]string{"Rules": `node { policy = "read" }`}
	token := map[string]any{"Name": "made", "Type": "client", "Policies": []string{"read-all"}}
	role := map[string]any{"Name": "made", "Policies": []map[string]string{{"Name": "read-all"}}}
	ro := w.accessors[callerReadOnly]
	return []matrixCase{
		{"GET /v1/acl/policies", "GET", "/v1/acl/policies", nil, "22222"}, // each sees the policies it holds
		{"GET /v1/acl/policy/{name}", "GET", "/v1/acl/policy/read-all", nil, "---22"},
		{"PUT /v1/acl/policy/{name}", "PUT", "/v1/acl/policy/extra", policy, "----2"},
		{"POST /v1/acl/policy/{name}", "POST", "/v1/acl/policy/extra", policy, "----2"},
		{"DELETE /v1/acl/policy/{name}", "DELETE", "/v1/acl/policy/nosuch", nil, "----4"},
		{"GET /v1/acl/tokens", "GET", "/v1/acl/tokens", nil, "----2"},
		{"PUT /v1/acl/token", "PUT", "/v1/acl/token", token, "----2"},
		{"POST /v1/acl/token", "POST", "/v1/acl/token", token, "----2"},
		{"GET /v1/acl/token/self", "GET", "/v1/acl/token/self", nil, "22222"},
		{"GET /v1/acl/token/{accessor}", "GET", "/v1/acl/token/" + ro, nil, "---22"},
		{"PUT /v1/acl/token/{accessor}", "PUT", "/v1/acl/token/" + nobody, map[string]any{"Type": "management"}, "----4"},
		{"POST /v1/acl/token/{accessor}", "POST", "/v1/acl/token/" + nobody, map[string]any{"Type": "management"}, "----4"},
		{"DELETE /v1/acl/token/{accessor}", "DELETE", "/v1/acl/token/" + nobody, nil, "----4"},
		{"GET /v1/acl/roles", "GET", "/v1/acl/roles", nil, "22222"}, // each sees the roles it holds
		{"PUT /v1/acl/role", "PUT", "/v1/acl/role", role, "----2"},
		{"POST /v1/acl/role", "POST", "/v1/acl/role", map[string]any{"Name": "made2", "Policies": []map[string]string{{"Name": "read-all"}}}, "----2"},
		{"GET /v1/acl/role/name/{name}", "GET", "/v1/acl/role/name/nosuch", nil, "----4"},
		{"GET /v1/acl/role/{id}", "GET", "/v1/acl/role/" + nobody, nil, "----4"},
		{"PUT /v1/acl/role/{id}", "PUT", "/v1/acl/role/" + nobody, role, "----4"},
		{"POST /v1/acl/role/{id}", "POST", "/v1/acl/role/" + nobody, role, "----4"},
		{"DELETE /v1/acl/role/{id}", "DELETE", "/v1/acl/role/" + nobody, nil, "----4"},
	}
}

var (
	_ ACLCRUDServer = (*aclendpoint.ACL)(nil)
	_ ACLRoleServer = (*aclendpoint.ACL)(nil)
)

// The official client manages policies and tokens end to end.
func TestACLPolicyAndTokenCRUDWithNomadClient(t *testing.T) {
	c := aclTestServer(t, true)
	mgmt, _, err := c.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecretID(mgmt.SecretID)

	if _, err := c.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "bad name!", Rules: `node { policy = "read" }`}, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("policy with a bad name: %v; want 400", err)
	}
	if _, err := c.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "broken", Rules: `node { policy = "sideways" }`}, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("policy with bad rules: %v; want 400", err)
	}
	pol := &nomadapi.ACLPolicy{Name: "readers", Description: "read default", Rules: `namespace "default" { policy = "read" }`}
	if _, err := c.ACLPolicies().Upsert(pol, nil); err != nil {
		t.Fatal(err)
	}
	got, _, err := c.ACLPolicies().Info("readers", nil)
	if err != nil || got.Rules != pol.Rules || got.Description != pol.Description {
		t.Fatalf("policy info: %+v, %v", got, err)
	}
	list, _, err := c.ACLPolicies().List(nil)
	if err != nil || len(list) != 1 || list[0].Name != "readers" {
		t.Fatalf("policy list: %+v, %v", list, err)
	}

	// As Nomad's, a token may name a policy that does not exist yet; it
	// grants nothing until the policy is written.
	absent, _, err := c.ACLTokens().Create(&nomadapi.ACLToken{Name: "x", Type: "client", Policies: []string{"nosuch"}}, nil)
	if err != nil {
		t.Fatalf("token with an absent policy: %v; want it accepted", err)
	}
	if _, _, err := aclClientLike(t, c, absent.SecretID).Jobs().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("job list by a token whose only policy is absent: %v; want 403", err)
	}
	if _, err := c.ACLTokens().Delete(absent.AccessorID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ACLTokens().Create(&nomadapi.ACLToken{Name: "x", Type: "management", Policies: []string{"readers"}}, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("management token with policies: %v; want 400", err)
	}
	tok, _, err := c.ACLTokens().Create(&nomadapi.ACLToken{Name: "reader", Type: "client", Policies: []string{"readers"}}, nil)
	if err != nil || tok.AccessorID == "" || tok.SecretID == "" {
		t.Fatalf("token create: %+v, %v", tok, err)
	}
	toks, _, err := c.ACLTokens().List(nil)
	if err != nil || len(toks) != 2 {
		t.Fatalf("token list: %+v, %v", toks, err)
	}
	tok.Name = "renamed"
	upd, _, err := c.ACLTokens().Update(tok, nil)
	if err != nil || upd.Name != "renamed" || upd.SecretID != tok.SecretID {
		t.Fatalf("token update: %+v, %v", upd, err)
	}

	// The reader sees itself and its policy, and nothing of management.
	rc := aclClientLike(t, c, tok.SecretID)
	self, _, err := rc.ACLTokens().Self(nil)
	if err != nil || self.AccessorID != tok.AccessorID {
		t.Fatalf("token self: %+v, %v", self, err)
	}
	if _, _, err := rc.ACLPolicies().Info("readers", nil); err != nil {
		t.Errorf("reading a policy the token holds: %v", err)
	}
	if _, _, err := rc.ACLTokens().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("token list as a client token: %v; want 403", err)
	}
	if _, err := rc.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "mine", Rules: `node { policy = "write" }`}, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("policy write as a client token: %v; want 403", err)
	}
	if _, _, err := rc.Jobs().List(nil); err != nil {
		t.Errorf("job list as a reader: %v", err)
	}

	if _, err := c.ACLTokens().Delete(tok.AccessorID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rc.Jobs().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("job list with a deleted token: %v; want 403", err)
	}
	if _, err := c.ACLPolicies().Delete("readers", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ACLPolicies().Info("readers", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("deleted policy: %v; want 404", err)
	}
}

// aclClientLike is a client of c's agent with another token.
func aclClientLike(t *testing.T, c *nomadapi.Client, secret string) *nomadapi.Client {
	t.Helper()
	out, err := nomadapi.NewClient(&nomadapi.Config{Address: c.Address(), SecretID: secret})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestACLPolicyCommands(t *testing.T) {
	f := newFakeAgent(t)
	f.json("PUT /v1/acl/policy/readers", nil)
	f.json("GET /v1/acl/policies", []map[string]any{{"Name": "readers", "Description": "read default"}})
	f.json("GET /v1/acl/policy/readers", map[string]any{"Name": "readers", "Description": "read default",
		"Rules": "namespace \"default\" { policy = \"read\" }\n", "CreateIndex": 5, "ModifyIndex": 6})
	f.json("DELETE /v1/acl/policy/readers", nil)

	rules := filepath.Join(t.TempDir(), "readers.hcl")
	if err := os.WriteFile(rules, []byte(`namespace "default" { policy = "read" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := f.run(t, "", "acl", "policy", "apply", "-description", "read default", "readers", rules)
	wantCode(t, r, 0)
	wantContains(t, "apply", r.out, `Successfully wrote "readers" ACL policy!`)
	wantContains(t, "apply body", string(f.request("PUT /v1/acl/policy/readers").Body),
		`"Name":"readers"`, `"Description":"read default"`, `namespace \"default\"`)

	r = f.run(t, "", "acl", "policy", "list")
	wantCode(t, r, 0)
	if want := "Name     Description\nreaders  read default\n"; r.out != want {
		t.Errorf("policy list printed %q, want %q", r.out, want)
	}
	r = f.run(t, "", "acl", "policy", "info", "readers")
	wantCode(t, r, 0)
	wantContains(t, "info", r.out, "Name        = readers", "ModifyIndex = 6", "Rules\n\nnamespace \"default\"")
	r = f.run(t, "", "acl", "policy", "delete", "readers")
	wantCode(t, r, 0)
	wantContains(t, "delete", r.out, `Successfully deleted "readers" ACL policy!`)

	big := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(big, []byte(strings.Repeat("#", maxPolicyFileBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = f.run(t, "", "acl", "policy", "apply", "big", big)
	wantCode(t, r, 1)
	wantContains(t, "too big", r.errOut, "larger than")
	r = f.run(t, "", "acl", "policy", "apply", "only-a-name")
	wantCode(t, r, 1)
	wantContains(t, "usage", r.errOut, "<name> <path>")
}

func TestACLTokenCommands(t *testing.T) {
	f := newFakeAgent(t)
	tok := map[string]any{"AccessorID": "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", "SecretID": "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11",
		"Name": "ci", "Type": "client", "Policies": []string{"readers"}, "CreateIndex": 9, "ModifyIndex": 9}
	f.json("PUT /v1/acl/token", tok)
	f.json("GET /v1/acl/token/self", tok)
	f.json("GET /v1/acl/token/5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", tok)
	f.json("PUT /v1/acl/token/5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", tok)
	f.json("DELETE /v1/acl/token/5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", nil)
	f.json("GET /v1/acl/tokens", []map[string]any{{"AccessorID": "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", "Name": "ci", "Type": "client"}})

	r := f.run(t, "", "acl", "token", "create", "-name", "ci", "-policy", "readers", "-policy", "writers", "-ttl", "1h")
	wantCode(t, r, 0)
	wantContains(t, "create", r.out, "Secret ID    = 0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11", "Policies     = readers")
	wantContains(t, "create body", string(f.request("PUT /v1/acl/token").Body),
		`"Name":"ci"`, `"Type":"client"`, `"Policies":["readers","writers"]`, `"ExpirationTTL":"1h0m0s"`)

	r = f.run(t, "", "acl", "token", "self", "-json")
	wantCode(t, r, 0)
	wantContains(t, "self", r.out, `"AccessorID": "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b"`)

	r = f.run(t, "", "acl", "token", "update", "-name", "renamed", "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b")
	wantCode(t, r, 0)
	wantContains(t, "update body", string(f.request("PUT /v1/acl/token/5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b").Body),
		`"Name":"renamed"`, `"Policies":["readers"]`)

	r = f.run(t, "", "acl", "token", "list")
	wantCode(t, r, 0)
	wantContains(t, "list", r.out, "Name  Type    Global  Accessor ID                           Expired", "ci    client  false   5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b  false")

	r = f.run(t, "", "acl", "token", "delete", "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b")
	wantCode(t, r, 0)
	wantContains(t, "delete", r.out, "Token 5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b successfully deleted")

	f.fail("GET /v1/acl/token/self", 403, "Permission denied")
	r = f.run(t, "", "acl", "token", "self")
	wantCode(t, r, 1)
	wantContains(t, "denied", r.errOut, "Permission denied")
}

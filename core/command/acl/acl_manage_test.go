package acl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestACLPolicyCommands(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/acl/policy/readers", nil)
	f.JSON("GET /v1/acl/policies", []map[string]any{{"Name": "readers", "Description": "read default"}})
	f.JSON("GET /v1/acl/policy/readers", map[string]any{"Name": "readers", "Description": "read default",
		"Rules": "namespace \"default\" { policy = \"read\" }\n", "CreateIndex": 5, "ModifyIndex": 6})
	f.JSON("DELETE /v1/acl/policy/readers", nil)

	rules := filepath.Join(t.TempDir(), "readers.hcl")
	if err := os.WriteFile(rules, []byte(`namespace "default" { policy = "read" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := f.Run(t, "", "acl", "policy", "apply", "-description", "read default", "readers", rules)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "apply", r.Out, `Successfully wrote "readers" ACL policy!`)
	clitest.WantContains(t, "apply body", string(f.Request("PUT /v1/acl/policy/readers").Body),
		`"Name":"readers"`, `"Description":"read default"`, `namespace \"default\"`)

	r = f.Run(t, "", "acl", "policy", "list")
	clitest.WantCode(t, r, 0)
	if want := "Name     Description\nreaders  read default\n"; r.Out != want {
		t.Errorf("policy list printed %q, want %q", r.Out, want)
	}
	r = f.Run(t, "", "acl", "policy", "info", "readers")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "info", r.Out, "Name        = readers", "ModifyIndex = 6", "Rules\n\nnamespace \"default\"")
	r = f.Run(t, "", "acl", "policy", "delete", "readers")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "delete", r.Out, `Successfully deleted "readers" ACL policy!`)

	big := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(big, []byte(strings.Repeat("#", maxPolicyFileBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = f.Run(t, "", "acl", "policy", "apply", "big", big)
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "too big", r.ErrOut, "larger than")
	r = f.Run(t, "", "acl", "policy", "apply", "only-a-name")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "usage", r.ErrOut, "<name> <path>")
}

func TestACLTokenCommands(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	tok := map[string]any{"AccessorID": "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", "SecretID": "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11",
		"Name": "ci", "Type": "client", "Policies": []string{"readers"}, "CreateIndex": 9, "ModifyIndex": 9}
	f.JSON("PUT /v1/acl/token", tok)
	f.JSON("GET /v1/acl/token/self", tok)
	f.JSON("GET /v1/acl/token/5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", tok)
	f.JSON("PUT /v1/acl/token/5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", tok)
	f.JSON("DELETE /v1/acl/token/5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", nil)
	f.JSON("GET /v1/acl/tokens", []map[string]any{{"AccessorID": "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b", "Name": "ci", "Type": "client"}})

	r := f.Run(t, "", "acl", "token", "create", "-name", "ci", "-policy", "readers", "-policy", "writers", "-ttl", "1h")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "create", r.Out, "Secret ID    = 0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11", "Policies     = readers")
	clitest.WantContains(t, "create body", string(f.Request("PUT /v1/acl/token").Body),
		`"Name":"ci"`, `"Type":"client"`, `"Policies":["readers","writers"]`, `"ExpirationTTL":"1h0m0s"`)

	r = f.Run(t, "", "acl", "token", "self", "-json")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "self", r.Out, `"AccessorID": "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b"`)

	r = f.Run(t, "", "acl", "token", "update", "-name", "renamed", "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "update body", string(f.Request("PUT /v1/acl/token/5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b").Body),
		`"Name":"renamed"`, `"Policies":["readers"]`)

	r = f.Run(t, "", "acl", "token", "list")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list", r.Out, "Name  Type    Global  Accessor ID                           Expired", "ci    client  false   5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b  false")

	r = f.Run(t, "", "acl", "token", "delete", "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "delete", r.Out, "Token 5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b successfully deleted")

	f.Fail("GET /v1/acl/token/self", 403, "Permission denied")
	r = f.Run(t, "", "acl", "token", "self")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "denied", r.ErrOut, "Permission denied")
}

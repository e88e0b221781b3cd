package acl

import (
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestACLRoleCommands(t *testing.T) {
	const id = "5b4b0d43-1c6f-4a0e-9e7a-0f3c5d1f1a2b"
	f := clitest.NewFakeAgent(t)
	role := map[string]any{"ID": id, "Name": "ops", "Description": "d",
		"Policies": []map[string]string{{"Name": "readers"}, {"Name": "later"}}, "CreateIndex": 4, "ModifyIndex": 7}
	f.JSON("PUT /v1/acl/role", role)
	f.JSON("GET /v1/acl/roles", []map[string]any{role})
	f.JSON("GET /v1/acl/role/"+id, role)
	f.JSON("GET /v1/acl/role/name/ops", role)
	f.JSON("PUT /v1/acl/role/"+id, role)
	f.JSON("DELETE /v1/acl/role/"+id, nil)
	f.JSON("PUT /v1/acl/token", map[string]any{"AccessorID": id, "Name": "r", "Type": "client",
		"Roles": []map[string]string{{"ID": id, "Name": "ops"}}})

	r := f.Run(t, "", "acl", "role", "create", "-name", "ops", "-description", "d", "-policy", "readers", "-policy", "later")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "create", r.Out, "ID           = "+id, "Policies     = readers,later")
	clitest.WantContains(t, "create body", string(f.Request("PUT /v1/acl/role").Body),
		`"Name":"ops"`, `"Description":"d"`, `"Policies":[{"Name":"readers"},{"Name":"later"}]`)

	r = f.Run(t, "", "acl", "role", "create", "-name", "ops")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "create without policy", r.ErrOut, "at least one -policy")

	r = f.Run(t, "", "acl", "role", "list")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list", r.Out, id, "ops", "readers,later")

	r = f.Run(t, "", "acl", "role", "info", "-by-name", "ops")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "info by name", r.Out, "Name         = ops")
	r = f.Run(t, "", "acl", "role", "info", id)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "info", r.Out, "Modify Index = 7")

	r = f.Run(t, "", "acl", "role", "update", "-policy", "only", id)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "update body", string(f.Request("PUT /v1/acl/role/"+id).Body),
		`"ID":"`+id+`"`, `"Name":"ops"`, `"Policies":[{"Name":"only"}]`)

	r = f.Run(t, "", "acl", "role", "delete", id)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "delete", r.Out, "successfully deleted")

	r = f.Run(t, "", "acl", "token", "create", "-name", "r", "-role-name", "ops")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "token with a role", string(f.Request("PUT /v1/acl/token").Body), `"Roles":[{"ID":"","Name":"ops"}]`)
}

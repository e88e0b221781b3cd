package acl

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestNamespaceCommands(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/namespaces", []map[string]any{{"Name": "prod", "Description": "production"}, {"Name": "default", "Description": "Default shared namespace"}})
	f.JSON("GET /v1/namespace/prod", map[string]any{"Name": "prod", "Description": "production", "Meta": map[string]string{"team": "a", "cost": "b"}})
	f.JSON("PUT /v1/namespace/prod", map[string]any{"Index": 9})
	f.JSON("PUT /v1/namespace/new", map[string]any{"Index": 10})
	f.JSON("DELETE /v1/namespace/prod", map[string]any{"Index": 11})
	f.Fail("DELETE /v1/namespace/default", http.StatusBadRequest, `namespace "default" cannot be deleted`)

	r := f.Run(t, "", "namespace", "list")
	clitest.WantCode(t, r, 0)
	want := "Name     Description\ndefault  Default shared namespace\nprod     production\n"
	if r.Out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.Out, want)
	}

	r = f.Run(t, "", "namespace", "status", "prod")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "status", r.Out, "Name        = prod", "Description = production", "Metadata\ncost = b\nteam = a")

	// A new namespace: the 404 of the read is not an error.
	r = f.Run(t, "", "namespace", "apply", "-description", "fresh", "-meta", "k=v", "new")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "apply", r.Out, `Successfully applied namespace "new"!`)
	var body struct {
		Name, Description string
		Meta              map[string]string
	}
	if err := json.Unmarshal(f.Request("PUT /v1/namespace/new").Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Name != "new" || body.Description != "fresh" || body.Meta["k"] != "v" {
		t.Errorf("apply sent %+v", body)
	}

	// An update without -description keeps the stored one.
	r = f.Run(t, "", "namespace", "apply", "-meta", "team=z", "prod")
	clitest.WantCode(t, r, 0)
	body.Meta = nil
	if err := json.Unmarshal(f.Request("PUT /v1/namespace/prod").Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Description != "production" || len(body.Meta) != 1 || body.Meta["team"] != "z" {
		t.Errorf("update sent %+v", body)
	}

	r = f.Run(t, "", "namespace", "delete", "prod")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "delete", r.Out, `Successfully deleted namespace "prod"!`)
	r = f.Run(t, "", "namespace", "delete", "default")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "delete default", r.ErrOut, "cannot be deleted")

	r = f.Run(t, "", "namespace", "apply", "-meta", "novalue", "x")
	clitest.WantCode(t, r, 1)
	if !strings.Contains(r.ErrOut, "key=value") {
		t.Errorf("bad -meta: %s", r.ErrOut)
	}
}

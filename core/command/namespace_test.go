package command

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestNamespaceCommands(t *testing.T) {
	f := newFakeAgent(t)
	f.json("GET /v1/namespaces", []map[string]any{{"Name": "prod", "Description": "production"}, {"Name": "default", "Description": "Default shared namespace"}})
	f.json("GET /v1/namespace/prod", map[string]any{"Name": "prod", "Description": "production", "Meta": map[string]string{"team": "a", "cost": "b"}})
	f.json("PUT /v1/namespace/prod", map[string]any{"Index": 9})
	f.json("PUT /v1/namespace/new", map[string]any{"Index": 10})
	f.json("DELETE /v1/namespace/prod", map[string]any{"Index": 11})
	f.fail("DELETE /v1/namespace/default", http.StatusBadRequest, `namespace "default" cannot be deleted`)

	r := f.run(t, "", "namespace", "list")
	wantCode(t, r, 0)
	want := "Name     Description\ndefault  Default shared namespace\nprod     production\n"
	if r.out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.out, want)
	}

	r = f.run(t, "", "namespace", "status", "prod")
	wantCode(t, r, 0)
	wantContains(t, "status", r.out, "Name        = prod", "Description = production", "Metadata\ncost = b\nteam = a")

	// A new namespace: the 404 of the read is not an error.
	r = f.run(t, "", "namespace", "apply", "-description", "fresh", "-meta", "k=v", "new")
	wantCode(t, r, 0)
	wantContains(t, "apply", r.out, `Successfully applied namespace "new"!`)
	var body struct {
		Name, Description string
		Meta              map[string]string
	}
	if err := json.Unmarshal(f.request("PUT /v1/namespace/new").Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Name != "new" || body.Description != "fresh" || body.Meta["k"] != "v" {
		t.Errorf("apply sent %+v", body)
	}

	// An update without -description keeps the stored one.
	r = f.run(t, "", "namespace", "apply", "-meta", "team=z", "prod")
	wantCode(t, r, 0)
	body.Meta = nil
	if err := json.Unmarshal(f.request("PUT /v1/namespace/prod").Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Description != "production" || len(body.Meta) != 1 || body.Meta["team"] != "z" {
		t.Errorf("update sent %+v", body)
	}

	r = f.run(t, "", "namespace", "delete", "prod")
	wantCode(t, r, 0)
	wantContains(t, "delete", r.out, `Successfully deleted namespace "prod"!`)
	r = f.run(t, "", "namespace", "delete", "default")
	wantCode(t, r, 1)
	wantContains(t, "delete default", r.errOut, "cannot be deleted")

	r = f.run(t, "", "namespace", "apply", "-meta", "novalue", "x")
	wantCode(t, r, 1)
	if !strings.Contains(r.errOut, "key=value") {
		t.Errorf("bad -meta: %s", r.errOut)
	}
}

package acl

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestParseNamespaceSpec(t *testing.T) {
	cases := []struct {
		name, file, src string
		want            *structs.Namespace
		wantErr         string
	}{
		{name: "hcl", file: "ns.hcl", src: "name = \"team-a\"\ndescription = \"Team A\"\nmeta {\n  owner = \"a@example.com\"\n  cost-center = \"42\"\n}\n",
			want: &structs.Namespace{Name: "team-a", Description: "Team A", Meta: map[string]string{"owner": "a@example.com", "cost-center": "42"}}},
		{name: "hcl meta attribute with quoted keys", file: "ns.hcl", src: "name = \"a\"\nmeta = {\n  \"team.owner\" = \"x\"\n}\n",
			want: &structs.Namespace{Name: "a", Meta: map[string]string{"team.owner": "x"}}},
		{name: "hcl meta attribute and block", file: "ns.hcl", src: "name = \"a\"\nmeta = {}\nmeta {}\n", wantErr: "ns.hcl:3:1: Duplicate meta block"},
		{name: "hcl meta attribute not an object", file: "ns.hcl", src: "name = \"a\"\nmeta = \"x\"\n", wantErr: "ns.hcl:2:8: Incorrect attribute value type: meta must be an object of strings"},
		{name: "hcl meta attribute value not a string", file: "ns.hcl", src: "name = \"a\"\nmeta = { a = 1 }\n", wantErr: "ns.hcl:2:8: Incorrect attribute value type: meta must be an object of strings"},
		{name: "hcl name only", file: "ns.hcl", src: `name = "b"`, want: &structs.Namespace{Name: "b"}},
		{name: "hcl with a comment and no extension", file: "spec", src: "# team b\nname = \"b\"", want: &structs.Namespace{Name: "b"}},
		{name: "json", file: "ns.json", src: `{"Name":"team-a","Description":"d","Meta":{"k":"v"}}`,
			want: &structs.Namespace{Name: "team-a", Description: "d", Meta: map[string]string{"k": "v"}}},
		{name: "json as status -json prints it, indexes dropped", file: "out", src: "{\n  \"Name\": \"c\",\n  \"Description\": \"\",\n  \"CreateIndex\": 5,\n  \"ModifyIndex\": 7\n}\n",
			want: &structs.Namespace{Name: "c"}},
		{name: "json from Nomad, empty extras", file: "ns.json", src: `{"Name":"c","Quota":"","Capabilities":null,"NodePoolConfiguration":{},"Hash":"abc"}`,
			want: &structs.Namespace{Name: "c"}},

		{name: "hcl missing name", file: "ns.hcl", src: `description = "x"`, wantErr: "ns.hcl:1:1: Missing required argument"},
		{name: "hcl unknown argument", file: "ns.hcl", src: "name = \"a\"\n  colour = \"red\"\n", wantErr: `ns.hcl:2:3: Unsupported argument`},
		{name: "hcl syntax error", file: "ns.hcl", src: "name = \"a\"\nmeta {\n", wantErr: "ns.hcl:2:"},
		{name: "hcl number for a string", file: "ns.hcl", src: "name = \"a\"\ndescription = 5\n", wantErr: "ns.hcl:2:15: Incorrect attribute value type: description must be a string"},
		{name: "hcl meta value not a string", file: "ns.hcl", src: "name = \"a\"\nmeta {\n  k = [1]\n}\n", wantErr: "ns.hcl:3:7: Incorrect attribute value type: k must be a string"},
		{name: "hcl variables", file: "ns.hcl", src: "name = var.x\n", wantErr: "ns.hcl:1:8: Variables not allowed"},
		{name: "hcl two meta blocks", file: "ns.hcl", src: "name = \"a\"\nmeta {}\nmeta {}\n", wantErr: "ns.hcl:3:1: Duplicate meta block"},
		{name: "hcl quota", file: "ns.hcl", src: "name = \"a\"\nquota = \"q\"\n", wantErr: "ns.hcl:2:1: Unsupported argument: drover does not model a namespace's quota"},
		{name: "hcl capabilities block", file: "ns.hcl", src: "name = \"a\"\ncapabilities {\n}\n", wantErr: "ns.hcl:2:1: Unsupported block type: drover does not model a namespace's capabilities"},
		{name: "hcl too deep", file: "ns.hcl", src: "name = " + strings.Repeat("[", 200) + strings.Repeat("]", 200), wantErr: "Nesting too deep"},
		{name: "invalid name", file: "ns.hcl", src: `name = "no spaces"`, wantErr: `ns.hcl: invalid name "no spaces". The namespace name must match`},
		{name: "description too long", file: "ns.hcl", src: fmt.Sprintf("name = \"a\"\ndescription = %q\n", strings.Repeat("d", structs.MaxNamespaceDescription+1)), wantErr: "description: longer than 256"},
		{name: "json syntax error", file: "ns.json", src: "{\n  \"Name\": \"a\",\n  \"Description\" \"x\"\n}", wantErr: "ns.json:3:17: invalid character"},
		{name: "json wrong type", file: "ns.json", src: "{\"Name\": 5}", wantErr: "ns.json:1:"},
		{name: "json unknown field", file: "ns.json", src: `{"Name":"a","Colour":"red"}`, wantErr: `unknown field "Colour"`},
		{name: "json truncated", file: "ns.json", src: `{"Name":"a"`, wantErr: "ns.json:1:"},
		{name: "json two objects", file: "ns.json", src: `{"Name":"a"} {"Name":"b"}`, wantErr: "ns.json:1:14: text after the namespace object"},
		{name: "json Nomad quota", file: "ns.json", src: `{"Name":"a","Quota":"q"}`, wantErr: "ns.json: drover does not model a namespace's Quota"},
		{name: "json without a name", file: "ns.json", src: `{"Description":"d"}`, wantErr: "ns.json: the namespace has no name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNamespaceSpec(tc.file, []byte(tc.src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q (got %+v)", err, tc.wantErr, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadNamespaceFileBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.hcl")
	if err := os.WriteFile(big, []byte("name = \"a\"\n"+strings.Repeat("#", MaxNamespaceFileBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readNamespaceFile(nil, big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: %v", err)
	}
	if _, err := readNamespaceFile(strings.NewReader(strings.Repeat(" ", MaxNamespaceFileBytes+1)), "-"); err == nil || !strings.Contains(err.Error(), "<stdin>: the file is larger than") {
		t.Fatalf("oversized stdin: %v", err)
	}
	if _, err := readNamespaceFile(nil, filepath.Join(dir, "missing.hcl")); err == nil || !strings.Contains(err.Error(), "missing.hcl") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestNamespaceApplyFile(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/namespace/team-a", map[string]any{"Index": 9})
	f.JSON("PUT /v1/namespace/team-b", map[string]any{"Index": 10})
	dir := t.TempDir()
	hclFile := filepath.Join(dir, "team-a.hcl")
	if err := os.WriteFile(hclFile, []byte("name = \"team-a\"\ndescription = \"Team A\"\nmeta {\n  owner = \"a\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(badFile, []byte("name = \"x\"\nbogus = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type sent struct {
		Name, Description string
		Meta              map[string]string
	}
	body := func(route string) sent {
		t.Helper()
		var b sent
		if err := json.Unmarshal(f.Request(route).Body, &b); err != nil {
			t.Fatal(err)
		}
		return b
	}

	r := f.Run(t, "", "namespace", "apply", hclFile)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "apply hcl", r.Out, `Successfully applied namespace "team-a"!`)
	if b := body("PUT /v1/namespace/team-a"); !reflect.DeepEqual(b, sent{Name: "team-a", Description: "Team A", Meta: map[string]string{"owner": "a"}}) {
		t.Errorf("apply hcl sent %+v", b)
	}

	r = f.Run(t, `{"Name":"team-b","Description":"from stdin"}`, "namespace", "apply", "-")
	clitest.WantCode(t, r, 0)
	if b := body("PUT /v1/namespace/team-b"); b.Name != "team-b" || b.Description != "from stdin" || b.Meta != nil {
		t.Errorf("apply stdin sent %+v", b)
	}

	refusals := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"parse error", []string{badFile}, 1, "bad.hcl:2:1: Unsupported argument"},
		{"missing file", []string{filepath.Join(dir, "nope.hcl")}, 1, "nope.hcl"},
		{"flags with a file", []string{"-description", "d", hclFile}, 1, "cannot be given with a namespace file"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			r := f.Run(t, "", append([]string{"namespace", "apply"}, tc.args...)...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, tc.name, r.ErrOut, tc.wantErr)
		})
	}
}

package httpapi

import (
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
)

// The official client registers, lists, reads and deletes namespaces.
func TestNamespacesWithNomadClient(t *testing.T) {
	c := aclTestServer(t, false)
	nss := c.Namespaces()

	list, _, err := nss.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "default" {
		t.Fatalf("initial namespaces = %+v, want default alone", list)
	}
	if _, err := nss.Register(&nomadapi.Namespace{Name: "prod", Description: "production", Meta: map[string]string{"team": "a"}}, nil); err != nil {
		t.Fatal(err)
	}
	got, qm, err := nss.Info("prod", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "prod" || got.Description != "production" || got.Meta["team"] != "a" || got.CreateIndex == 0 || qm.LastIndex == 0 {
		t.Fatalf("prod = %+v (index %d)", got, qm.LastIndex)
	}
	list, _, err = nss.PrefixList("pr", nil)
	if err != nil || len(list) != 1 || list[0].Name != "prod" {
		t.Fatalf("prefix list = %+v, %v", list, err)
	}

	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"bad name", func() error { _, err := nss.Register(&nomadapi.Namespace{Name: "no spaces"}, nil); return err }, "400"},
		{"missing", func() error { _, _, err := nss.Info("nope", nil); return err }, "404"},
		{"delete default", func() error { _, err := nss.Delete("default", nil); return err }, "400"},
		{"delete missing", func() error { _, err := nss.Delete("nope", nil); return err }, "404"},
	} {
		err := tc.call()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}

	if _, err := nss.Delete("prod", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := nss.Info("prod", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("deleted namespace still read: %v", err)
	}
}

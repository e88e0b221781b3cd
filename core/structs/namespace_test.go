package structs

import (
	"errors"
	"strings"
	"testing"
)

func TestNamespaceValidate(t *testing.T) {
	bigMeta := map[string]string{}
	for i := 0; i <= MaxNamespaceMetaEntries; i++ {
		bigMeta[strings.Repeat("k", i+1)] = "v"
	}
	cases := []struct {
		name string
		ns   *Namespace
		want string // substring of the error, "" for ok
	}{
		{"ok", &Namespace{Name: "team-a", Description: "d", Meta: map[string]string{"a": "b"}}, ""},
		{"nil", nil, "missing"},
		{"empty name", &Namespace{}, "namespace name"},
		{"bad char", &Namespace{Name: "a_b"}, `invalid name "a_b".`}, // Nomad's words (TestNamespaces_Register_Invalid)
		{"too long name", &Namespace{Name: strings.Repeat("a", 129)}, "namespace name"},
		{"max name", &Namespace{Name: strings.Repeat("a", 128)}, ""},
		{"long description", &Namespace{Name: "a", Description: strings.Repeat("d", 257)}, "description"},
		{"too much meta", &Namespace{Name: "a", Meta: bigMeta}, "entries"},
		{"empty meta key", &Namespace{Name: "a", Meta: map[string]string{"": "v"}}, "meta key"},
		{"long meta value", &Namespace{Name: "a", Meta: map[string]string{"k": strings.Repeat("v", 1025)}}, "value longer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.ns.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want containing %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
		})
	}
}

func TestNamespaceCopy(t *testing.T) {
	n := &Namespace{Name: "a", Meta: map[string]string{"k": "v"}}
	c := n.Copy()
	c.Meta["k"] = "changed"
	if n.Meta["k"] != "v" {
		t.Fatal("copy shares Meta")
	}
}

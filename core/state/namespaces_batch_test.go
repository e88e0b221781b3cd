package state

import (
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// The slice variants write all or nothing, and a refusal leaves the
// indexes where they were.
func TestNamespacesBatchAllOrNothing(t *testing.T) {
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertNamespaces(5, []*structs.Namespace{{Name: "a"}, {Name: "b"}, {Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		run  func() error
		kind error
	}{
		{"upsert with invalid", func() error {
			return s.UpsertNamespaces(6, []*structs.Namespace{{Name: "d"}, {Name: "x y"}})
		}, structs.ErrInvalid},
		{"upsert with nil", func() error { return s.UpsertNamespaces(6, []*structs.Namespace{{Name: "d"}, nil}) }, structs.ErrInvalid},
		{"delete with default", func() error { return s.DeleteNamespaces(6, []string{"a", structs.DefaultNamespace}) }, structs.ErrInvalid},
		{"delete with missing", func() error { return s.DeleteNamespaces(6, []string{"a", "b", "zz"}) }, structs.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
			all, err := s.Namespaces(nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 4 {
				t.Fatalf("namespaces %+v after a refusal, want a, b, c, default", all)
			}
			if got := s.Index(TableNamespaces); got != 5 {
				t.Fatalf("namespaces index %d after a refusal, want 5", got)
			}
		})
	}
	if err := s.DeleteNamespaces(7, []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	all, _ := s.Namespaces(nil, "")
	if len(all) != 2 || all[0].Name != "c" || all[1].Name != structs.DefaultNamespace {
		t.Fatalf("after deleting a and b: %+v", all)
	}
	if got := s.Index(TableNamespaces); got != 7 {
		t.Fatalf("namespaces index %d, want 7", got)
	}
}

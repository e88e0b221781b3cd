package state

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestTxnNamespaceExists(t *testing.T) {
	s := testStore(t)
	if err := s.UpsertNamespace(10, &structs.Namespace{Name: "team-a"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		want bool
	}{
		{structs.DefaultNamespace, true},
		{"team-a", true},
		{"team-b", false},
		{"", false},
	}
	err := s.WriteTxn(11, func(tx *Txn) error {
		for _, tc := range cases {
			got, err := tx.NamespaceExists(tc.name)
			if err != nil {
				return err
			}
			if got != tc.want {
				t.Errorf("NamespaceExists(%q) = %v, want %v", tc.name, got, tc.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A deleted namespace no longer exists.
	if err := s.DeleteNamespace(12, "team-a"); err != nil {
		t.Fatal(err)
	}
	_ = s.WriteTxn(13, func(tx *Txn) error {
		if ok, err := tx.NamespaceExists("team-a"); err != nil || ok {
			t.Errorf("deleted team-a: exists %v, %v", ok, err)
		}
		return nil
	})
}

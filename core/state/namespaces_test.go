package state

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestUpsertNamespace(t *testing.T) {
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertNamespace(10, &structs.Namespace{Name: "a", Description: "one"}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpsertNamespace(11, &structs.Namespace{Name: "a", Description: "two"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.NamespaceByName(nil, "a")
	if err != nil || got == nil {
		t.Fatalf("got %v, %v", got, err)
	}
	if got.CreateIndex != 10 || got.ModifyIndex != 11 || got.Description != "two" {
		t.Fatalf("got %+v", got)
	}
	if err := s.UpsertNamespace(12, &structs.Namespace{Name: "bad name"}); err == nil {
		t.Fatal("invalid name accepted")
	}
}

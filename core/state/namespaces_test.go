package state

import (
	"bytes"
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

func TestNamespacesDefaultAndDelete(t *testing.T) {
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.Namespaces(nil, "")
	if err != nil || len(list) != 1 || list[0].Name != structs.DefaultNamespace {
		t.Fatalf("initial list %v, %v", list, err)
	}
	if err := s.DeleteNamespace(5, structs.DefaultNamespace); err == nil {
		t.Fatal("default deleted")
	}
	if err := s.DeleteNamespace(5, "missing"); err == nil {
		t.Fatal("missing deleted")
	}
	if err := s.UpsertNamespace(6, &structs.Namespace{Name: "team"}); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.Namespaces(nil, "te"); len(list) != 1 || list[0].Name != "team" {
		t.Fatalf("prefix list %v", list)
	}
	if err := s.DeleteNamespace(7, "team"); err != nil {
		t.Fatal(err)
	}
	if ns, _ := s.NamespaceByName(nil, "team"); ns != nil {
		t.Fatalf("still there: %v", ns)
	}
}

func TestDeleteNamespaceWithJobsRefused(t *testing.T) {
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.UpsertNamespace(5, &structs.Namespace{Name: "team"}))
	job := mockJob(structs.DefaultJobType)
	job.Namespace = "team"
	must(t, s.UpsertJob(6, job))
	if err := s.DeleteNamespace(7, "team"); err == nil {
		t.Fatal("namespace with jobs deleted")
	}
	if ns, _ := s.NamespaceByName(nil, "team"); ns == nil {
		t.Fatal("refused delete removed the namespace")
	}
}

func TestNamespacesSnapshotRestore(t *testing.T) {
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	must(t, s.UpsertNamespace(5, &structs.Namespace{Name: "team", Meta: map[string]string{"k": "v"}}))
	snap, err := s.Snapshot()
	must(t, err)
	var buf bytes.Buffer
	must(t, snap.Persist(&buf))
	out, err := NewStateStore()
	must(t, err)
	must(t, out.Restore(&buf))
	list, err := out.Namespaces(nil, "")
	must(t, err)
	if len(list) != 2 || list[0].Name != "default" || list[1].Name != "team" || list[1].Meta["k"] != "v" || list[1].CreateIndex != 5 {
		t.Fatalf("restored %+v", list)
	}
}

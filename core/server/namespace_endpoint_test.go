package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestNamespaceUpsertRefusals(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	tooMany := make([]*structs.Namespace, MaxNamespacesPerRequest+1)
	for i := range tooMany {
		tooMany[i] = &structs.Namespace{Name: fmt.Sprintf("ns-%d", i)}
	}
	cases := []struct {
		name    string
		in      []*structs.Namespace
		wantMsg string
	}{
		{"none", nil, "at least one"},
		{"too many", tooMany, "more than 64"},
		{"nil element", []*structs.Namespace{{Name: "ok"}, nil}, "missing"},
		{"bad name", []*structs.Namespace{{Name: "ok"}, {Name: "no spaces"}}, `"no spaces"`},
		{"long description", []*structs.Namespace{{Name: "ok", Description: strings.Repeat("d", structs.MaxNamespaceDescription+1)}}, "description"},
		{"twice", []*structs.Namespace{{Name: "dup"}, {Name: "dup"}}, `"dup": named twice`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Namespaces().Upsert(ctx, tc.in)
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error %v, want ErrInvalid containing %q", err, tc.wantMsg)
			}
		})
	}
	all, err := s.State().Namespaces(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name != structs.DefaultNamespace {
		t.Fatalf("refused upserts were written: %+v", all)
	}
}

func TestNamespaceUpsertAndDelete(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	in := []*structs.Namespace{{Name: "prod", Description: "p", Meta: map[string]string{"team": "ops"}, CreateIndex: 999}, {Name: "busy"}}
	idx, err := s.Namespaces().Upsert(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if in[0].CreateIndex != 999 {
		t.Errorf("caller's namespace modified: %+v", in[0])
	}
	for _, name := range []string{"prod", "busy"} {
		ns, err := s.State().NamespaceByName(nil, name)
		if err != nil || ns == nil || ns.CreateIndex != idx || ns.ModifyIndex != idx {
			t.Fatalf("%s after upsert: %+v, %v (want indexes %d)", name, ns, err, idx)
		}
	}
	// An update keeps the CreateIndex.
	idx2, err := s.Namespaces().Upsert(ctx, []*structs.Namespace{{Name: "prod", Description: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	if ns, _ := s.State().NamespaceByName(nil, "prod"); ns.CreateIndex != idx || ns.ModifyIndex != idx2 || ns.Description != "q" {
		t.Fatalf("prod after update: %+v", ns)
	}

	job := testJob("web", "system")
	job.Namespace = "busy"
	if _, err := s.Jobs().Register(ctx, job, false, 0); err != nil {
		t.Fatal(err)
	}

	refusals := []struct {
		name, ns string
		kind     error
		wantMsg  string
	}{
		{"empty", "", structs.ErrInvalid, "missing"},
		{"too long", strings.Repeat("n", 129), structs.ErrInvalid, "longer than 128"},
		{"default", structs.DefaultNamespace, structs.ErrInvalid, `"default"`},
		{"with jobs", "busy", structs.ErrInvalid, `"busy": has 1 job(s) (e.g. "web")`},
		{"missing", "nope", structs.ErrNotFound, "nope"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before := s.State().LatestIndex()
			_, err := s.Namespaces().Delete(ctx, tc.ns)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error %v, want %v containing %q", err, tc.kind, tc.wantMsg)
			}
			if after := s.State().LatestIndex(); after != before {
				t.Fatalf("a refused delete was proposed: index %d -> %d", before, after)
			}
		})
	}
	if ns, _ := s.State().NamespaceByName(nil, "busy"); ns == nil {
		t.Fatal("busy deleted by a refused delete")
	}

	idx3, err := s.Namespaces().Delete(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if idx3 <= idx2 {
		t.Errorf("delete index %d, want after %d", idx3, idx2)
	}
	if ns, _ := s.State().NamespaceByName(nil, "prod"); ns != nil {
		t.Fatalf("prod still stored after delete: %+v", ns)
	}
	if _, err := s.Namespaces().Delete(ctx, "prod"); !errors.Is(err, structs.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
}

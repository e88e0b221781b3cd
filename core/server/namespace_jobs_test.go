package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// createNamespaces creates namespaces through the endpoint, as a test that
// registers jobs outside the default namespace must first.
func createNamespaces(t *testing.T, s *Server, names ...string) {
	t.Helper()
	ns := make([]*structs.Namespace, 0, len(names))
	for _, n := range names {
		ns = append(ns, &structs.Namespace{Name: n})
	}
	if _, err := s.Namespaces().Upsert(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// Register, plan and dispatch into a namespace that does not exist are
// refused with ErrInvalid (HTTP 400) naming the job and the namespace, and
// nothing reaches Raft.
func TestJobEndpointsRefuseMissingNamespace(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	parent := paramJob("batchy", "optional")
	registerJob(t, s, parent)

	inMissing := func(id string) *structs.Job {
		j := testJob(id, "system")
		j.Namespace = "nope"
		return j
	}
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"register", func() error { _, err := s.Jobs().Register(ctx, inMissing("web"), false, 0); return err }, `job "web": namespace "nope" does not exist`},
		{"register enforcing index", func() error { _, err := s.Jobs().Register(ctx, inMissing("web"), true, 0); return err }, `job "web": namespace "nope" does not exist`},
		{"plan", func() error { _, err := s.Jobs().Plan(ctx, inMissing("api"), true); return err }, `job "api": namespace "nope" does not exist`},
		{"dispatch", func() error {
			_, err := s.Jobs().Dispatch(ctx, "nope", &structs.JobDispatchRequest{JobID: "batchy", Meta: map[string]string{"color": "red"}})
			return err
		}, `job "batchy": namespace "nope" does not exist`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := s.State().LatestIndex()
			err := tc.call()
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalid containing %q", err, tc.want)
			}
			if code := structs.HTTPStatus(err); code != http.StatusBadRequest {
				t.Errorf("HTTP status %d, want 400", code)
			}
			if after := s.State().LatestIndex(); after != before {
				t.Errorf("a refused call was proposed: index %d -> %d", before, after)
			}
		})
	}
	jobs, err := s.State().Jobs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != "batchy" {
		t.Fatalf("jobs after refusals: %d (want only the parameterized parent)", len(jobs))
	}

	// Once the namespace exists the same register succeeds.
	createNamespaces(t, s, "nope")
	if _, err := s.Jobs().Register(ctx, inMissing("web"), false, 0); err != nil {
		t.Fatalf("register after creating the namespace: %v", err)
	}
}

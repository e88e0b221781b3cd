package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// BenchmarkSearch: a prefix search of "all" and a fuzzy search of jobs
// over 5,000 jobs with one allocation each.
func BenchmarkSearch(b *testing.B) {
	store, err := state.NewStateStore()
	if err != nil {
		b.Fatal(err)
	}
	h := New(Config{Server: &fakeServer{store: store, leader: "127.0.0.1:4647"}, Logger: hclog.NewNullLogger()})
	var jobs []*structs.Job
	for i := range 5000 {
		j := testJob("default", fmt.Sprintf("job-%05d", i))
		jobs = append(jobs, j)
		if err := store.UpsertJob(uint64(10+i), j); err != nil {
			b.Fatal(err)
		}
	}
	var allocs []*structs.Allocation
	for i, j := range jobs {
		allocs = append(allocs, &structs.Allocation{ID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i), Namespace: "default",
			JobID: j.ID, Job: j, TaskGroup: "g", Name: j.ID + ".g[0]", DesiredStatus: "run", ClientStatus: "running"})
	}
	if err := store.UpsertAllocs(10000, allocs); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, path, body string }{
		{"prefix-all", "/v1/search", `{"Prefix":"job-012","Context":"all"}`},
		{"fuzzy-jobs", "/v1/search/fuzzy", `{"Text":"012","Context":"jobs"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPut, bc.path, strings.NewReader(bc.body)))
				if rec.Code != http.StatusOK {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

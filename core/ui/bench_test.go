package ui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// benchStore holds jobs jobs with allocsPerJob allocations each, spread
// over statuses and 100 nodes.
func benchStore(tb testing.TB, jobs, allocsPerJob int) *state.StateStore {
	tb.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		tb.Fatal(err)
	}
	statuses := []string{structs.AllocClientStatusRunning, structs.AllocClientStatusRunning, structs.AllocClientStatusPending,
		structs.AllocClientStatusComplete, structs.AllocClientStatusFailed}
	index := uint64(10)
	var allocs []*structs.Allocation
	for i := range jobs {
		j := &structs.Job{ID: fmt.Sprintf("job-%04d", i), Namespace: "default", Type: "service", Priority: 50,
			SubmitTime: time.Unix(1700000000, 0).UnixNano(), Datacenters: []string{"dc1"},
			TaskGroups: []*structs.TaskGroup{{Name: "web", Count: allocsPerJob / 2, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}}},
				{Name: "worker", Count: allocsPerJob - allocsPerJob/2, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}}}}}
		j.Canonicalize()
		index++
		if err := st.UpsertJob(index, j); err != nil {
			tb.Fatal(err)
		}
		stored, err := st.JobByID(nil, "default", j.ID)
		if err != nil {
			tb.Fatal(err)
		}
		for k := range allocsPerJob {
			tg := "web"
			if k >= allocsPerJob/2 {
				tg = "worker"
			}
			allocs = append(allocs, &structs.Allocation{ID: fmt.Sprintf("%08d-0000-0000-0000-%012d", i, k), Namespace: "default",
				JobID: j.ID, Job: stored, TaskGroup: tg, Name: fmt.Sprintf("%s.%s[%d]", j.ID, tg, k),
				NodeID: fmt.Sprintf("node-%03d", k%100), DesiredStatus: "run", ClientStatus: statuses[(i+k)%len(statuses)],
				TaskStates: map[string]*structs.TaskState{"t": {State: "running"}},
				AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
					"t": {Cpu: structs.AllocatedCpuResources{CpuShares: 100}, Memory: structs.AllocatedMemoryResources{MemoryMB: 64}}}}})
		}
	}
	index++
	if err := st.UpsertAllocs(index, allocs); err != nil {
		tb.Fatal(err)
	}
	return st
}

func benchPage(b *testing.B, path string) {
	st := benchStore(b, 1000, 10)
	u := New(Config{State: func() *state.StateStore { return st }, Region: "global"})
	req := httptest.NewRequest("GET", path, nil)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		rec := httptest.NewRecorder()
		u.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d", path, rec.Code)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/render")
}

// BenchmarkUIRender renders the jobs table and a job page over 1,000
// jobs and 10,000 allocations.
func BenchmarkUIRender(b *testing.B) {
	b.Run("jobs", func(b *testing.B) { benchPage(b, "/ui/jobs") })
	b.Run("job", func(b *testing.B) { benchPage(b, "/ui/jobs/default/job-0500") })
}

// TestRenderAtScale checks the benchmark's pages are the real thing: all
// 1,000 rows, and the job's ten allocations.
func TestRenderAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10,000 allocations")
	}
	st := benchStore(t, 1000, 10)
	u := New(Config{State: func() *state.StateStore { return st }})
	rec := httptest.NewRecorder()
	u.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/jobs", nil))
	if got := strings.Count(rec.Body.String(), `<th scope="row"><a href="/ui/jobs/default/job-`); got != 1000 {
		t.Errorf("jobs page has %d job rows, want 1000", got)
	}
	rec = httptest.NewRecorder()
	u.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/jobs/default/job-0500", nil))
	if got := strings.Count(rec.Body.String(), `<a href="/ui/allocations/00000500-`); got != 10 {
		t.Errorf("job page links %d allocations, want 10", got)
	}
	if !strings.Contains(rec.Body.String(), "Allocations (10)") {
		t.Error("job page does not count its 10 allocations")
	}
}

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

// benchUI is the UI over benchWorld(1000 jobs, 10 allocations each) with
// ACLs off, every optional part wired to fakes.
func benchUI(tb testing.TB) *UI {
	st := benchWorld(tb, 1000, 10)
	return New(Config{State: func() *state.StateStore { return st }, Region: "global", Actions: &fakeActions{},
		Logs: fakeLogs{allocRunning + "/t/stdout": strings.Repeat("a log line of some length\n", 4000)},
		AgentPlugins: func() []structs.AgentPlugin {
			return []structs.AgentPlugin{{Name: "system", Kind: "scheduler", Builtin: true, Version: "0.4.0", Health: structs.AgentPluginHealthy}}
		},
		Peers: func() ([]Peer, error) {
			return []Peer{{ID: "a", Address: "10.0.0.1:4647", Leader: true, Voter: true}}, nil
		}})
}

// benchPages are the pages the benchmark renders: every page of the UI.
var benchPages = []struct{ name, path string }{
	{"jobs", "/ui/jobs"},
	{"job", "/ui/jobs/default/job-0500"},
	{"alloc", "/ui/allocations/" + allocRunning},
	{"logs", "/ui/allocations/" + allocRunning + "/logs?task=t"},
	{"evaluations", "/ui/evaluations"},
	{"evaluation", "/ui/evaluations/" + worldEvalID(500)},
	{"deployments", "/ui/deployments"},
	{"deployment", "/ui/deployments/" + worldDepID(500)},
	{"nodes", "/ui/nodes"},
	{"node", "/ui/nodes/node-000"},
	{"topology", "/ui/topology"},
	{"volumes", "/ui/volumes"},
	{"volume", "/ui/volumes/default/vol-000"},
	{"plugins", "/ui/plugins"},
	{"csi-plugin", "/ui/plugins/csi/hp"},
	{"servers", "/ui/servers"},
	{"confirm", "/ui/actions/job-stop?namespace=default&job=job-0500"},
	{"sign-in", "/ui/settings/tokens"},
}

// BenchmarkUIRender renders every page over 1,000 jobs and 10,000
// allocations (100 nodes, 1,000 evaluations and deployments); the target
// is under 50 ms a page.
func BenchmarkUIRender(b *testing.B) {
	u := benchUI(b)
	for _, p := range benchPages {
		b.Run(p.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", p.path, nil)
			start := time.Now()
			for b.Loop() {
				rec := httptest.NewRecorder()
				u.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", p.path, rec.Code)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/render")
		})
	}
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

// TestBenchPagesAtScale checks that every page the benchmark renders is
// a full page at scale, not an error or an empty list.
func TestBenchPagesAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 10,000 allocations")
	}
	u := benchUI(t)
	want := map[string]string{
		"evaluations": "501 older evaluations are not listed", "deployments": "501 older deployments are not listed",
		"topology": "100 nodes, 6001 live allocations.", "nodes": `<a href="/ui/nodes/node-099">`,
		"logs": "a log line of some length", "volume": "Past claims being released (1)",
	}
	for _, p := range benchPages {
		rec := httptest.NewRecorder()
		u.ServeHTTP(rec, httptest.NewRequest("GET", p.path, nil))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want[p.name]) {
			t.Errorf("%s: %d, want 200 with %q", p.path, rec.Code, want[p.name])
		}
	}
}

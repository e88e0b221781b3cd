package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/state"
)

// TestJobListMeta: as Nomad's, a /v1/jobs stub carries the job's Meta only
// with ?meta=true; read through the official client, with and without
// JobListOptions.Fields.Meta.
func TestJobListMeta(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	j := testJob("default", "web")
	j.Meta = map[string]string{"owner": "team-a", "tier": "gold"}
	seedJob(t, fake.store, 10, j)
	seedJob(t, fake.store, 11, testJob("default", "plain"))

	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	cfg := nomadapi.DefaultConfig()
	cfg.Address = srv.URL
	client, err := nomadapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	byID := func(stubs []*nomadapi.JobListStub) map[string]*nomadapi.JobListStub {
		out := map[string]*nomadapi.JobListStub{}
		for _, s := range stubs {
			out[s.ID] = s
		}
		return out
	}
	plain, _, err := client.Jobs().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := byID(plain); len(got) != 2 || got["web"] == nil || got["web"].Meta != nil {
		t.Fatalf("List: stubs %v; want both jobs, web's without Meta", got)
	}
	for _, withMeta := range []bool{true, false} {
		stubs, _, err := client.Jobs().ListOptions(&nomadapi.JobListOptions{Fields: &nomadapi.JobListFields{Meta: withMeta}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		web := byID(stubs)["web"]
		if web == nil {
			t.Fatalf("meta=%v: web not listed", withMeta)
		}
		if withMeta && (web.Meta["owner"] != "team-a" || web.Meta["tier"] != "gold" || len(web.Meta) != 2) {
			t.Errorf("meta=true: web's Meta = %v, want the job's", web.Meta)
		}
		if !withMeta && web.Meta != nil {
			t.Errorf("meta=false: web's Meta = %v, want none", web.Meta)
		}
	}
	if rec := do(t, api.Handler(), http.MethodGet, "/v1/jobs?meta=maybe", ""); rec.Code != http.StatusBadRequest {
		t.Errorf("meta=maybe: status %d, want 400", rec.Code)
	}
}

// listFixture is a store of n jobs, each with metaBytes of meta in 32
// entries.
func listFixture(tb testing.TB, n, metaBytes int) *HTTPServer {
	tb.Helper()
	store, err := state.NewStateStore()
	if err != nil {
		tb.Fatal(err)
	}
	value := strings.Repeat("v", metaBytes/32)
	for i := range n {
		j := testJob("default", fmt.Sprintf("job-%04d", i))
		j.Meta = make(map[string]string, 32)
		for k := range 32 {
			j.Meta[fmt.Sprintf("key-%02d", k)] = value
		}
		if err := store.UpsertJob(uint64(10+i), j); err != nil {
			tb.Fatal(err)
		}
	}
	return New(Config{Server: &fakeServer{store: store}})
}

// discardWriter is a ResponseWriter that counts and drops the body, so
// that what a request allocates is the handler's alone.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }
func (d *discardWriter) Write(b []byte) (int, error) { d.n += len(b); return len(b), nil }

// allocatedBy is the fewest bytes one GET of target allocated over a few
// runs (a concurrent GC's own allocations only add), and its body size.
func allocatedBy(tb testing.TB, h http.Handler, target string) (allocated uint64, body int) {
	tb.Helper()
	allocated = ^uint64(0)
	for range 5 {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		w := &discardWriter{h: http.Header{}, code: http.StatusOK}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h.ServeHTTP(w, req)
		runtime.ReadMemStats(&after)
		if w.code != http.StatusOK {
			tb.Fatalf("GET %s: status %d", target, w.code)
		}
		allocated = min(allocated, after.TotalAlloc-before.TotalAlloc)
		body = w.n
	}
	return allocated, body
}

// TestJobListAllocations: listing 1,000 jobs of 16 KiB of meta each
// neither copies the jobs nor encodes their meta unless asked; with
// ?meta=true what a request allocates stays near the size of its answer
// (the stubs share the jobs' meta, and the answer is written stub by stub).
func TestJobListAllocations(t *testing.T) {
	const jobs, metaBytes = 1000, 16 << 10
	h := listFixture(t, jobs, metaBytes).Handler()
	total := uint64(jobs * metaBytes)

	plain, plainBody := allocatedBy(t, h, "/v1/jobs")
	meta, metaBody := allocatedBy(t, h, "/v1/jobs?meta=true")
	t.Logf("GET /v1/jobs: %d KiB allocated, %d KiB answer; ?meta=true: %d KiB allocated, %d KiB answer; the jobs' meta: %d KiB",
		plain>>10, plainBody>>10, meta>>10, metaBody>>10, total>>10)
	if plain > total/8 {
		t.Errorf("GET /v1/jobs allocated %d bytes, more than an eighth of the jobs' %d bytes of meta it does not show", plain, total)
	}
	if metaBody < int(total) {
		t.Errorf("?meta=true answered %d bytes, less than the %d bytes of meta", metaBody, total)
	}
	// Generous: TotalAlloc counts every goroutine's allocations, and -race
	// adds its own; a list that copied each job would be far above it.
	if meta > 4*uint64(metaBody) {
		t.Errorf("?meta=true allocated %d bytes for an answer of %d", meta, metaBody)
	}
}

// BenchmarkJobList is one GET /v1/jobs over 1,000 jobs of 16 KiB of meta
// each, without and with ?meta=true.
//
//	go test -run '^$' -bench JobList -benchmem ./core/httpapi/
func BenchmarkJobList(b *testing.B) {
	h := listFixture(b, 1000, 16<<10).Handler()
	for _, target := range []string{"/v1/jobs", "/v1/jobs?meta=true"} {
		b.Run(strings.TrimPrefix(target, "/v1/"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := &discardWriter{h: http.Header{}, code: http.StatusOK}
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
				if w.code != http.StatusOK {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}

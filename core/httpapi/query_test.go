package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// watchQueries wraps the API's query function so that a test learns when
// a blocking query has run its read once and is waiting.
func watchQueries(api *HTTPServer) <-chan struct{} {
	ran := make(chan struct{}, 16)
	inner := api.query
	api.query = func(ctx context.Context, minIndex uint64, fn func(ws memdb.WatchSet, st reader) (uint64, error)) (uint64, error) {
		return inner(ctx, minIndex, func(ws memdb.WatchSet, st reader) (uint64, error) {
			idx, err := fn(ws, st)
			select {
			case ran <- struct{}{}:
			default:
			}
			return idx, err
		})
	}
	return ran
}

func TestBlockingQueryWakesOnWrite(t *testing.T) {
	tests := []struct {
		name   string
		target string
		write  func(t *testing.T, f *fakeServer)
		want   string // X-Nomad-Index after the write
	}{
		{"job", "/v1/job/web?index=10&wait=60s", func(t *testing.T, f *fakeServer) { seedJob(t, f.store, 20, testJob("default", "web")) }, "20"},
		{"job list", "/v1/jobs?index=10&wait=60s", func(t *testing.T, f *fakeServer) { seedJob(t, f.store, 21, testJob("default", "new")) }, "21"},
		{"missing job appears", "/v1/job/later?index=10&wait=60s", func(t *testing.T, f *fakeServer) { seedJob(t, f.store, 22, testJob("default", "later")) }, "22"},
		{"evals", "/v1/evaluations?index=10&wait=60s", func(t *testing.T, f *fakeServer) {
			seedEval(t, f.store, 23, &structs.Evaluation{ID: "e1", Namespace: "default", Status: "pending"})
		}, "23"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, fake := newTestAPI(t, Config{})
			seedJob(t, fake.store, 10, testJob("default", "web"))
			ran := watchQueries(api)

			done := make(chan *httptest.ResponseRecorder)
			go func() {
				rec := httptest.NewRecorder()
				api.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.target, nil))
				done <- rec
			}()
			select {
			case <-ran: // the query read once and is now waiting
			case <-time.After(10 * time.Second):
				t.Fatal("query never ran")
			}
			select {
			case rec := <-done:
				t.Fatalf("query returned before the write: %d %s", rec.Code, rec.Body.String())
			default:
			}
			tc.write(t, fake)
			select {
			case rec := <-done:
				mustOK(t, rec)
				if got := rec.Header().Get("X-Nomad-Index"); got != tc.want {
					t.Errorf("X-Nomad-Index = %q, want %q", got, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("blocking query did not wake on the write")
			}
		})
	}
}

func TestBlockingQueryTimesOut(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedJob(t, fake.store, 10, testJob("default", "web"))
	const wait = 50 * time.Millisecond
	start := time.Now()
	rec := do(t, api.Handler(), http.MethodGet, "/v1/job/web?index=10&wait=50ms", "")
	elapsed := time.Since(start)
	mustOK(t, rec)
	if got := rec.Header().Get("X-Nomad-Index"); got != "10" {
		t.Errorf("X-Nomad-Index = %q, want the unchanged 10", got)
	}
	if elapsed < wait {
		t.Errorf("returned after %v, before the %v wait", elapsed, wait)
	}
	if job := decodeJSON[structs.Job](t, rec); job.ID != "web" {
		t.Errorf("timed-out query answered %+v", job)
	}
}

func TestBlockingQueryIndexAlreadyPassed(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedJob(t, fake.store, 10, testJob("default", "web"))
	// index 5 < 10: answers at once even with a long wait.
	rec := do(t, api.Handler(), http.MethodGet, "/v1/job/web?index=5&wait=5m", "")
	mustOK(t, rec)
	if got := rec.Header().Get("X-Nomad-Index"); got != "10" {
		t.Errorf("X-Nomad-Index = %q", got)
	}
}

func TestQueryParamErrors(t *testing.T) {
	api, _ := newTestAPI(t, Config{})
	tests := []struct{ target, want string }{
		{"/v1/jobs?index=abc", "Invalid index"},
		{"/v1/jobs?index=-1", "Invalid index"},
		{"/v1/jobs?index=1&wait=forever", "Invalid wait time"},
		{"/v1/job/web?wait=10", "Invalid wait time"},
		{"/v1/job/web/allocations?all=sometimes", `"all"`},
		{"/v1/nodes?wait=-5s", "Invalid wait time"},
	}
	for _, tc := range tests {
		rec := do(t, api.Handler(), http.MethodGet, tc.target, "")
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %q, want 400 with %q", tc.target, rec.Code, rec.Body.String(), tc.want)
		}
	}
}

func TestParseQueryWait(t *testing.T) {
	tests := []struct {
		query string
		want  time.Duration
	}{
		{"", maxQueryTime},
		{"wait=10s", 10 * time.Second},
		{"wait=1h", maxQueryTime}, // capped
		{"wait=0s", maxQueryTime},
	}
	for _, tc := range tests {
		q, err := parseQuery(httptest.NewRequest("GET", "/v1/jobs?"+tc.query, nil))
		if err != nil || q.Wait != tc.want || q.Namespace != "default" {
			t.Errorf("%q: %+v %v, want wait %v", tc.query, q, err, tc.want)
		}
	}
}

func TestRouting(t *testing.T) {
	api, _ := newTestAPI(t, Config{})
	tests := []struct {
		method, target string
		code           int
	}{
		{"GET", "/v1/nothing", 404},
		{"GET", "/v2/jobs", 404},
		{"DELETE", "/v1/jobs", 405},
		{"PATCH", "/v1/job/web", 405},
		{"GET", "/v1/job/web/plan", 405},
		{"GET", "/v1/job/web/evaluate", 405},
		{"POST", "/v1/job/web/allocations", 405},
		{"DELETE", "/v1/allocation/x/stop", 405},
		{"PUT", "/v1/nodes", 405},
		{"GET", "/v1/node/x/drain", 405},
	}
	for _, tc := range tests {
		rec := do(t, api.Handler(), tc.method, tc.target, "")
		if rec.Code != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.target, rec.Code, tc.code)
		}
	}
}

func TestAgentEndpoints(t *testing.T) {
	t.Run("status and regions", func(t *testing.T) {
		api, fake := newTestAPI(t, Config{})
		for _, tc := range []struct{ target, want string }{
			{"/v1/status/leader", `"127.0.0.1:4647"`},
			{"/v1/status/peers", `["127.0.0.1:4647"]`},
			{"/v1/regions", `["global"]`},
			{"/v1/agent/self", `"Datacenter":"dc1"`},
		} {
			rec := do(t, api.Handler(), "GET", tc.target, "")
			mustOK(t, rec)
			if !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("%s: %s lacks %s", tc.target, rec.Body.String(), tc.want)
			}
		}
		fake.leader = ""
		if rec := do(t, api.Handler(), "GET", "/v1/status/leader", ""); rec.Code != 503 || rec.Body.String() != "No cluster leader" {
			t.Errorf("no leader: %d %q", rec.Code, rec.Body.String())
		}
		if rec := do(t, api.Handler(), "GET", "/v1/jobs", ""); rec.Header().Get("X-Nomad-KnownLeader") != "false" {
			t.Errorf("KnownLeader = %q without a leader", rec.Header().Get("X-Nomad-KnownLeader"))
		}
	})
	t.Run("agent self from config", func(t *testing.T) {
		api, _ := newTestAPI(t, Config{AgentSelf: func() any {
			return map[string]any{"stats": map[string]any{"client": map[string]string{"node_id": "n1"}}}
		}})
		rec := do(t, api.Handler(), "GET", "/v1/agent/self?pretty", "")
		mustOK(t, rec)
		if !strings.Contains(rec.Body.String(), `"node_id": "n1"`) {
			t.Errorf("body %s", rec.Body.String())
		}
	})
}

// peeringServer adds the optional Peerer to the fake.
type peeringServer struct{ *fakeServer }

func (p peeringServer) Peers() []string { return []string{"10.0.0.1:4647", "10.0.0.2:4647"} }

func TestStatusPeersFromPeerer(t *testing.T) {
	_, fake := newTestAPI(t, Config{})
	api := New(Config{Server: peeringServer{fake}})
	rec := do(t, api.Handler(), "GET", "/v1/status/peers", "")
	if rec.Body.String() != "[\"10.0.0.1:4647\",\"10.0.0.2:4647\"]\n" {
		t.Errorf("peers = %q", rec.Body.String())
	}
}

func TestServeAndShutdown(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedJob(t, fake.store, 3, testJob("default", "web"))
	ln := listenLoopback(t)
	var wg sync.WaitGroup
	var serveErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		serveErr = api.Serve(ln)
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/job/web")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Nomad-Index") != "3" {
		t.Errorf("served %d index %q", resp.StatusCode, resp.Header.Get("X-Nomad-Index"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Serve may not have registered its http.Server before the request
	// above returned, but it has by now: it answered.
	if err := api.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	wg.Wait()
	if serveErr != nil {
		t.Errorf("Serve returned %v after Shutdown", serveErr)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestShutdownEndsBlockingQueries(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedJob(t, fake.store, 10, testJob("default", "web"))
	ran := watchQueries(api)
	ln := listenLoopback(t)
	served := make(chan error, 1)
	go func() { served <- api.Serve(ln) }()

	type answer struct {
		code  int
		index string
		err   error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/v1/job/web?index=10&wait=5m")
		if err != nil {
			got <- answer{err: err}
			return
		}
		resp.Body.Close()
		got <- answer{code: resp.StatusCode, index: resp.Header.Get("X-Nomad-Index")}
	}()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("query never ran")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := api.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown waited for the long poll: %v", err)
	}
	a := <-got
	if a.err != nil || a.code != 200 || a.index != "10" {
		t.Errorf("long poll answered %+v, want 200 with the unchanged index", a)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
}

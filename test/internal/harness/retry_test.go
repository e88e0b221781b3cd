package harness

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAgent answers the scripted statuses in turn, then 200 with body
// `{"ok":true}`; it counts the requests it got.
type fakeAgent struct {
	srv      *httptest.Server
	mu       sync.Mutex
	statuses []int
	requests int
}

func newFakeAgent(t *testing.T, statuses ...int) *fakeAgent {
	f := &fakeAgent{statuses: statuses}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		f.requests++
		status := http.StatusOK
		if len(f.statuses) > 0 {
			status, f.statuses = f.statuses[0], f.statuses[1:]
		}
		f.mu.Unlock()
		if status != http.StatusOK {
			http.Error(w, "No cluster leader", status)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func testAPI(t *testing.T, addr string) *API {
	a := NewAPI(t, addr, "", "")
	a.RetryTimeout = 30 * time.Second
	t.Cleanup(a.HTTP.CloseIdleConnections)
	return a
}

// During a leader election the agent answers 503 (no leader) or 502 for a
// while: MustGet and MustWrite wait it out instead of failing the test.
func TestMustHelpersRetryWhileNoLeader(t *testing.T) {
	f := newFakeAgent(t, 503, 502, 503)
	a := testAPI(t, f.srv.Listener.Addr().String())
	var out struct{ OK bool }
	a.MustGet("/v1/jobs", &out)
	if !out.OK || f.count() != 4 {
		t.Errorf("MustGet: %+v after %d requests; want the 200 after 3 refusals", out, f.count())
	}

	f = newFakeAgent(t, 503, 504)
	a = testAPI(t, f.srv.Listener.Addr().String())
	out.OK = false
	a.MustWrite(http.MethodPut, "/v1/jobs", map[string]any{"Job": 1}, &out)
	if !out.OK || f.count() != 3 {
		t.Errorf("MustWrite: %+v after %d requests; want the 200 after 2 refusals", out, f.count())
	}
}

// The agent's verdicts are final: a 400, 404 or 500 is not asked again,
// and neither is anything through Raw or Do, which observe.
func TestAnswersThatAreNotRetried(t *testing.T) {
	for _, status := range []int{400, 404, 409, 500} {
		f := newFakeAgent(t, status)
		a := testAPI(t, f.srv.Listener.Addr().String())
		if got, _, err := a.RawRetry(http.MethodGet, "/v1/job/x", nil); err != nil || got != status || f.count() != 1 {
			t.Errorf("RawRetry on a %d: got %d, %v after %d requests; want it once", status, got, err, f.count())
		}
	}
	f := newFakeAgent(t, 503)
	a := testAPI(t, f.srv.Listener.Addr().String())
	if got, err := a.Do(http.MethodGet, "/v1/status/leader", nil, nil); err != nil || got != 503 || f.count() != 1 {
		t.Errorf("Do on a 503: got %d, %v after %d requests; want the 503 once", got, err, f.count())
	}
}

// A request to an agent that is not listening yet (one restarting) is sent
// again until it listens.
func TestRetryRefusedConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens: connections are refused

	a := testAPI(t, addr)
	var attempts atomic.Int32
	var srv *http.Server
	done := make(chan struct{})
	defer func() {
		if srv != nil {
			_ = srv.Close()
			<-done
		}
	}()
	// The agent comes up after the first refusal: the test serves from
	// the address once the client has been refused there.
	a.Alive = func() bool {
		if attempts.Add(1) == 1 {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Errorf("listen again on %s: %v", addr, err)
				close(done)
				return false
			}
			srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write([]byte(`"up"`))
			})}
			go func() {
				defer close(done)
				_ = srv.Serve(ln)
			}()
		}
		return true
	}
	var got string
	a.MustGet("/v1/status/leader", &got)
	if got != "up" || attempts.Load() != 1 {
		t.Errorf("MustGet after a refusal: %q, %d refusals; want \"up\" after one", got, attempts.Load())
	}
}

// A refused connection to an agent whose process is gone stays refused: it
// is final at once, not retried until the deadline.
func TestNoRetryWhenTheAgentIsGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	a := testAPI(t, addr)
	a.Alive = func() bool { return false }
	start := time.Now()
	if _, _, err := a.RawRetry(http.MethodGet, "/v1/jobs", nil); err == nil {
		t.Fatal("RawRetry to a closed port succeeded")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("RawRetry to a gone agent took %s; want it final at once", took)
	}
}

// A write whose connection broke before the answer may have been applied:
// it is not sent again. A read is.
func TestBrokenConnectionRetriedForReadsOnly(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method]++
		first := seen[r.Method] == 1
		mu.Unlock()
		if first {
			// The agent dies mid-request: no answer at all.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	a := testAPI(t, srv.Listener.Addr().String())

	if status, _, err := a.RawRetry(http.MethodGet, "/v1/jobs", nil); err != nil || status != 200 {
		t.Errorf("GET after a broken connection: %d, %v; want it retried to a 200", status, err)
	}
	if _, _, err := a.RawRetry(http.MethodPut, "/v1/jobs", map[string]int{"x": 1}); err == nil {
		t.Errorf("PUT after a broken connection succeeded; it must not be sent twice")
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[http.MethodGet] != 2 || seen[http.MethodPut] != 1 {
		t.Errorf("requests by method: %v; want GET twice, PUT once", seen)
	}
}

// Retries end at the deadline with the last answer.
func TestRetryGivesUpAtTheDeadline(t *testing.T) {
	f := newFakeAgent(t, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503, 503)
	a := testAPI(t, f.srv.Listener.Addr().String())
	a.RetryTimeout = 300 * time.Millisecond
	status, body, err := a.RawRetry(http.MethodGet, "/v1/jobs", nil)
	if err != nil || status != 503 || !strings.Contains(string(body), "No cluster leader") {
		t.Errorf("RawRetry past its deadline: %d %q %v; want the last 503", status, body, err)
	}
	if n := f.count(); n < 2 || n > 10 {
		t.Errorf("%d requests within a 300ms retry deadline; want a few", n)
	}
}

// MustCLI runs a CLI again that failed on a 503 (no leader yet), and
// takes any other failure as final (CLI returns it).
func TestMustCLIRetriesTransientFailures(t *testing.T) {
	dir := t.TempDir()
	counter := filepath.Join(dir, "runs")
	// A stand-in for drover: fails twice as the CLI does without a
	// leader, then succeeds.
	bin := filepath.Join(dir, "drover")
	script := `#!/bin/sh
n=$(cat "` + counter + `" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "` + counter + `"
if [ "$n" -le 2 ]; then
  echo 'Error querying jobs: Unexpected response code: 503 (No cluster leader)' >&2
  exit 1
fi
echo ok
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	a := NewAPI(t, "127.0.0.1:1", bin, dir)
	a.RetryTimeout = 30 * time.Second
	res := a.MustCLI("job", "status")
	runs, _ := os.ReadFile(counter)
	if strings.TrimSpace(res.Stdout) != "ok" || strings.TrimSpace(string(runs)) != "3" {
		t.Errorf("MustCLI: %s after %s runs; want ok on the third", res, runs)
	}

	if again, _ := transientCLI(CLIResult{Code: 1, Stderr: "Error: Unexpected response code: 400 (bad job)"}); again {
		t.Error("a 400 from the CLI is taken as transient")
	}
	if again, refused := transientCLI(CLIResult{Code: 1, Stderr: `Get "http://127.0.0.1:1/v1/jobs": dial tcp 127.0.0.1:1: connect: connection refused`}); !again || !refused {
		t.Error("a refused connection from the CLI is not taken as transient")
	}
}

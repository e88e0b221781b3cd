package httpapi

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeLeader plays the leader's HTTP API: it records what it receives and
// answers every request with a body and an index no follower has.
type fakeLeader struct {
	srv *httptest.Server

	mu   sync.Mutex
	reqs []*http.Request

	// hold, when set, makes the handler wait for release (or for the
	// request's end, reported on ended) after signalling arrived.
	hold    bool
	arrived chan struct{}
	release chan struct{}
	ended   chan error
}

func newFakeLeader(t *testing.T) *fakeLeader {
	t.Helper()
	l := &fakeLeader{arrived: make(chan struct{}, 1), release: make(chan struct{}), ended: make(chan error, 1)}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *fakeLeader) serve(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r.Clone(context.Background()))
	hold := l.hold
	l.mu.Unlock()
	if hold {
		l.arrived <- struct{}{}
		select {
		case <-l.release:
		case <-r.Context().Done():
			l.ended <- r.Context().Err()
			return
		}
	}
	w.Header().Set(headerIndex, "99")
	w.Header().Set("X-Served-By", "leader")
	writeJSON(w, r, http.StatusOK, []string{"from-leader"})
}

func (l *fakeLeader) addr() string { return l.srv.Listener.Addr().String() }

func (l *fakeLeader) requests() []*http.Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*http.Request(nil), l.reqs...)
}

// deadAddr is an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func TestLeaderReads(t *testing.T) {
	leader := newFakeLeader(t)
	dead := deadAddr(t)
	tests := []struct {
		name, method, target string
		body                 string
		header               map[string]string
		isLeader             bool
		leaderHTTP           string // "leader" is the fake leader's address
		wantCode             int
		wantProxied          bool
		wantBody             string
	}{
		{name: "consistent read on a follower", method: "GET", target: "/v1/jobs", leaderHTTP: "leader", wantCode: 200, wantProxied: true, wantBody: "from-leader"},
		{name: "stale=false", method: "GET", target: "/v1/jobs?stale=false", leaderHTTP: "leader", wantCode: 200, wantProxied: true},
		{name: "one object", method: "GET", target: "/v1/job/web/allocations?index=3", leaderHTTP: "leader", wantCode: 200, wantProxied: true},
		{name: "operator read", method: "GET", target: "/v1/operator/raft/configuration", leaderHTTP: "leader", wantCode: 200, wantProxied: true},
		{name: "stale", method: "GET", target: "/v1/jobs?stale", leaderHTTP: "leader", wantCode: 200, wantBody: "[]"},
		{name: "stale=true", method: "GET", target: "/v1/jobs?stale=true", leaderHTTP: "leader", wantCode: 200, wantBody: "[]"},
		{name: "bad stale", method: "GET", target: "/v1/jobs?stale=maybe", leaderHTTP: "leader", wantCode: 400, wantBody: "Expect `true` or `false`"},
		{name: "already forwarded", method: "GET", target: "/v1/jobs", header: map[string]string{headerForwarded: "1"}, leaderHTTP: "leader", wantCode: 200, wantBody: "[]"},
		{name: "on the leader", method: "GET", target: "/v1/jobs", isLeader: true, leaderHTTP: "leader", wantCode: 200, wantBody: "[]"},
		{name: "agent self", method: "GET", target: "/v1/agent/self", leaderHTTP: "leader", wantCode: 200, wantBody: "config"},
		{name: "agent members", method: "GET", target: "/v1/agent/members", leaderHTTP: "leader", wantCode: 200, wantBody: "ServerName"},
		{name: "status leader", method: "GET", target: "/v1/status/leader", leaderHTTP: "leader", wantCode: 200, wantBody: "10.0.0.1:4647"},
		{name: "regions", method: "GET", target: "/v1/regions", leaderHTTP: "leader", wantCode: 200, wantBody: "global"},
		{name: "write", method: "PUT", target: "/v1/operator/scheduler/configuration", body: `{"SchedulerAlgorithm":"binpack"}`,
			leaderHTTP: "leader", wantCode: 200, wantBody: `"Updated":true`},
		{name: "no leader", method: "GET", target: "/v1/jobs", wantCode: 503, wantBody: "No cluster leader"},
		{name: "no leader, stale", method: "GET", target: "/v1/jobs?stale", wantCode: 200, wantBody: "[]"},
		{name: "leader unreachable", method: "GET", target: "/v1/jobs", leaderHTTP: dead, wantCode: 503, wantBody: "forwarding request to leader at " + dead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api, fc := newClusterAPI(t, Config{})
			addr := tt.leaderHTTP
			if addr == "leader" {
				addr = leader.addr()
			}
			fc.setLeader(tt.isLeader, addr)
			before := len(leader.requests())

			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req := httptest.NewRequest(tt.method, tt.target, body)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			api.Handler().ServeHTTP(rec, req)

			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			proxied := len(leader.requests()) > before
			if proxied != tt.wantProxied {
				t.Fatalf("proxied = %v, want %v", proxied, tt.wantProxied)
			}
			if proxied && rec.Header().Get("X-Served-By") != "leader" {
				t.Errorf("the leader's headers were not passed back: %v", rec.Header())
			}
			if !proxied && tt.wantCode == 200 && strings.HasPrefix(tt.target, "/v1/jobs") {
				// A local read says what this server knows of the leader.
				if h := rec.Header().Get(headerKnownLeader); h != "true" {
					t.Errorf("X-Nomad-KnownLeader = %q, want true", h)
				}
				if h := rec.Header().Get(headerLastContact); h != "0" {
					t.Errorf("X-Nomad-LastContact = %q, want 0", h)
				}
			}
		})
	}
}

func TestLeaderReadsPreserveRequest(t *testing.T) {
	leader := newFakeLeader(t)
	api, fc := newClusterAPI(t, Config{})
	fc.setLeader(false, leader.addr())

	req := httptest.NewRequest("GET", "/v1/job/cron%2Fperiodic-1/summary?index=5&wait=10s&namespace=ops", nil)
	req.Header.Set("X-Nomad-Token", "secret")
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, req)
	mustOK(t, rec)
	if h := rec.Header().Get(headerIndex); h != "99" {
		t.Errorf("X-Nomad-Index = %q, want the leader's 99", h)
	}

	reqs := leader.requests()
	if len(reqs) != 1 {
		t.Fatalf("leader got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if p := got.URL.EscapedPath(); p != "/v1/job/cron%2Fperiodic-1/summary" {
		t.Errorf("path %q", p)
	}
	want := url.Values{"index": {"5"}, "wait": {"10s"}, "namespace": {"ops"}}
	if q := got.URL.Query(); q.Encode() != want.Encode() {
		t.Errorf("query %q, want %q", q.Encode(), want.Encode())
	}
	if h := got.Header.Get("X-Nomad-Token"); h != "secret" {
		t.Errorf("token %q", h)
	}
	if h := got.Header.Get(headerForwarded); h == "" {
		t.Errorf("the forwarded request lacks %s", headerForwarded)
	}
}

// TestLeaderReadsLongPoll follows a blocking query through a follower to a
// leader that holds it, as a real long poll, over real connections.
func TestLeaderReadsLongPoll(t *testing.T) {
	tests := []struct {
		name string
		// end finishes the held long poll: by the leader answering, the
		// caller going away, or the follower shutting down.
		end       func(l *fakeLeader, cancel context.CancelFunc, api *HTTPServer)
		wantCode  int // 0: the caller sees no answer
		wantBody  string
		wantEnded bool // the leader saw the forwarded request end early
	}{
		{
			name:     "leader answers",
			end:      func(l *fakeLeader, _ context.CancelFunc, _ *HTTPServer) { close(l.release) },
			wantCode: 200, wantBody: "from-leader",
		},
		{
			name:      "caller goes away",
			end:       func(_ *fakeLeader, cancel context.CancelFunc, _ *HTTPServer) { cancel() },
			wantEnded: true,
		},
		{
			name: "follower shuts down",
			end: func(_ *fakeLeader, _ context.CancelFunc, api *HTTPServer) {
				if err := api.Shutdown(context.Background()); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			},
			wantCode: 503, wantBody: "shutting down", wantEnded: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leader := newFakeLeader(t)
			leader.hold = true
			api, fc := newClusterAPI(t, Config{})
			fc.setLeader(false, leader.addr())
			follower := httptest.NewServer(api.Handler())
			t.Cleanup(follower.Close)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "GET", follower.URL+"/v1/jobs?index=7&wait=5m", nil)
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				code int
				body string
				err  error
			}
			answers := make(chan answer, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					answers <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				answers <- answer{code: resp.StatusCode, body: string(b), err: err}
			}()

			deadline := time.After(10 * time.Second)
			select {
			case <-leader.arrived:
			case <-deadline:
				t.Fatal("the long poll never reached the leader")
			}
			if q := leader.requests()[0].URL.Query(); q.Get("index") != "7" || q.Get("wait") != "5m" {
				t.Errorf("blocking parameters lost: %v", q)
			}
			tt.end(leader, cancel, api)

			var a answer
			select {
			case a = <-answers:
			case <-deadline:
				t.Fatal("no answer")
			}
			if tt.wantCode == 0 {
				if a.err == nil {
					t.Errorf("caller got an answer %d %q after going away", a.code, a.body)
				}
			} else if a.err != nil || a.code != tt.wantCode || !strings.Contains(a.body, tt.wantBody) {
				t.Errorf("got %d %q %v, want %d containing %q", a.code, a.body, a.err, tt.wantCode, tt.wantBody)
			}
			if tt.wantEnded {
				select {
				case <-leader.ended:
				case <-deadline:
					t.Fatal("the forwarded request was not cancelled at the leader")
				}
			}
		})
	}
}

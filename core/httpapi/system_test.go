package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

// PUT /v1/system/gc calls the server's ForceGC, PUT
// /v1/system/reconcile/summaries its ReconcileJobSummaries; both map error
// kinds to statuses as every write does, and ignore any body.
func TestSystemGC(t *testing.T) {
	for _, route := range []struct{ path, method string }{
		{"/v1/system/gc", "ForceGC"},
		{"/v1/system/reconcile/summaries", "ReconcileJobSummaries"},
	} {
		testSystemRoute(t, route.path, route.method)
	}
}

func testSystemRoute(t *testing.T, path, method string) {
	for _, tc := range []struct {
		name     string
		method   string
		body     string
		err      error
		wantCode int
		wantBody string
		called   bool
	}{
		{"ok", "PUT", "", nil, http.StatusOK, "", true},
		{"nomad client body", "PUT", "{}", nil, http.StatusOK, "", true},
		{"unavailable", "PUT", "", structs.NewError(structs.ErrUnavailable, "no gc plugin decides collection COLLECTION_EVAL"),
			http.StatusServiceUnavailable, "no gc plugin decides", true},
		{"no leader", "PUT", "", structs.ErrNoLeader, http.StatusServiceUnavailable, "No cluster leader", true},
		{"denied after forwarding", "PUT", "", structs.NewError(structs.ErrPermissionDenied, "Permission denied"),
			http.StatusForbidden, "Permission denied", true},
		{"internal", "PUT", "", errors.New("raft: apply failed"), http.StatusInternalServerError, "raft: apply failed", true},
		{"GET is not routed", "GET", "", nil, http.StatusMethodNotAllowed, "", false},
		{"POST is not routed", "POST", "", nil, http.StatusMethodNotAllowed, "", false},
	} {
		t.Run(path+" "+tc.name, func(t *testing.T) {
			h, fake := newTestAPI(t, Config{})
			fake.err = tc.err
			rec := do(t, h.Handler(), tc.method, path, tc.body)
			if rec.Code != tc.wantCode {
				t.Fatalf("status %d %q, want %d", rec.Code, rec.Body.String(), tc.wantCode)
			}
			if tc.wantBody == "" && rec.Code == http.StatusOK && rec.Body.Len() != 0 {
				t.Errorf("body %q, want an empty 200", rec.Body.String())
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body %q, want it to contain %q", rec.Body.String(), tc.wantBody)
			}
			if called := fake.numCalls() == 1; called != tc.called {
				t.Fatalf("%s called: %v, want %v", method, called, tc.called)
			}
			if tc.called && fake.lastCall(t).Method != method {
				t.Errorf("server got %s, want %s", fake.lastCall(t).Method, method)
			}
		})
	}
}

// The official client's System().GarbageCollect() reaches ForceGC: nil on
// success, the status and message on an error; and, on the real server
// with ACLs on, it needs a management token.
func TestSystemGCWithNomadClient(t *testing.T) {
	h, fake := newTestAPI(t, Config{})
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.System().GarbageCollect(); err != nil {
		t.Fatalf("GarbageCollect: %v", err)
	}
	if got := fake.lastCall(t).Method; got != "ForceGC" {
		t.Errorf("server got %s, want ForceGC", got)
	}
	if err := c.System().ReconcileSummaries(); err != nil {
		t.Fatalf("ReconcileSummaries: %v", err)
	}
	if got := fake.lastCall(t).Method; got != "ReconcileJobSummaries" {
		t.Errorf("server got %s, want ReconcileJobSummaries", got)
	}
	fake.err = structs.NewError(structs.ErrUnavailable, "gc plugin \"gc\" is restarting")
	if err := c.System().GarbageCollect(); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "restarting") {
		t.Errorf("GarbageCollect with an unavailable plugin: %v, want the 503 and its message", err)
	}

	real := aclTestServer(t, true)
	if err := real.System().GarbageCollect(); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("anonymous GarbageCollect: %v, want 403", err)
	}
	mgmt, _, err := real.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	real.SetSecretID(mgmt.SecretID)
	// The management token passes the rule and reaches the server's
	// ForceGC, which answers 503 here: this test server has no GC plugin.
	if err := real.System().GarbageCollect(); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "no GC plugin") {
		t.Errorf("management GarbageCollect on a server without a GC plugin: %v, want its 503", err)
	}
}

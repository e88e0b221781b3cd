package httpapi

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/acl"
)

// rulesByPattern is the rule of every ServeMux pattern of table.
func rulesByPattern(table []route) map[string]rule {
	out := map[string]rule{}
	for _, rt := range table {
		for _, p := range rt.patterns() {
			out[p] = rt.rule
		}
	}
	return out
}

func nopHandler(*HTTPServer, http.ResponseWriter, *http.Request) {}

// TestCheckRoutes: the route table passes, and an entry without a rule
// (or with a rule that decides nothing, or no handler) is refused when the
// server is built.
func TestCheckRoutes(t *testing.T) {
	if err := checkRoutes(routeTable); err != nil {
		t.Fatalf("routeTable: %v", err)
	}
	both := public
	both.allow = anyToken.allow
	unnamed := anyToken
	unnamed.need = ""
	cases := []struct {
		name  string
		table []route
		is    error // the error's kind, when the test names one
	}{
		{"zero rule", []route{{"GET", "/v1/x", rule{}, nopHandler}}, errRouteNoRule},
		{"rule naming a need only", []route{{"GET", "/v1/x", rule{need: "node:read"}, nopHandler}}, errRouteNoRule},
		{"public and allow", []route{{"GET", "/v1/x", both, nopHandler}}, nil},
		{"rule without a need", []route{{"GET", "/v1/x", unnamed, nopHandler}}, nil},
		{"no handler", []route{{"GET", "/v1/x", anyToken, nil}}, nil},
		{"relative path", []route{{"GET", "v1/x", anyToken, nopHandler}}, nil},
		{"unknown method", []route{{"GET PATCH", "/v1/x", anyToken, nopHandler}}, nil},
		{"pattern twice", []route{{"GET", "/v1/x", anyToken, nopHandler}, {"PUT GET", "/v1/x", mgmt, nopHandler}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := append(slices.Clone(routeTable), c.table...)
			err := checkRoutes(table)
			if err == nil {
				t.Fatal("checkRoutes accepted the table")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("checkRoutes: %v; want %v", err, c.is)
			}
			defer func() {
				if recover() == nil {
					t.Error("routes() built a handler from the table")
				}
			}()
			(&HTTPServer{}).routes(table)
		})
	}
}

// wildcard matches a ServeMux wildcard segment ({id}, {name...}).
var wildcard = regexp.MustCompile(`\{[^}]*\}`)

// routeExample is a path that entry's pattern matches, every wildcard
// (and a trailing-slash subtree) filled with "team".
func routeExample(rt route) string {
	if exact, ok := strings.CutSuffix(rt.path, "{$}"); ok {
		return exact // the path itself, nothing below it
	}
	p := wildcard.ReplaceAllString(rt.path, "team")
	if strings.HasSuffix(p, "/") {
		p += "team"
	}
	return p
}

// ruleAllows is what a rule implies for the test callers that hold no
// policy (callerNone) or write in namespace "team" alone (callerOtherNS),
// for a request to routeExample with ?namespace=ns. It is written from
// the ACL model, not from the rules' code, so a rule whose check does not
// match its stated need fails the test below.
func ruleAllows(t *testing.T, need, method string, caller int, ns string) bool {
	t.Helper()
	granted := func(ns, capability string) bool {
		return caller == callerOtherNS && ns == "team" &&
			slices.Contains(acl.ExpandNamespacePolicy(acl.PolicyWrite), capability)
	}
	switch need {
	case "public", "self", "token":
		return true
	case "management", "node:read", "node:write", "agent:read", "agent:write",
		"operator:read", "operator:write", "plugin:list", "plugin:read":
		return false // neither caller has a non-namespace policy
	case "namespace:any":
		return caller == callerOtherNS // the path names "team"
	case "job":
		// The example names no action: a register is checked against the
		// body; the job's own namespace is the request's, and "*" means
		// the default namespace.
		switch method {
		case http.MethodPut, http.MethodPost:
			return true
		case http.MethodDelete:
			return granted(ns, acl.NamespaceCapabilitySubmitJob)
		}
		return granted(ns, acl.NamespaceCapabilityReadJob)
	}
	switch need {
	case "variables:write":
		return true // the body may name the namespace: checked in the handler
	case "variables:list":
		return ns == "*" || caller == callerOtherNS && ns == "team"
	case "variables:read", "variables:destroy":
		// The example path in the request's namespace ("*": default);
		// a namespace write policy grants every variables capability.
		return caller == callerOtherNS && ns == "team"
	}
	if capability, ok := strings.CutPrefix(need, "namespace:"); ok {
		// A list of every namespace passes and is filtered.
		return ns == "*" || granted(ns, capability)
	}
	t.Fatalf("rule need %q is unknown to this test: add what it implies", need)
	return false
}

// TestRouteTableACL walks the route table: for every entry, method and
// namespace, an anonymous caller and a token limited to namespace "team"
// get exactly what the entry's rule implies: 403 "Permission denied", or
// the handler. The handlers are stubs, so that the status is the rule's
// alone; the real server must then deny the same requests with 403 too.
func TestRouteTableACL(t *testing.T) {
	w := newACLWorld(t)

	const routeHeader = "X-Test-Route"
	stubbed := slices.Clone(routeTable)
	for i := range stubbed {
		stubbed[i].handle = func(_ *HTTPServer, rw http.ResponseWriter, r *http.Request) {
			rw.Header().Set(routeHeader, r.Pattern)
			rw.WriteHeader(http.StatusOK)
		}
	}
	stub := New(sameServer(w.h, Config{}))
	ts := httptest.NewServer(stub.routes(stubbed))
	t.Cleanup(ts.Close)

	// send is aclWorld.do against the stubs, with the route that served.
	send := func(caller int, method, path string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := w.secrets[caller]; s != "" {
			req.Header.Set("X-Nomad-Token", s)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, resp.Header.Get(routeHeader), strings.TrimSpace(string(body))
	}

	checked := 0
	for _, rt := range routeTable {
		methods := strings.Fields(rt.methods)
		if len(methods) == 0 {
			methods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete}
		}
		path := routeExample(rt)
		for _, method := range methods {
			// Management reaches every entry through its example path:
			// the requests below exercise the entry they are made from.
			pattern := rt.path
			if rt.methods != "" {
				pattern = method + " " + rt.path
			}
			if status, got, _ := send(callerMgmt, method, path); status != http.StatusOK || got != pattern {
				t.Errorf("%s %s as management: %d via %q; want 200 via %q", method, path, status, got, pattern)
				continue
			}
			for _, ns := range []string{"", "team", "*"} {
				p := path
				if ns != "" {
					p += "?namespace=" + ns
				}
				for _, caller := range []int{callerNone, callerOtherNS} {
					checked++
					allowed := ruleAllows(t, rt.rule.need, method, caller, ns)
					status, got, body := send(caller, method, p)
					switch {
					case allowed && (status != http.StatusOK || got != pattern):
						t.Errorf("%s %s as %s (rule %s): %d %q; want the handler", method, p, callerNames[caller], rt.rule.need, status, body)
					case !allowed && (status != http.StatusForbidden || body != "Permission denied" || got != ""):
						t.Errorf("%s %s as %s (rule %s): %d %q; want 403 Permission denied", method, p, callerNames[caller], rt.rule.need, status, body)
					case !allowed:
						// Denied before any handler runs, on the real
						// server as well.
						if status, body := w.do(caller, method, p, nil); status != http.StatusForbidden {
							t.Errorf("%s %s as %s on the real server: %d %q; want 403", method, p, callerNames[caller], status, body)
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("the route table is empty")
	}
}

// TestNomadAPIPathsRouted: every path of the Nomad HTTP API that
// NOMAD-BEHAVIOR.md names and drover serves is routed, to a table entry
// that serves its method (and, under /v1/job/, to a job action that does).
func TestNomadAPIPathsRouted(t *testing.T) {
	mux := http.NewServeMux()
	for p := range rulesByPattern(routeTable) {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	paths := []string{
		"GET /v1/jobs", "PUT /v1/jobs", "POST /v1/jobs", "PUT /v1/jobs/parse", "POST /v1/jobs/parse",
		"GET /v1/job/web", "PUT /v1/job/web", "POST /v1/job/web", "DELETE /v1/job/web",
		"GET /v1/job/web/allocations", "GET /v1/job/web/evaluations", "GET /v1/job/web/summary",
		"PUT /v1/job/web/evaluate", "POST /v1/job/web/evaluate",
		"PUT /v1/job/web/dispatch", "POST /v1/job/web/dispatch",
		"PUT /v1/job/web/periodic/force", "POST /v1/job/web/periodic/force",
		"GET /v1/allocations", "GET /v1/allocation/a1", "POST /v1/allocation/a1/stop",
		"GET /v1/evaluations", "GET /v1/evaluation/e1", "GET /v1/evaluation/e1/allocations",
		"GET /v1/nodes", "GET /v1/node/n1", "GET /v1/node/n1/allocations",
		"POST /v1/node/n1/drain", "POST /v1/node/n1/eligibility",
		"GET /v1/client/fs/logs/a1",
		"PUT /v1/system/gc", "PUT /v1/system/reconcile/summaries",
		"GET /v1/volumes", "PUT /v1/volumes", "POST /v1/volumes",
		"GET /v1/volume/csi/v1", "PUT /v1/volume/csi/v1", "DELETE /v1/volume/csi/v1",
		"DELETE /v1/volume/csi/v1/detach", "PUT /v1/volume/csi/v1/create", "DELETE /v1/volume/csi/v1/delete",
		"GET /v1/plugins", "GET /v1/plugin/csi/p1",
		"PUT /v1/acl/bootstrap", "POST /v1/acl/bootstrap",
		"PUT /v1/acl/token/onetime", "POST /v1/acl/token/onetime",
		"PUT /v1/acl/token/onetime/exchange", "POST /v1/acl/token/onetime/exchange",
	}
	for _, mp := range paths {
		method, path, _ := strings.Cut(mp, " ")
		req := httptest.NewRequest(method, path, nil)
		_, pattern := mux.Handler(req)
		if pattern == "" {
			t.Errorf("%s is not routed", mp)
			continue
		}
		if pattern != "/v1/job/" {
			continue
		}
		action, id := splitJobPath(req)
		switch {
		case id != "web":
			t.Errorf("%s: job ID %q; want web", mp, id)
		case action != nil && !slices.Contains(action.methods, method):
			t.Errorf("%s: the job action serves %v", mp, action.methods)
		}
	}
}

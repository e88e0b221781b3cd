package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// The five callers of the ACL matrix, in the order of a case's want.
const (
	callerNone     = iota // no token: the anonymous policy (none written)
	callerNoCap           // a token that may only parse jobs in default
	callerOtherNS         // write in namespace "team" alone
	callerReadOnly        // read in default, node, agent and operator read
	callerMgmt            // management
	numCallers
)

var callerNames = [numCallers]string{"anonymous", "no-capability", "other-namespace", "read-only", "management"}

// aclWorld is a server with ACLs on, the five callers' secrets, a job,
// an eval and an allocation in each of "default" and "team".
type aclWorld struct {
	t       testing.TB
	h       *HTTPServer
	url     string
	secrets [numCallers]string
	// accessors of the callers' tokens ("" for the anonymous caller).
	accessors [numCallers]string
	// evals and allocs by namespace.
	evals, allocs map[string]string
}

func newACLWorld(t testing.TB) *aclWorld { return newWorld(t, true) }

// newWorld is newACLWorld with ACLs on or off (the tokens exist either
// way).
func newWorld(t testing.TB, aclEnabled bool) *aclWorld {
	t.Helper()
	srv := devServer(t, aclEnabled)
	ctx := context.Background()
	if _, err := srv.Namespaces().Upsert(ctx, []*structs.Namespace{{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	w := &aclWorld{t: t, h: New(serverConfig(srv, Config{})), evals: map[string]string{}, allocs: map[string]string{}}
	ts := httptest.NewServer(w.h.Handler())
	t.Cleanup(ts.Close)
	w.url = ts.URL

	st := srv.State()
	policies := []*structs.ACLPolicy{
		{Name: "parse-only", Rules: `namespace "default" { capabilities = ["parse-job"] }`},
		{Name: "team-write", Rules: `namespace "team" { policy = "write" }`},
		{Name: "read-all", Rules: `namespace "default" { policy = "read" }
node { policy = "read" }
agent { policy = "read" }
operator { policy = "read" }`},
	}
	if err := st.UpsertACLPolicies(100000, policies); err != nil {
		t.Fatal(err)
	}
	var tokens []*structs.ACLToken
	for i, pol := range []string{"", "parse-only", "team-write", "read-all", ""} {
		if i == callerNone {
			continue
		}
		tok := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: callerNames[i], Type: structs.ACLClientToken}
		if pol == "" {
			tok.Type = structs.ACLManagementToken
		} else {
			tok.Policies = []string{pol}
		}
		w.secrets[i], w.accessors[i] = tok.SecretID, tok.AccessorID
		tokens = append(tokens, tok)
	}
	if err := st.UpsertACLTokens(100001, tokens); err != nil {
		t.Fatal(err)
	}

	for _, ns := range []string{"default", "team"} {
		job := &structs.Job{ID: "web", Namespace: ns, Type: "sysbatch", Datacenters: []string{"dc1"},
			TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{
				Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
				Env:       map[string]string{"DB_PASSWORD": "hunter2"},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 64}}}}}}
		resp, err := srv.Jobs().Register(ctx, job, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.evals[ns] = resp.EvalID
		stored, err := st.JobByID(nil, ns, "web")
		if err != nil || stored == nil {
			t.Fatalf("job in %s: %v", ns, err)
		}
		alloc := &structs.Allocation{ID: uuid.NewString(), Namespace: ns, JobID: "web", Job: stored, TaskGroup: "g",
			NodeID: uuid.NewString(), EvalID: resp.EvalID, Name: "web.g[0]", DesiredStatus: "run", ClientStatus: "pending"}
		w.allocs[ns] = alloc.ID
		if err := st.UpsertAllocs(100002+uint64(len(w.allocs)), []*structs.Allocation{alloc}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// do sends a request as caller and returns the status and body.
func (w *aclWorld) do(caller int, method, path string, body any) (int, []byte) {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			w.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.url+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	if s := w.secrets[caller]; s != "" {
		req.Header.Set("X-Nomad-Token", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// A matrix case: one request and what each caller gets, one character a
// caller: 'x' any status but 401/403 (allowed: 2xx, or the endpoint's own
// 400/404/5xx), '-' 403, '2' 200, '4' 404.
type matrixCase struct {
	pattern string // the route table pattern it exercises
	method  string
	path    string
	body    any
	want    string
}

func jobBody(ns string) map[string]any {
	return map[string]any{"Job": map[string]any{"ID": "web", "Name": "web", "Namespace": ns, "Type": "sysbatch",
		"Datacenters": []string{"dc1"}, "TaskGroups": []map[string]any{{"Name": "g", "Count": 1,
			"Tasks": []map[string]any{{"Name": "t", "Driver": "raw_exec", "Config": map[string]any{"command": "/bin/true"}}}}}}}
}

// TestACLMatrix walks every route with the five callers. A route missing
// from the cases, or a rule for a route that is not registered, fails it:
// a new endpoint cannot go untested.
func TestACLMatrix(t *testing.T) {
	w := newACLWorld(t)
	teamAlloc, teamEval := w.allocs["team"], w.evals["team"]
	nobody := uuid.NewString()
	cases := []matrixCase{
		{"GET /v1/jobs", "GET", "/v1/jobs", nil, "---22"},
		{"GET /v1/jobs", "GET", "/v1/jobs?namespace=team", nil, "--2-2"},
		{"GET /v1/jobs", "GET", "/v1/jobs?namespace=*", nil, "22222"}, // filtered: TestACLNamespaceBypass
		{"PUT /v1/jobs", "PUT", "/v1/jobs", jobBody("default"), "----2"},
		{"POST /v1/jobs", "POST", "/v1/jobs", jobBody("team"), "--2-2"},
		{"POST /v1/jobs", "POST", "/v1/jobs?namespace=team", jobBody("default"), "----2"}, // the body's namespace decides
		{"PUT /v1/jobs/parse", "PUT", "/v1/jobs/parse", map[string]any{"JobHCL": "job \"p\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n"}, "-2-22"},
		{"POST /v1/jobs/parse", "POST", "/v1/jobs/parse", map[string]any{"JobHCL": `job "p" {}`}, "-x-xx"},
		{"/v1/job/", "GET", "/v1/job/web", nil, "---22"},
		{"/v1/job/", "GET", "/v1/job/web?namespace=team", nil, "--2-2"},
		{"/v1/job/", "GET", "/v1/job/web?namespace=*", nil, "---44"},
		{"/v1/job/", "GET", "/v1/job/web/allocations", nil, "---22"},
		{"/v1/job/", "GET", "/v1/job/web/evaluations?namespace=team", nil, "--2-2"},
		{"/v1/job/", "GET", "/v1/job/web/summary", nil, "---22"},
		{"/v1/job/", "GET", "/v1/job/web/versions", nil, "---22"},
		{"/v1/job/", "PUT", "/v1/job/web/plan", jobBody("default"), "----2"},
		{"/v1/job/", "PUT", "/v1/job/web/plan", jobBody("team"), "--2-2"},
		{"/v1/job/", "PUT", "/v1/job/web/evaluate?namespace=team", nil, "--2-2"},
		{"/v1/job/", "PUT", "/v1/job/web/dispatch", nil, "----x"},
		{"/v1/job/", "PUT", "/v1/job/web/periodic/force", nil, "----x"},
		{"/v1/job/", "GET", "/v1/job/web/scale", nil, "---22"},
		{"/v1/job/", "GET", "/v1/job/web/scale?namespace=team", nil, "--2-2"},
		{"/v1/job/", "PUT", "/v1/job/web/scale?namespace=team", map[string]any{"Count": 2, "Target": map[string]string{"Group": "g"}}, "--x-x"},
		{"/v1/job/", "POST", "/v1/job/web/scale", map[string]any{"Count": 2, "Target": map[string]string{"Group": "g"}}, "----x"},
		{"/v1/job/", "PUT", "/v1/job/web/revert", map[string]any{"JobVersion": 0}, "----x"},
		{"/v1/job/", "PUT", "/v1/job/web/revert?namespace=team", map[string]any{"JobVersion": 0}, "--x-x"},
		{"/v1/job/", "DELETE", "/v1/job/nojob", nil, "----x"},
		{"/v1/job/", "PUT", "/v1/job/web", jobBody("default"), "----2"},

		{"GET /v1/allocations", "GET", "/v1/allocations", nil, "---22"},
		{"GET /v1/allocation/{id}", "GET", "/v1/allocation/" + teamAlloc, nil, "44242"},
		{"GET /v1/allocation/{id}", "GET", "/v1/allocation/" + w.allocs["default"], nil, "44422"},
		{"POST /v1/allocation/{id}/stop", "POST", "/v1/allocation/" + teamAlloc + "/stop", nil, "--x-x"},
		{"PUT /v1/allocation/{id}/stop", "PUT", "/v1/allocation/" + nobody + "/stop", nil, "44444"},

		{"GET /v1/evaluations", "GET", "/v1/evaluations", nil, "---22"},
		{"GET /v1/evaluation/{id}", "GET", "/v1/evaluation/" + teamEval, nil, "44242"},
		{"GET /v1/evaluation/{id}/allocations", "GET", "/v1/evaluation/" + teamEval + "/allocations", nil, "22222"},

		{"GET /v1/nodes", "GET", "/v1/nodes", nil, "---22"},
		{"GET /v1/node/{id}", "GET", "/v1/node/" + nobody, nil, "---44"},
		{"GET /v1/node/{id}/{sub}", "GET", "/v1/node/" + nobody + "/allocations", nil, "---22"},
		{"POST /v1/node/{id}/eligibility", "POST", "/v1/node/" + nobody + "/eligibility", map[string]string{"Eligibility": "ineligible"}, "----x"},
		{"PUT /v1/node/{id}/eligibility", "PUT", "/v1/node/" + nobody + "/eligibility", map[string]string{"Eligibility": "ineligible"}, "----x"},
		{"POST /v1/node/{id}/drain", "POST", "/v1/node/" + nobody + "/drain", map[string]any{}, "----x"},
		{"PUT /v1/node/{id}/drain", "PUT", "/v1/node/" + nobody + "/drain", map[string]any{}, "----x"},
		{"GET /v1/client/fs/logs/{alloc}", "GET", "/v1/client/fs/logs/" + teamAlloc + "?task=t&type=stdout", nil, "--x-x"},
		{"GET /v1/client/fs/logs/{alloc}", "GET", "/v1/client/fs/logs/" + nobody + "?task=t&type=stdout", nil, "----x"},

		{"GET /v1/agent/self", "GET", "/v1/agent/self", nil, "---22"},
		{"PUT /v1/agent/plugins/reload", "PUT", "/v1/agent/plugins/reload", nil, "----x"},
		{"POST /v1/agent/plugins/reload", "POST", "/v1/agent/plugins/reload", nil, "----x"},
		{"GET /v1/agent/plugins", "GET", "/v1/agent/plugins", nil, "---xx"},
		{"GET /v1/agent/plugin", "GET", "/v1/agent/plugin?name=x", nil, "---xx"},
		{"GET /v1/agent/plugins/{name}", "GET", "/v1/agent/plugins/x", nil, "---xx"},
		{"GET /v1/agent/members", "GET", "/v1/agent/members", nil, "---xx"},

		{"GET /v1/status/leader", "GET", "/v1/status/leader", nil, "22222"},
		{"GET /v1/status/peers", "GET", "/v1/status/peers", nil, "22222"},
		{"GET /v1/regions", "GET", "/v1/regions", nil, "22222"},
		{"GET /v1/agent/health", "GET", "/v1/agent/health", nil, "22222"},

		{"GET /v1/operator/raft/configuration", "GET", "/v1/operator/raft/configuration", nil, "---xx"},
		{"DELETE /v1/operator/raft/peer", "DELETE", "/v1/operator/raft/peer?address=192.0.2.1:1", nil, "----x"},
		{"GET /v1/operator/scheduler/configuration", "GET", "/v1/operator/scheduler/configuration", nil, "---22"},
		{"PUT /v1/operator/scheduler/configuration", "PUT", "/v1/operator/scheduler/configuration", map[string]any{}, "----x"},
		{"POST /v1/operator/scheduler/configuration", "POST", "/v1/operator/scheduler/configuration", map[string]any{}, "----x"},
		{"GET /v1/operator/join-token/{role}", "GET", "/v1/operator/join-token/client", nil, "----x"},
		{"PUT /v1/operator/join-token/{role}/rotate", "PUT", "/v1/operator/join-token/client/rotate", nil, "----x"},
		{"POST /v1/operator/join-token/{role}/rotate", "POST", "/v1/operator/join-token/client/rotate", nil, "----x"},

		// Only the management token gets past the rule (this server has
		// no GC plugin, so ForceGC then answers 503).
		{"PUT /v1/system/gc", "PUT", "/v1/system/gc", map[string]any{}, "----x"},
		{"PUT /v1/system/reconcile/summaries", "PUT", "/v1/system/reconcile/summaries", map[string]any{}, "----x"},

		{"GET /v1/namespaces", "GET", "/v1/namespaces", nil, "22222"},
		// A stream never ends: the bad index (checked after the ACL)
		// answers allowed callers 400.
		{"GET /v1/event/stream", "GET", "/v1/event/stream?index=-1", nil, "----x"},
		{"GET /v1/event/stream", "GET", "/v1/event/stream?topic=Job&namespace=team&index=-1", nil, "--x-x"},
		{"GET /v1/event/stream", "GET", "/v1/event/stream?topic=Job&namespace=*&index=-1", nil, "xxxxx"}, // filtered per event,
		{"GET /v1/event/stream", "GET", "/v1/event/stream?topic=Node&index=-1", nil, "---xx"},
		{"GET /v1/event/stream", "GET", "/v1/event/stream?topic=ACLToken&index=-1", nil, "----x"},
		// Public, as scrapers send no token (501 here: no registry).
		{"GET /v1/metrics", "GET", "/v1/metrics", nil, "xxxxx"},
		{"GET /v1/namespace/{name}", "GET", "/v1/namespace/team", nil, "--2-2"},
		{"PUT /v1/namespace/{name}", "PUT", "/v1/namespace/extra", map[string]string{"Name": "extra"}, "----2"},
		{"POST /v1/namespace/{name}", "POST", "/v1/namespace/extra", map[string]string{"Name": "extra"}, "----2"},
		{"PUT /v1/namespace", "PUT", "/v1/namespace", map[string]string{"Name": "extra2"}, "----2"},
		{"POST /v1/namespace", "POST", "/v1/namespace", map[string]string{"Name": "extra2"}, "----2"},
		{"DELETE /v1/namespace/{name}", "DELETE", "/v1/namespace/extra", nil, "----x"},

		// Self-authorizing: each decides in its handler.
		{"PUT /v1/acl/bootstrap", "PUT", "/v1/acl/bootstrap", nil, "xxxxx"}, // 400: done already
		{"POST /v1/acl/bootstrap", "POST", "/v1/acl/bootstrap", nil, "xxxxx"},
		{"PUT /v1/acl/token/onetime", "PUT", "/v1/acl/token/onetime", nil, "-2222"},
		{"POST /v1/acl/token/onetime", "POST", "/v1/acl/token/onetime", nil, "-2222"},
		{"PUT /v1/acl/token/onetime/exchange", "PUT", "/v1/acl/token/onetime/exchange", map[string]string{"OneTimeSecretID": nobody}, "-----"},
		{"POST /v1/acl/token/onetime/exchange", "POST", "/v1/acl/token/onetime/exchange", map[string]string{"OneTimeSecretID": nobody}, "-----"},
	}
	cases = append(cases, aclCRUDMatrixCases(w, nobody)...)
	cases = append(cases, aclAuthMatrixCases(t, nobody)...)
	cases = append(cases, csiMatrixCases(w)...)
	cases = append(cases, deploymentMatrixCases(w)...)
	cases = append(cases, serviceMatrixCases(w)...)
	cases = append(cases, scalingMatrixCases()...)
	cases = append(cases, uiMatrixCases(w, nobody)...)
	cases = append(cases, nodePoolMatrixCases()...)
	cases = append(cases, nomadCompatMatrixCases(nobody)...)
	cases = append(cases, clientAPIMatrixCases(w, nobody)...)
	cases = append(cases, execMatrixCases(w, nobody)...)
	cases = append(cases, snapshotMatrixCases()...)
	cases = append(cases, variableMatrixCases()...)
	cases = append(cases, hostVolumeMatrixCases()...)

	routeRules := rulesByPattern(routeTable)
	covered := map[string]bool{}
	for _, c := range cases {
		if _, ok := routeRules[c.pattern]; !ok {
			t.Errorf("case %s %s names pattern %q, which has no rule", c.method, c.path, c.pattern)
		}
		covered[c.pattern] = true
	}
	for _, p := range w.h.patterns {
		if !covered[p] {
			t.Errorf("route %q has no ACL matrix case", p)
		}
	}
	for p := range routeRules {
		if !slices.Contains(w.h.patterns, p) {
			t.Errorf("routeRules has %q, which routes() does not register", p)
		}
	}

	unauthorized := 0
	for _, c := range cases {
		for caller := range numCallers {
			status, body := w.do(caller, c.method, c.path, c.body)
			want := c.want[caller]
			ok := false
			switch want {
			case 'x':
				ok = status != http.StatusUnauthorized && status != http.StatusForbidden
			case '-':
				ok = status == http.StatusForbidden
				if !ok && status/100 == 2 {
					unauthorized++
				}
			case '2':
				ok = status == http.StatusOK
			case '4':
				ok = status == http.StatusNotFound
			}
			if !ok {
				t.Errorf("%s %s as %s: %d %.200s; want %c", c.method, c.path, callerNames[caller], status, body, want)
			}
		}
	}
	if unauthorized > 0 {
		t.Errorf("%d unauthorized successes", unauthorized)
	}
}

// TestACLNamespaceBypass: lists across namespaces, prefix searches and
// blocking queries show a caller only what its namespaces hold.
func TestACLNamespaceBypass(t *testing.T) {
	w := newACLWorld(t)
	namespacesOf := func(caller int, path string) []string {
		t.Helper()
		status, body := w.do(caller, "GET", path, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s as %s: %d %s", path, callerNames[caller], status, body)
		}
		var items []struct{ Namespace string }
		if err := json.Unmarshal(body, &items); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
		var out []string
		for _, it := range items {
			if !slices.Contains(out, it.Namespace) {
				out = append(out, it.Namespace)
			}
		}
		sort.Strings(out)
		return out
	}
	idx := w.h.srv.State().Index("jobs")
	for _, path := range []string{
		"/v1/jobs?namespace=*", "/v1/jobs?namespace=*&prefix=w", "/v1/allocations?namespace=*",
		"/v1/evaluations?namespace=*",
		"/v1/jobs?namespace=*&index=1&wait=1s", "/v1/jobs?namespace=*&index=" + uintString(idx) + "&wait=50ms",
	} {
		for caller, want := range map[int]string{callerOtherNS: "[team]", callerReadOnly: "[default]", callerNoCap: "[]", callerNone: "[]"} {
			if got := namespacesOf(caller, path); strings.Trim(strings.Join(got, " "), " ") != strings.Trim(want, "[]") {
				t.Errorf("GET %s as %s shows namespaces %v; want %s", path, callerNames[caller], got, want)
			}
		}
		if got := namespacesOf(callerMgmt, path); len(got) == 0 {
			t.Errorf("GET %s as management shows nothing", path)
		}
	}
	// A prefix search for another namespace's allocation finds nothing.
	prefix := "/v1/allocations?namespace=*&prefix=" + w.allocs["team"][:8]
	if got := namespacesOf(callerReadOnly, prefix); len(got) != 0 {
		t.Errorf("GET %s as read-only shows %v", prefix, got)
	}
	if got := namespacesOf(callerOtherNS, prefix); strings.Join(got, " ") != "team" {
		t.Errorf("GET %s as other-namespace shows %v; want [team]", prefix, got)
	}
	for caller, want := range map[int]string{callerOtherNS: "default team", callerReadOnly: "default", callerNone: ""} {
		_, body := w.do(caller, "GET", "/v1/namespaces", nil)
		var nss []struct{ Name string }
		_ = json.Unmarshal(body, &nss)
		var got []string
		for _, n := range nss {
			got = append(got, n.Name)
		}
		// The other-namespace token has no rule for default, so it sees
		// team alone.
		if caller == callerOtherNS {
			want = "team"
		}
		if strings.Join(got, " ") != want {
			t.Errorf("namespaces as %s: %v; want %q", callerNames[caller], got, want)
		}
	}
}

// TestACLRedactsEnv: task Env values reach only callers who may submit
// jobs in the job's namespace, in every answer that embeds the job.
func TestACLRedactsEnv(t *testing.T) {
	w := newACLWorld(t)
	paths := []string{"/v1/job/web", "/v1/job/web/versions?diffs=true", "/v1/allocation/" + w.allocs["default"]}
	for _, path := range paths {
		for caller, redacted := range map[int]bool{callerReadOnly: true, callerMgmt: false} {
			status, body := w.do(caller, "GET", path, nil)
			if status != http.StatusOK {
				t.Fatalf("GET %s as %s: %d %s", path, callerNames[caller], status, body)
			}
			hasSecret := bytes.Contains(body, []byte("hunter2"))
			hasRedacted := bytes.Contains(body, []byte(redactedValue))
			if redacted && (hasSecret || !hasRedacted) {
				t.Errorf("GET %s as %s: Env not redacted: %.300s", path, callerNames[caller], body)
			}
			if !redacted && !hasSecret {
				t.Errorf("GET %s as %s: Env missing: %.300s", path, callerNames[caller], body)
			}
		}
	}
	// The stored job is untouched.
	j, _ := w.h.srv.State().JobByID(nil, "default", "web")
	if j.TaskGroups[0].Tasks[0].Env["DB_PASSWORD"] != "hunter2" {
		t.Errorf("redaction changed the stored job: %v", j.TaskGroups[0].Tasks[0].Env)
	}
}

// With ACLs off no token is needed anywhere (the rest of the package's
// tests run so too).
func TestACLOffNeedsNoToken(t *testing.T) {
	c := aclTestServer(t, false)
	if _, _, err := c.Jobs().List(nil); err != nil {
		t.Fatalf("job list without ACLs: %v", err)
	}
	if _, err := c.Agent().Self(); err != nil {
		t.Fatalf("agent self without ACLs: %v", err)
	}
}

func uintString(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

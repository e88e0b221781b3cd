package ui

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// fakeResolver maps secrets to ACLs compiled from policy text; "" is the
// anonymous caller, as with the server's resolver.
type fakeResolver map[string]*acl.ACL

func (f fakeResolver) ACLEnabled() bool { return true }

func (f fakeResolver) ResolveToken(secret string) (*structs.ACLToken, *acl.ACL, error) {
	a, ok := f[secret]
	if !ok {
		return nil, nil, acl.ErrTokenNotFound
	}
	return &structs.ACLToken{SecretID: secret}, a, nil
}

func compile(t testing.TB, rules string) *acl.ACL {
	t.Helper()
	p, err := acl.ParsePolicy("p", rules)
	if err != nil {
		t.Fatal(err)
	}
	return acl.Compile([]*acl.Policy{p})
}

func newTestUI(t testing.TB, st *state.StateStore) *UI {
	return New(Config{State: func() *state.StateStore { return st }, Region: "global",
		Token: func(r *http.Request) string { return r.Header.Get("X-Nomad-Token") },
		Resolver: fakeResolver{
			"":       acl.Compile(nil), // the anonymous policy: nothing
			"reader": compile(t, `namespace "default" { policy = "read" }`),
			"parser": compile(t, `namespace "default" { capabilities = ["parse-job"] }`),
		}})
}

func newCookie(secret string) *http.Cookie { return &http.Cookie{Name: cookieName, Value: secret} }

func get(u http.Handler, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	rec := httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	return rec
}

func TestTokens(t *testing.T) {
	u := newTestUI(t, benchStore(t, 2, 2))
	cases := []struct {
		name, token, cookie string
		status              int
		want                string
	}{
		{"header token", "reader", "", 200, "job-0001"},
		{"cookie token", "", "reader", 200, "job-0001"},
		{"header wins over cookie", "parser", "reader", 403, "Your token may not read jobs in namespace default."},
		{"unknown token", "nope", "", 403, "Your token is not valid"},
		{"anonymous", "", "", 403, "Your token may not read jobs in namespace default."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/ui/jobs/default/job-0001", nil)
			if c.token != "" {
				req.Header.Set("X-Nomad-Token", c.token)
			}
			if c.cookie != "" {
				req.AddCookie(&http.Cookie{Name: cookieName, Value: c.cookie})
			}
			rec := httptest.NewRecorder()
			u.ServeHTTP(rec, req)
			if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
				t.Fatalf("%d, want %d with %q\n%s", rec.Code, c.status, c.want, rec.Body.String())
			}
			for _, secret := range []string{c.token, c.cookie} {
				if secret != "" && strings.Contains(rec.Body.String(), secret+"\"") {
					t.Errorf("page echoes the secret %q", secret)
				}
			}
		})
	}
}

// TestLoginCookieSecureOverTLS: over HTTPS the cookie is Secure too.
func TestLoginCookieSecureOverTLS(t *testing.T) {
	u := newTestUI(t, benchStore(t, 1, 1))
	ts := httptest.NewTLSServer(u)
	defer ts.Close()
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.PostForm(ts.URL+"/ui/login", url.Values{"token": {"reader"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	cs := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("%d, cookies %+v; want 303 and one Secure HttpOnly SameSite=Strict cookie", resp.StatusCode, cs)
	}
}

// TestJobPageCapsAllocations: a job with more allocations of one status
// than a page lists says how many are left out, and counts them all.
func TestJobPageCapsAllocations(t *testing.T) {
	st := benchStore(t, 1, 0)
	job, err := st.JobByID(nil, "default", "job-0000")
	if err != nil || job == nil {
		t.Fatal("no job", err)
	}
	var allocs []*structs.Allocation
	for i := range maxAllocsPerStatus + 7 {
		allocs = append(allocs, &structs.Allocation{ID: fmt.Sprintf("a-%04d", i), Namespace: "default", JobID: job.ID, Job: job,
			TaskGroup: "web", Name: fmt.Sprintf("job-0000.web[%d]", i), DesiredStatus: "run", ClientStatus: "running"})
	}
	if err := st.UpsertAllocs(1000, allocs); err != nil {
		t.Fatal(err)
	}
	rec := get(newTestUI(t, st), "/ui/jobs/default/job-0000", "reader")
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("%d\n%s", rec.Code, body)
	}
	if got := strings.Count(body, `<a href="/ui/allocations/a-`); got != maxAllocsPerStatus {
		t.Errorf("%d allocations listed, want %d", got, maxAllocsPerStatus)
	}
	for _, want := range []string{"running (107)", "7 more running allocations are not listed.", "107 running"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestStaticAndRouting(t *testing.T) {
	u := newTestUI(t, benchStore(t, 1, 1))
	cases := []struct {
		path, token string
		status      int
		header      string // "Key: value" the answer must carry
		want        string
	}{
		{"/ui/ui.css", "", 200, "Content-Type: text/css; charset=utf-8", ".w37{width:37%}"},
		{"/ui/", "", 302, "Location: /ui/jobs", ""},
		{"/ui/favicon.svg", "", 200, "Content-Type: image/svg+xml", "<svg"},
		{"/ui/login", "", 200, "Content-Security-Policy: " + csp, `<label for="token">`},
		{"/ui/nosuch", "reader", 404, "", ""},
		{"/ui/jobs", "reader", 200, "X-Frame-Options: DENY", `<link rel="stylesheet" href="/ui/ui.css">`},
		{"/ui/login", "", 200, "", `<link rel="icon" href="/ui/favicon.svg" type="image/svg+xml">`},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			rec := get(u, c.path, c.token)
			if rec.Code != c.status {
				t.Fatalf("%d, want %d", rec.Code, c.status)
			}
			if c.header != "" {
				k, v, _ := strings.Cut(c.header, ": ")
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if !strings.Contains(rec.Body.String(), c.want) {
				t.Errorf("body lacks %q", c.want)
			}
		})
	}
}

// TestJobPageCapsEvaluations: a job page lists its newest evaluations
// and counts the older ones.
func TestJobPageCapsEvaluations(t *testing.T) {
	st := benchStore(t, 1, 1)
	var evals []*structs.Evaluation
	for i := range maxEvals + 5 {
		evals = append(evals, &structs.Evaluation{ID: fmt.Sprintf("e%07d-0000", i), Namespace: "default", JobID: "job-0000",
			Status: "complete", TriggeredBy: "job-register"})
	}
	if err := st.UpsertEvals(1000, evals); err != nil {
		t.Fatal(err)
	}
	body := get(newTestUI(t, st), "/ui/jobs/default/job-0000", "reader").Body.String()
	if got := strings.Count(body, `<code>e`); got != maxEvals {
		t.Errorf("%d evaluations listed, want %d", got, maxEvals)
	}
	if !strings.Contains(body, "5 older evaluations are not listed.") {
		t.Error("page does not count the older evaluations")
	}
}

// TestNodePageCapsAllocations: a node page lists at most maxNodeAllocs
// allocations, and its usage bars still count every live one.
func TestNodePageCapsAllocations(t *testing.T) {
	st := benchStore(t, maxNodeAllocs+50, 1) // every allocation on node-000
	node := &structs.Node{ID: "node-000", Name: "n0", Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingEligible,
		NodeResources: &structs.NodeResources{Cpu: structs.NodeCpuResources{CpuShares: 1000}}}
	if err := st.UpsertNode(5000, node); err != nil {
		t.Fatal(err)
	}
	u := New(Config{State: func() *state.StateStore { return st }})
	body := get(u, "/ui/nodes/node-000", "").Body.String()
	if got := strings.Count(body, `<a href="/ui/allocations/`); got != maxNodeAllocs {
		t.Errorf("%d allocations listed, want %d", got, maxNodeAllocs)
	}
	if !strings.Contains(body, "50 more allocations are not listed.") {
		t.Error("page does not count the allocations left out")
	}
}

// TestJobIDWithSlashes: periodic and dispatched children have slashes in
// their IDs; their links lead to their pages.
func TestJobIDWithSlashes(t *testing.T) {
	st := benchStore(t, 1, 0)
	child := &structs.Job{ID: "nightly/periodic-1700000000", Namespace: "default", Type: "batch",
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}}}}}
	child.Canonicalize()
	if err := st.UpsertJob(2000, child); err != nil {
		t.Fatal(err)
	}
	u := newTestUI(t, st)
	list := get(u, "/ui/jobs", "reader").Body.String()
	link := `href="/ui/jobs/default/nightly/periodic-1700000000"`
	if !strings.Contains(list, link) {
		t.Fatalf("jobs page lacks %s", link)
	}
	rec := get(u, "/ui/jobs/default/nightly/periodic-1700000000", "reader")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "<h1>Job nightly/periodic-1700000000</h1>") {
		t.Fatalf("child job page: %d\n%s", rec.Code, rec.Body.String())
	}
}

// TestJobUIBlock: a job's ui block shows its description and links on the
// job page, escaped, and a link to a script is not followed.
func TestJobUIBlock(t *testing.T) {
	st := benchStore(t, 1, 0)
	job := &structs.Job{ID: "documented", Namespace: "default", Type: "batch",
		UI: &structs.JobUIConfig{Description: "Nightly <reports> for finance", Links: []*structs.JobUILink{
			{Label: "Runbook", URL: "https://wiki.example/runbook?a=1&b=2"},
			{Label: "Bad", URL: "javascript:alert(1)"},
		}},
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}}}}}
	job.Canonicalize()
	if err := st.UpsertJob(2000, job); err != nil {
		t.Fatal(err)
	}
	rec := get(newTestUI(t, st), "/ui/jobs/default/documented", "reader")
	body := rec.Body.String()
	for _, want := range []string{
		`<p class="description">Nightly &lt;reports&gt; for finance</p>`,
		`<a href="https://wiki.example/runbook?a=1&amp;b=2" rel="noopener noreferrer">Runbook</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %s", want)
		}
	}
	if rec.Code != 200 || strings.Contains(body, "javascript:") {
		t.Errorf("job page %d, a javascript: link left followable:\n%s", rec.Code, body)
	}
	if err := checkWellFormed([]byte(body)); err != nil {
		t.Error(err)
	}
}

// Every page template parses (they are parsed on the first UI request, so
// a broken one would otherwise surface only there).
func TestTemplatesParse(t *testing.T) {
	tm := templates()
	for _, name := range []string{"jobs", "login", "error", "done"} {
		if tm[name] == nil || tm[name].Lookup("layout.html") == nil {
			t.Errorf("template %s: %v, want it parsed with the layout", name, tm[name])
		}
	}
	if c := css(); !bytes.Contains(c, []byte(".w100{width:100%}")) {
		t.Errorf("css lacks the width classes: %d bytes", len(c))
	}
}

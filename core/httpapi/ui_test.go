package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/net/html"

	"github.com/drover-org/drover/core/structs"
)

// uiMatrixCases are the web UI's pages in the ACL matrix: each page
// authorizes itself as the API route it mirrors does.
func uiMatrixCases(w *aclWorld, nobody string) []matrixCase {
	return []matrixCase{
		{"/ui/", "GET", "/ui/jobs", nil, "--222"}, // every namespace the caller may list
		{"/ui/", "GET", "/ui/jobs?namespace=team", nil, "--2-2"},
		{"/ui/", "GET", "/ui/jobs/default/web", nil, "---22"},
		{"/ui/", "GET", "/ui/jobs/team/web", nil, "--2-2"},
		{"/ui/", "GET", "/ui/jobs/team/nojob", nil, "--4-4"},
		{"/ui/", "GET", "/ui/allocations/" + w.allocs["team"], nil, "--2-2"},
		{"/ui/", "GET", "/ui/allocations/" + nobody, nil, "44444"},
		{"/ui/", "GET", "/ui/nodes", nil, "---22"},
		{"/ui/", "GET", "/ui/servers", nil, "---22"},
		{"/ui/", "GET", "/ui/login", nil, "22222"},
		{"/ui/", "GET", "/ui/ui.css", nil, "22222"},
		{"/ui/", "GET", "/ui/logs.js", nil, "22222"},
		{"/ui/", "GET", "/ui/settings/tokens", nil, "22222"},
		{"/ui/", "GET", "/ui/evaluations", nil, "--222"}, // read-job anywhere, as GET /v1/evaluations
		{"/ui/", "GET", "/ui/evaluations/" + w.evals["team"], nil, "--2-2"},
		{"/ui/", "GET", "/ui/evaluations/" + nobody, nil, "44444"},
		{"/ui/", "GET", "/ui/deployments", nil, "--222"},
		{"/ui/", "GET", "/ui/deployments/" + nobody, nil, "44444"},
		{"/ui/", "GET", "/ui/volumes", nil, "--222"}, // csi-list-volume anywhere
		{"/ui/", "GET", "/ui/volumes/team/novol", nil, "--4-4"},
		{"/ui/", "GET", "/ui/plugins", nil, "---22"}, // agent:read or plugin:list
		{"/ui/", "GET", "/ui/plugins/csi/noplugin", nil, "----4"},
		{"/ui/", "GET", "/ui/topology", nil, "---22"},                                         // node:read
		{"/ui/", "GET", "/ui/allocations/" + w.allocs["team"] + "/logs?task=t", nil, "--2-2"}, // read-logs
		{"/ui/", "GET", "/ui/actions/job-stop?namespace=team&job=web", nil, "--2-2"},          // submit-job
		{"/ui/", "GET", "/ui/actions/job-dispatch?namespace=team&job=web", nil, "--x-x"},      // dispatch-job; web is not parameterized (400)
	}
}

// page is a parsed UI answer.
type page struct {
	status int
	header http.Header
	body   string
	doc    *html.Node
}

// getPage fetches path as caller and parses the HTML.
func (w *aclWorld) getPage(caller int, path string) page {
	w.t.Helper()
	status, body, hdr := w.doRaw(caller, path)
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		w.t.Fatalf("GET %s: not HTML: %v", path, err)
	}
	return page{status: status, header: hdr, body: body, doc: doc}
}

func (w *aclWorld) doRaw(caller int, path string) (int, string, http.Header) {
	w.t.Helper()
	req, err := http.NewRequest("GET", w.url+path, nil)
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
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// links maps each <a href> of the page to its text.
func (p page) links() map[string]string {
	out := map[string]string{}
	walk(p.doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "a" {
			for _, a := range n.Attr {
				if a.Key == "href" {
					out[a.Val] = strings.TrimSpace(text(n))
				}
			}
		}
	})
	return out
}

// rows is the text of every table body row, cells joined by " | ".
func (p page) rows() []string {
	var out []string
	walk(p.doc, func(n *html.Node) {
		if n.Type != html.ElementNode || n.Data != "tr" || n.Parent == nil || n.Parent.Data != "tbody" {
			return
		}
		var cells []string
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode {
				cells = append(cells, strings.Join(strings.Fields(text(c)), " "))
			}
		}
		out = append(out, strings.Join(cells, " | "))
	})
	return out
}

func (p page) hasRow(prefix string) bool {
	for _, r := range p.rows() {
		if strings.HasPrefix(r, prefix) {
			return true
		}
	}
	return false
}

func walk(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}

// seedUI adds what the pages show beyond the ACL world: a node with
// drivers and a running allocation, a second job, an evaluation with
// placement failures, a deployment and a job whose ID is markup.
func seedUI(t *testing.T, w *aclWorld) (nodeID, allocID string) {
	t.Helper()
	st := w.h.srv.State()
	nodeID = uuid.NewString()
	// Ineligible: the dev server's scheduler would otherwise place the
	// world's sysbatch jobs on it while the test reads its usage.
	node := &structs.Node{ID: nodeID, SecretID: "node-secret-must-not-show", Name: "worker-1", Datacenter: "dc1", NodePool: "default",
		Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingIneligible,
		Attributes:    map[string]string{"kernel.name": "linux", "cpu.arch": "amd64"},
		NodeResources: &structs.NodeResources{Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192}, Disk: structs.NodeDiskResources{DiskMB: 10000}},
		Drivers: map[string]*structs.DriverInfo{
			"raw_exec": {Detected: true, Healthy: true, HealthDescription: "Healthy"},
			"docker":   {Detected: true, Healthy: false, HealthDescription: "Docker daemon unreachable"},
		}}
	if err := st.UpsertNode(200000, node); err != nil {
		t.Fatal(err)
	}
	// The pages' job is seeded into the state store with no pending
	// evaluation, so that the dev server's scheduler never revisits it
	// (it would stop the seeded allocation) while the test reads.
	uiJob := testJob("default", "ui-web")
	uiJob.Type = "sysbatch"
	seedJob(t, st, 199999, uiJob)
	job, err := st.JobByID(nil, "default", "ui-web")
	if err != nil || job == nil {
		t.Fatal("no job ui-web", err)
	}
	allocID = uuid.NewString()
	alloc := &structs.Allocation{ID: allocID, Namespace: "default", JobID: "ui-web", Job: job, TaskGroup: "g", Name: "ui-web.g[0]",
		NodeID: nodeID, NodeName: "worker-1", DesiredStatus: "run", ClientStatus: structs.AllocClientStatusRunning,
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
			"t": {Cpu: structs.AllocatedCpuResources{CpuShares: 1000}, Memory: structs.AllocatedMemoryResources{MemoryMB: 2048}}}},
		TaskStates: map[string]*structs.TaskState{"t": {State: "running", Restarts: 3, Events: []*structs.TaskEvent{
			{Type: "Restarting", Time: time.Unix(1700000000, 0).UnixNano(), DisplayMessage: "Task restarting in 15s"},
			{Type: "Started", Time: time.Unix(1700000010, 0).UnixNano(), DisplayMessage: "Task started by client"},
		}}}}
	seedAlloc(t, st, 200001, alloc)
	// A second job of another type and status, for the filters.
	svc := testJob("default", "api-svc")
	svc.Type = "service" // pending: it has no allocations
	seedJob(t, st, 200002, svc)
	xss := testJob("default", `<script>alert(1)</script>`)
	seedJob(t, st, 200003, xss)
	seedEval(t, st, 200004, &structs.Evaluation{ID: uuid.NewString(), Namespace: "default", JobID: "ui-web", Type: "sysbatch",
		TriggeredBy: "job-register", Status: "complete", CreateIndex: 200004,
		FailedTGAllocs: map[string]*structs.AllocMetric{"g": {
			NodesEvaluated: 8, CoalescedFailures: 1,
			DimensionExhausted: map[string]int{"memory": 3},
			NodesExhausted:     3,
			ConstraintFiltered: map[string]int{"${attr.kernel.name} = windows": 5},
		}}})
	if err := st.UpsertDeployment(200005, &structs.Deployment{ID: uuid.NewString(), Namespace: "default", JobID: "ui-web", Status: "running",
		StatusDescription: "Deployment is running", TaskGroups: map[string]*structs.DeploymentState{"g": {DesiredTotal: 2, PlacedAllocs: 1, HealthyAllocs: 1}}}); err != nil {
		t.Fatal(err)
	}
	return nodeID, allocID
}

func TestUIPages(t *testing.T) {
	w := newACLWorld(t)
	nodeID, allocID := seedUI(t, w)
	webURL := "/ui/jobs/default/ui-web"
	cases := []struct {
		name      string
		caller    int
		path      string
		status    int
		rows      []string // row prefixes that must be there
		noRows    []string // row prefixes that must not
		links     []string // hrefs that must be there
		contains  []string
		forbidden []string // substrings that must not appear
	}{
		{name: "jobs, management sees both namespaces", caller: callerMgmt, path: "/ui/jobs", status: 200,
			rows: []string{"api-svc | service | pending | default | no allocations", "ui-web | sysbatch | running | default | 1 running", "<script>alert(1)</script> | batch"},
			// The world's web jobs are left out of rows: the dev server's
			// scheduler changes their status while the test reads.
			links:     []string{webURL, "/ui/jobs/default/web", "/ui/jobs/team/web", "/ui/jobs/default/api-svc", "/ui/jobs/default/%3Cscript%3Ealert%281%29%3C/script%3E"},
			contains:  []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "<option>batch</option>", "<option>service</option>", "<option>sysbatch</option>"},
			forbidden: []string{"<script>", "<option>system</option>"}},
		{name: "jobs filtered by status and type", caller: callerMgmt, path: "/ui/jobs?status=pending&type=service", status: 200,
			rows: []string{"api-svc | service | pending"}, noRows: []string{"web |", "ui-web |", "<script>"}},
		{name: "jobs filtered by status", caller: callerMgmt, path: "/ui/jobs?status=running", status: 200,
			rows: []string{"ui-web | sysbatch | running"}, noRows: []string{"api-svc"}, contains: []string{`<option selected>running</option>`}},
		{name: "jobs filtered by namespace: the type choices are its jobs' types", caller: callerMgmt, path: "/ui/jobs?namespace=team", status: 200,
			links: []string{"/ui/jobs/team/web"}, noRows: []string{"api-svc"},
			contains: []string{"<option>sysbatch</option>"}, forbidden: []string{"<option>service</option>", "<option>batch</option>"}},
		{name: "jobs by ID prefix", caller: callerMgmt, path: "/ui/jobs?prefix=api", status: 200,
			rows: []string{"api-svc |"}, noRows: []string{"web |"}},
		{name: "jobs, no match", caller: callerMgmt, path: "/ui/jobs?prefix=zzz", status: 200, contains: []string{"No job matches these filters."}},
		{name: "jobs, other-namespace token sees only team", caller: callerOtherNS, path: "/ui/jobs", status: 200,
			links: []string{"/ui/jobs/team/web"}, noRows: []string{"api-svc"}},
		{name: "jobs in a namespace the token may not list", caller: callerReadOnly, path: "/ui/jobs?namespace=team", status: 403,
			contains: []string{"Your token may not list jobs in namespace team."}},
		{name: "jobs, token without list-jobs anywhere", caller: callerNoCap, path: "/ui/jobs", status: 403,
			contains: []string{"Your token may not list jobs in any namespace."}, forbidden: []string{"<tbody>"}},
		{name: "job page", caller: callerReadOnly, path: webURL, status: 200,
			rows:  []string{"g | 1 | ", "0 | no | ", "g | 2 | 0 | 1 | 1 | 0 | no"},
			links: []string{"/ui/allocations/" + allocID, "/ui/nodes/" + nodeID},
			contains: []string{"2 allocations could not be placed: memory exhausted on 3 nodes; constraint ${attr.kernel.name} = windows filtered 5 nodes",
				"Latest deployment", "1 running"}},
		{name: "job page without read-job", caller: callerOtherNS, path: webURL, status: 403,
			contains: []string{"Your token may not read jobs in namespace default."}},
		{name: "unknown job", caller: callerMgmt, path: "/ui/jobs/default/nope", status: 404, contains: []string{"No job nope in namespace default."}},
		{name: "job ID with markup is escaped", caller: callerMgmt, path: "/ui/jobs/default/" + url.PathEscape(`<script>alert(1)</script>`), status: 200,
			contains: []string{"&lt;script&gt;alert(1)&lt;/script&gt;"}, forbidden: []string{"<script>"}},
		{name: "allocation", caller: callerReadOnly, path: "/ui/allocations/" + allocID, status: 200,
			rows:     []string{"2023-11-14 22:13:20 UTC | Restarting | Task restarting in 15s", "2023-11-14 22:13:30 UTC | Started"},
			links:    []string{webURL, "/ui/nodes/" + nodeID},
			contains: []string{"Restarts: 3"}},
		{name: "unknown allocation", caller: callerMgmt, path: "/ui/allocations/" + uuid.NewString(), status: 404},
		{name: "nodes", caller: callerReadOnly, path: "/ui/nodes", status: 200,
			rows:      []string{"worker-1 | ready | ineligible | no | dc1 | 1 | "},
			contains:  []string{"1000 / 4000 MHz (25%)", "2048 / 8192 MB (25%)", `class="fill w25"`},
			forbidden: []string{"node-secret-must-not-show"}},
		{name: "nodes without node:read", caller: callerOtherNS, path: "/ui/nodes", status: 403, contains: []string{"Your token may not read nodes."}},
		{name: "node", caller: callerReadOnly, path: "/ui/nodes/" + nodeID, status: 200,
			rows:      []string{"docker | yes | unhealthy — Docker daemon unreachable", "raw_exec | yes | healthy", "kernel.name | linux"},
			links:     []string{"/ui/allocations/" + allocID, webURL},
			forbidden: []string{"node-secret-must-not-show"}},
		{name: "unknown node", caller: callerMgmt, path: "/ui/nodes/" + uuid.NewString(), status: 404},
		{name: "servers", caller: callerReadOnly, path: "/ui/servers", status: 200, contains: []string{"Leader: "}, rows: []string{" | "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := w.getPage(c.caller, c.path)
			if p.status != c.status {
				t.Fatalf("status %d, want %d\n%s", p.status, c.status, p.body)
			}
			// No inline script anywhere: a page runs at most the UI's
			// own files (live.js refreshes it in place).
			if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") ||
				strings.Contains(csp, "unsafe") || strings.Contains(csp, "script-src") && !strings.Contains(csp, "script-src 'self';") {
				t.Errorf("CSP %q allows script beyond the UI's own files", csp)
			}
			if ct := p.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			for _, r := range c.rows {
				if !p.hasRow(r) {
					t.Errorf("no row starting %q; rows:\n%s", r, strings.Join(p.rows(), "\n"))
				}
			}
			for _, r := range c.noRows {
				if p.hasRow(r) {
					t.Errorf("row starting %q should not be shown", r)
				}
			}
			links := p.links()
			for _, l := range c.links {
				if _, ok := links[l]; !ok {
					t.Errorf("no link to %s; links: %v", l, links)
				}
			}
			for _, s := range c.contains {
				if !strings.Contains(p.body, s) {
					t.Errorf("page lacks %q\n%s", s, p.body)
				}
			}
			for _, s := range c.forbidden {
				// The layout has no script at all, so any <script> is injected.
				if strings.Contains(p.body, s) {
					t.Errorf("page contains %q", s)
				}
			}
		})
	}
}

// TestUILogin: the login form sets an HttpOnly, SameSite=Strict cookie
// that later pages authorize with, a wrong token is refused, and logout
// clears the cookie.
func TestUILogin(t *testing.T) {
	w := newACLWorld(t)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	noRedirect := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) int {
		t.Helper()
		resp, err := noRedirect.Get(w.url + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	post := func(path string, form url.Values) *http.Response {
		t.Helper()
		resp, err := noRedirect.PostForm(w.url+path, form)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}

	if got := get("/ui/jobs/default/web"); got != http.StatusForbidden {
		t.Fatalf("anonymous job page: %d, want 403", got)
	}
	if resp := post("/ui/login", url.Values{"token": {uuid.NewString()}}); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("login with an unknown token: %d, cookies %v; want 403 and no cookie", resp.StatusCode, resp.Cookies())
	}
	if resp := post("/ui/login", url.Values{"token": {""}}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("login without a token: %d, want 400", resp.StatusCode)
	}
	resp := post("/ui/login", url.Values{"token": {w.secrets[callerReadOnly]}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/jobs" {
		t.Fatalf("login: %d to %q, want 303 to /ui/jobs", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies, want 1", len(cookies))
	}
	c := cookies[0]
	if c.Name != "drover_token" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.Secure {
		t.Errorf("cookie %+v: want drover_token, HttpOnly, SameSite=Strict, Path /ui/, not Secure over plain HTTP", c)
	}
	if got := get("/ui/jobs/default/web"); got != http.StatusOK {
		t.Fatalf("job page with the cookie: %d, want 200", got)
	}
	if got := get("/ui/jobs/team/web"); got != http.StatusForbidden {
		t.Fatalf("team job with a default-only cookie: %d, want 403", got)
	}
	resp = post("/ui/logout", nil)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("logout: %d, cookies %v; want 303 and an expired cookie", resp.StatusCode, resp.Cookies())
	}
	if got := get("/ui/jobs/default/web"); got != http.StatusForbidden {
		t.Fatalf("job page after logout: %d, want 403", got)
	}
}

// TestUIOnlyGET: the pages answer nothing but GET (and the login POST).
func TestUIOnlyGET(t *testing.T) {
	w := newWorld(t, false)
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		req, err := http.NewRequest(m, w.url+"/ui/jobs", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /ui/jobs: %d, want 405", m, resp.StatusCode)
		}
	}
	// With ACLs off every page shows without a token.
	if p := w.getPage(callerNone, "/ui/jobs"); p.status != 200 || !p.hasRow("web |") {
		t.Errorf("ACLs off: %d, rows %v", p.status, p.rows())
	}
}

// TestUIStopJob: a job stopped from its page, through the confirmation
// form, is stopped in the server's state; the same form without the
// session's CSRF token is refused and changes nothing.
func TestUIStopJob(t *testing.T) {
	w := newACLWorld(t)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base, _ := url.Parse(w.url + "/ui/")
	jar.SetCookies(base, []*http.Cookie{{Name: "drover_token", Value: w.secrets[callerOtherNS], Path: "/ui/"}})
	resp, err := c.Get(w.url + "/ui/actions/job-stop?namespace=team&job=web")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	_, rest, ok := strings.Cut(string(b), `name="csrf" value="`)
	if resp.StatusCode != 200 || !ok {
		t.Fatalf("confirmation: %d\n%s", resp.StatusCode, b)
	}
	csrf, _, _ := strings.Cut(rest, `"`)
	stopped := func() bool {
		j, err := w.h.srv.State().JobByID(nil, "team", "web")
		if err != nil || j == nil {
			t.Fatalf("job team/web: %v", err)
		}
		return j.Stop
	}
	form := url.Values{"namespace": {"team"}, "job": {"web"}, "csrf": {"forged"}}
	resp, err = c.PostForm(w.url+"/ui/actions/job-stop", form)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || stopped() {
		t.Fatalf("forged form: %d, stopped %v; want 403 and the job running", resp.StatusCode, stopped())
	}
	form.Set("csrf", csrf)
	resp, err = c.PostForm(w.url+"/ui/actions/job-stop", form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "Job web is stopping.") || !stopped() {
		t.Fatalf("confirmed stop: %d, stopped %v\n%s", resp.StatusCode, stopped(), b)
	}
}

// TestUILogsThroughTheAPI: the logs page and its followed stream read
// through the agent's own log route, so the client's log reaches them
// (escaped on the page, as sent in the stream).
func TestUILogsThroughTheAPI(t *testing.T) {
	const allocID = "aaaa1111-0000-0000-0000-000000000000"
	client := &fakeClient{allocID: allocID, chunks: []string{"hello <from> the task\n"}}
	api, fake := newTestAPI(t, Config{Client: client})
	job := testJob("default", "web")
	seedJob(t, fake.store, 10, job)
	stored, err := fake.store.JobByID(nil, "default", "web")
	if err != nil || stored == nil {
		t.Fatal("no job", err)
	}
	seedAlloc(t, fake.store, 11, &structs.Allocation{ID: allocID, Namespace: "default", JobID: "web", Job: stored,
		TaskGroup: "g", Name: "web.g[0]", DesiredStatus: "run", ClientStatus: "running"})

	rec := do(t, api.Handler(), "GET", "/ui/allocations/"+allocID+"/logs?task=t&type=stderr", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "hello &lt;from&gt; the task\n</pre>") {
		t.Fatalf("logs page: %d\n%s", rec.Code, rec.Body.String())
	}
	if got := client.lastArgs(); fmt.Sprint(got) != fmt.Sprint([]any{allocID, "t", "stderr", "end", int64(64 << 10), false}) {
		t.Errorf("client asked %v, want the stderr tail of 64 KiB", got)
	}

	ts := httptest.NewServer(api.Handler())
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", ts.URL+"/ui/allocations/"+allocID+"/logs/stream?task=t&type=stdout&offset=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(resp.Body, buf, len("hello <from> the task\n"))
	if err != nil || string(buf[:n]) != "hello <from> the task\n" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("stream: %q, %v, %s", buf[:n], err, resp.Header.Get("Content-Type"))
	}
	if got := client.lastArgs(); got[5] != true {
		t.Errorf("the stream did not follow: %v", got)
	}
	cancel() // the fake client returns once the request ends
}

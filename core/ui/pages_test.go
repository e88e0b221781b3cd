package ui

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// fakeActions records the UI's writes and spends one-time tokens once.
type fakeActions struct {
	mu    sync.Mutex
	calls []string
	// otts maps unspent one-time secrets to the token they stand for.
	otts map[string]string
	err  error
}

func (f *fakeActions) record(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return f.err
}

func (f *fakeActions) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeActions) ExchangeOneTimeToken(_ context.Context, secret string) (*structs.ACLToken, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok, ok := f.otts[secret]
	if !ok {
		return nil, structs.NewError(structs.ErrPermissionDenied, "Permission denied")
	}
	delete(f.otts, secret)
	return &structs.ACLToken{SecretID: tok}, nil
}

func (f *fakeActions) StopJob(_ context.Context, ns, id string, purge bool) (*structs.JobDeregisterResponse, error) {
	if purge {
		return &structs.JobDeregisterResponse{}, f.record("purge " + ns + "/" + id)
	}
	return &structs.JobDeregisterResponse{EvalID: "55555555-0000-0000-0000-000000000000"}, f.record("stop " + ns + "/" + id)
}

func (f *fakeActions) ForcePeriodic(_ context.Context, ns, id string) (*structs.PeriodicForceResponse, error) {
	return &structs.PeriodicForceResponse{EvalID: "66666666-0000-0000-0000-000000000000"}, f.record("force " + ns + "/" + id)
}

func (f *fakeActions) DispatchJob(_ context.Context, ns string, req *structs.JobDispatchRequest) (*structs.JobDispatchResponse, error) {
	if req.Meta["who"] == "" {
		return nil, structs.NewError(structs.ErrInvalid, "dispatch: missing required meta key \"who\"")
	}
	return &structs.JobDispatchResponse{DispatchedJobID: req.JobID + "/dispatch-1"},
		f.record("dispatch " + ns + "/" + req.JobID + " who=" + req.Meta["who"] + " payload=" + string(req.Payload))
}

func (f *fakeActions) PromoteDeployment(_ context.Context, id string) (*structs.DeploymentUpdateResponse, error) {
	return &structs.DeploymentUpdateResponse{}, f.record("promote " + id)
}

func (f *fakeActions) FailDeployment(_ context.Context, id string) (*structs.DeploymentUpdateResponse, error) {
	return &structs.DeploymentUpdateResponse{}, f.record("fail " + id)
}

func (f *fakeActions) UpdateNodeDrain(_ context.Context, nodeID string, spec *structs.DrainSpec, markEligible bool) (*structs.NodeEligibilityUpdateResponse, error) {
	if spec == nil {
		return &structs.NodeEligibilityUpdateResponse{}, f.record(fmt.Sprintf("drain-stop %s eligible=%v", nodeID, markEligible))
	}
	return &structs.NodeEligibilityUpdateResponse{EvalIDs: []string{"77777777-0000-0000-0000-000000000000"}},
		f.record(fmt.Sprintf("drain %s deadline=%s ignore-system=%v", nodeID, spec.Deadline, spec.IgnoreSystemJobs))
}

func (f *fakeActions) UpdateNodeEligibility(_ context.Context, nodeID, elig string) (*structs.NodeEligibilityUpdateResponse, error) {
	return &structs.NodeEligibilityUpdateResponse{}, f.record("eligibility " + nodeID + " " + elig)
}

// fakeLogs serves one log per alloc/task/type, checking the secret as the
// API would: only "writer" may read logs.
type fakeLogs map[string]string

func (f fakeLogs) TaskLogs(_ context.Context, secret, allocID, task, logType, origin string, offset int64, _ bool, w io.Writer) error {
	if secret != "writer" && secret != "" { // "" is the caller with ACLs off
		return structs.NewError(structs.ErrPermissionDenied, "Permission denied")
	}
	text, ok := f[allocID+"/"+task+"/"+logType]
	if !ok {
		return structs.NewError(structs.ErrNotFound, "no log")
	}
	if origin == "end" && offset < int64(len(text)) {
		text = text[int64(len(text))-offset:]
	}
	_, err := io.WriteString(w, text)
	return err
}

var worldPolicies = map[string]string{
	"reader":  `namespace "default" { policy = "read" }`,
	"writer":  `namespace "default" { policy = "write" }`,
	"team":    `namespace "team" { policy = "read" }`,
	"nodes":   `node { policy = "read" }`,
	"nodew":   `node { policy = "write" }`,
	"plugins": `plugin { policy = "read" }` + "\n" + `agent { policy = "read" }`,
	"agent":   `agent { policy = "read" }`,
}

func newWorldUI(t testing.TB, st *state.StateStore, fa *fakeActions) *UI {
	t.Helper()
	res := fakeResolver{"": acl.Compile(nil)}
	for name, rules := range worldPolicies {
		res[name] = compile(t, rules)
	}
	return New(Config{State: func() *state.StateStore { return st }, Region: "global", Resolver: res, Actions: fa,
		Token: func(r *http.Request) string { return r.Header.Get("X-Nomad-Token") },
		Logs:  fakeLogs{allocRunning + "/t/stdout": "line one\nline <two>\n", allocRunning + "/t/stderr": "oops\n"},
		AgentPlugins: func() []structs.AgentPlugin {
			return []structs.AgentPlugin{
				{Name: "system", Kind: "scheduler", Builtin: true, Version: "0.4.0", Health: structs.AgentPluginHealthy,
					JobTypes: []structs.AgentJobType{{Name: "system"}}},
				{Name: "gpu-batch", Kind: "scheduler", Path: "/opt/plugins/gpu-batch", Version: "1.1.0", Health: structs.AgentPluginRestarting, Restarts: 2},
			}
		}})
}

// TestPages: every page renders the right data for a token that may see
// it, says why to one that may not, and answers 404 for an unknown ID.
func TestPages(t *testing.T) {
	st := benchWorld(t, 12, 4)
	u := newWorldUI(t, st, &fakeActions{})
	cases := []struct {
		name, path, token string
		status            int
		want, notWant     []string
	}{
		// Evaluations.
		{"evals list", "/ui/evaluations", "reader", 200, []string{
			`<a href="/ui/evaluations/` + worldEvalID(10) + `">ee000010</a>`,
			"Group worker: 2 allocations could not be placed: memory exhausted on 2 nodes; constraint ${attr.kernel.name} = windows filtered 1 node",
		}, []string{"eeteam00"}},
		{"evals of the team only", "/ui/evaluations", "team", 200, []string{"eeteam00"}, []string{"ee000001"}},
		{"evals filtered by job", "/ui/evaluations?prefix=job-0003", "reader", 200, []string{"ee000003"}, []string{"ee000004"}},
		{"evals filtered to nothing", "/ui/evaluations?status=blocked", "reader", 200, []string{"No evaluation matches the filter."}, nil},
		{"evals denied", "/ui/evaluations", "nodes", 403, []string{"Your token may not read evaluations in any namespace (it needs read-job)."}, nil},
		{"eval", "/ui/evaluations/" + worldEvalID(0), "reader", 200, []string{
			"<h3 id=\"fail-worker\">Group worker</h3>", "3 nodes were evaluated", "1 node was filtered out by constraints or class",
			"2 nodes were too full (resources exhausted)", `dimension &#34;memory&#34; exhausted on 2 nodes`,
			`constraint &#34;${attr.kernel.name} = windows&#34; filtered 1 node`, "datacenter dc1: 3 nodes available",
			"Still queued: 2 of group worker.", `<a href="/ui/jobs/default/job-0000">job-0000</a>`,
		}, nil},
		{"eval without failures", "/ui/evaluations/" + worldEvalID(1), "reader", 200, []string{"Every allocation this evaluation asked for was placed."}, nil},
		{"eval in another namespace", "/ui/evaluations/" + evalTeam, "reader", 403, []string{"Your token may not read evaluations in namespace team (it needs read-job)."}, nil},
		{"eval unknown", "/ui/evaluations/nosuch", "reader", 404, []string{"No evaluation nosuch."}, nil},

		// Deployments.
		{"deployments", "/ui/deployments", "reader", 200, []string{`<a href="/ui/deployments/` + worldDepID(0) + `">dd000000</a>`, "web: 0 / 2", "web: 2 / 2"}, []string{"ddteam00"}},
		{"active deployments", "/ui/deployments?active=1", "reader", 200, []string{"dd000000"}, []string{"dd000001"}},
		{"deployments denied", "/ui/deployments", "", 403, []string{"Your token may not read deployments in any namespace (it needs read-job)."}, nil},
		{"deployment to promote", "/ui/deployments/" + worldDepID(0), "writer", 200, []string{
			"<td>1 of 1</td>", "Deployment is running but requires manual promotion",
			`href="/ui/actions/deployment-promote?deployment=` + worldDepID(0) + `"`, `href="/ui/actions/deployment-fail?deployment=` + worldDepID(0) + `"`,
			"<td>1</td><td>no</td>", "Allocations (2)",
			"<td>yes</td><td><span class=\"status healthy\">healthy</span></td>", "<td>no</td><td>not yet known</td>",
		}, nil},
		{"deployment read only", "/ui/deployments/" + worldDepID(0), "reader", 200, []string{"Your token may not promote or fail deployments in namespace default (it needs submit-job)."}, []string{"/ui/actions/"}},
		{"deployment done has no actions", "/ui/deployments/" + worldDepID(1), "writer", 200, []string{"successful"}, []string{"/ui/actions/"}},
		{"deployment in another namespace", "/ui/deployments/" + depTeam, "reader", 403, []string{"Your token may not read deployments in namespace team"}, nil},
		{"deployment unknown", "/ui/deployments/nosuch", "reader", 404, []string{"No deployment nosuch."}, nil},

		// Volumes.
		{"volumes", "/ui/volumes", "reader", 200, []string{`<a href="/ui/volumes/default/vol-000">vol-000</a>`, "vol-009", "<td>0 / 1 / 1</td>", "<td>0 / 0 / 0</td>"}, []string{"vol-team"}},
		{"volumes denied", "/ui/volumes", "nodes", 403, []string{"Your token may not list volumes in any namespace (it needs csi-list-volume)."}, nil},
		{"volume", "/ui/volumes/default/vol-000", "reader", 200, []string{
			"Claims (1)", `<a href="/ui/allocations/` + allocRunning + `">00000000</a>`, "<td>write (write)</td><td>taken</td>",
			"Past claims being released (1)", "<td>past (write)</td><td>node-detached</td>", "hostpath.csi.k8s.io 1.2.0",
		}, nil},
		{"volume in another namespace", "/ui/volumes/team/vol-team", "reader", 403, []string{"Your token may not read volumes in namespace team (it needs csi-read-volume)."}, nil},
		{"volume unknown", "/ui/volumes/default/nosuch", "reader", 404, []string{"No volume nosuch in namespace default."}, nil},

		// Plugins.
		{"plugins", "/ui/plugins", "plugins", 200, []string{
			"<th scope=\"row\">system</th><td>scheduler</td><td>0.4.0</td>", "<code>/opt/plugins/gpu-batch</code>", "restarting",
			`<a href="/ui/plugins/csi/hp">hp</a>`, "<td>not required</td><td>1 healthy</td>",
		}, nil},
		{"plugins without plugin:read", "/ui/plugins", "agent", 200, []string{"0.4.0", "Your token may not list CSI plugins (it needs plugin:list)."}, []string{"/ui/plugins/csi/hp"}},
		{"plugins denied", "/ui/plugins", "reader", 403, []string{"Your token may not read this agent&#39;s plugins (it needs agent:read) nor list CSI plugins (plugin:list)."}, nil},
		{"csi plugin", "/ui/plugins/csi/hp", "plugins", 200, []string{"Node instances (1)", `<a href="/ui/nodes/node-000">node-000</a>`, "No controller instance is running.", "11 more volumes are in namespaces"}, nil},
		{"csi plugin unknown", "/ui/plugins/csi/nosuch", "plugins", 404, []string{"No CSI plugin nosuch."}, nil},
		{"csi plugin denied", "/ui/plugins/csi/hp", "reader", 403, []string{"Your token may not read CSI plugins (it needs plugin:read)."}, nil},

		// Topology.
		{"topology", "/ui/topology", "nodes", 200, []string{
			"100 nodes, 30 live allocations.", "Datacenter dc1 (50 nodes)", "Datacenter dc2 (50 nodes)",
			`<a href="/ui/nodes/node-000">n000</a>`, `aria-label="Memory: 512 of 16384 MB used"`, `aria-label="CPU: 800 of 20000 MHz used"><span class="fill w4">`,
		}, nil},
		{"topology denied", "/ui/topology", "reader", 403, []string{"Your token may not read nodes."}, nil},

		// The job page's additions.
		{"periodic job", "/ui/jobs/default/nightly", "writer", 200, []string{
			"Periodic launches", `<a href="/ui/jobs/default/nightly/periodic-1700000000">nightly/periodic-1700000000</a>`,
			`href="/ui/actions/job-periodic-force?job=nightly&amp;namespace=default"`, `href="/ui/actions/job-stop?job=nightly&amp;namespace=default"`,
			`href="/ui/actions/job-purge?job=nightly&amp;namespace=default"`,
		}, []string{"job-dispatch"}},
		{"parameterized job", "/ui/jobs/default/batchp", "writer", 200, []string{
			"Dispatched jobs", "batchp/dispatch-1700000000-abcd1234", `href="/ui/actions/job-dispatch?job=batchp&amp;namespace=default"`,
		}, nil},
		{"child job", "/ui/jobs/default/nightly/periodic-1700000000", "reader", 200, []string{`<dt>Parent</dt><dd><a href="/ui/jobs/default/nightly">nightly</a>`}, nil},
		{"job read only", "/ui/jobs/default/batchp", "reader", 200, []string{
			"Your token may not stop, purge or launch this job (it needs submit-job in namespace default).",
			"Your token may not dispatch this job (it needs dispatch-job in namespace default).",
		}, []string{"/ui/actions/"}},
		{"job links its evaluations", "/ui/jobs/default/job-0000", "reader", 200, []string{`<a href="/ui/evaluations/` + worldEvalID(0) + `"><code>ee000000</code></a>`, `<a href="/ui/deployments/` + worldDepID(0) + `">`}, nil},

		// Logs.
		{"alloc links its logs", "/ui/allocations/" + allocRunning, "reader", 200, []string{`href="/ui/allocations/` + allocRunning + `/logs?task=t&amp;type=stderr"`}, nil},
		{"logs", "/ui/allocations/" + allocRunning + "/logs?task=t&type=stdout", "writer", 200, []string{
			"line one\nline &lt;two&gt;\n</pre>", `data-stream="/ui/allocations/` + allocRunning + `/logs/stream?task=t&amp;type=stdout"`,
			`<script src="/ui/logs.js" defer></script>`, "All of stdout.",
		}, nil},
		{"logs default to the first task's stdout", "/ui/allocations/" + allocRunning + "/logs", "writer", 200, []string{"line one"}, nil},
		{"stderr", "/ui/allocations/" + allocRunning + "/logs?task=t&type=stderr", "writer", 200, []string{"oops\n</pre>"}, nil},
		{"no log yet", "/ui/allocations/" + allocPast + "/logs?task=t", "writer", 200, []string{"The task has written no stdout yet"}, nil},
		{"logs denied", "/ui/allocations/" + allocRunning + "/logs?task=t", "reader", 403, []string{"Your token may not read logs in namespace default (it needs read-logs)."}, nil},
		{"logs of an unknown task", "/ui/allocations/" + allocRunning + "/logs?task=nosuch", "writer", 404, []string{"has no task nosuch."}, nil},
		{"logs of a bad type", "/ui/allocations/" + allocRunning + "/logs?task=t&type=stdin", "writer", 400, []string{"The log type must be stdout or stderr"}, nil},
		{"logs of an unknown alloc", "/ui/allocations/nosuch/logs", "writer", 404, []string{"No allocation nosuch."}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := get(u, c.path, c.token)
			body := rec.Body.String()
			if rec.Code != c.status {
				t.Fatalf("%d, want %d\n%s", rec.Code, c.status, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(body, w) {
					t.Errorf("page has %q", w)
				}
			}
			if err := checkWellFormed(rec.Body.Bytes()); err != nil {
				t.Errorf("the page is not well formed: %v", err)
			}
			// Pages that refresh themselves (live.js) and the logs page
			// run the UI's own script; every other page none.
			wantCSP := csp
			if strings.Contains(c.path, "/logs") && c.status == 200 || strings.Contains(body, `<script src="/ui/live.js" defer></script>`) {
				wantCSP = scriptCSP
			}
			if got := rec.Header().Get("Content-Security-Policy"); got != wantCSP {
				t.Errorf("CSP %q, want %q", got, wantCSP)
			}
			if t.Failed() {
				t.Log(body)
			}
		})
	}
}

// TestOneTimeTokenExchange: the address of drover ui -authenticate signs
// in once; a second use, or a secret that is no one-time token, is
// refused in words; the secret is never echoed.
func TestOneTimeTokenExchange(t *testing.T) {
	const ott = "7d1f3c2a-0000-4000-8000-000000000001"
	fa := &fakeActions{otts: map[string]string{ott: "reader"}}
	u := newWorldUI(t, benchWorld(t, 1, 2), fa)
	cases := []struct {
		name, path string
		status     int
		location   string
		cookie     string // the session cookie's value, "" for none
		want       string
	}{
		{"first use signs in", "/ui/settings/tokens?ott=" + ott, 303, "/ui/jobs", "reader", ""},
		{"second use is refused", "/ui/settings/tokens?ott=" + ott, 403, "", "", "This one-time token was already used or has expired"},
		{"not a one-time token", "/ui/settings/tokens?ott=hello", 400, "", "", "The address does not hold a one-time token"},
		{"empty", "/ui/settings/tokens?ott=", 400, "", "", "The address does not hold a one-time token"},
		{"unknown", "/ui/settings/tokens?ott=7d1f3c2a-0000-4000-8000-000000000002", 403, "", "", "already used or has expired"},
		{"no ott shows the form", "/ui/settings/tokens", 200, "", "", `<label for="token">Token secret ID</label>`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := get(u, c.path, "")
			if rec.Code != c.status || rec.Header().Get("Location") != c.location {
				t.Fatalf("%d to %q, want %d to %q\n%s", rec.Code, rec.Header().Get("Location"), c.status, c.location, rec.Body.String())
			}
			var got *http.Cookie
			for _, ck := range rec.Result().Cookies() {
				if ck.Name == cookieName {
					got = ck
				}
			}
			switch {
			case c.cookie == "" && got != nil:
				t.Errorf("set the session cookie %+v", got)
			case c.cookie != "" && (got == nil || got.Value != c.cookie || !got.HttpOnly || got.SameSite != http.SameSiteStrictMode || got.MaxAge != 0 || !got.Expires.IsZero() || got.Path != "/ui/"):
				t.Errorf("session cookie %+v, want %q HttpOnly SameSite=Strict without expiry on /ui/", got, c.cookie)
			}
			if !strings.Contains(rec.Body.String(), c.want) {
				t.Errorf("body lacks %q\n%s", c.want, rec.Body.String())
			}
			if strings.Contains(rec.Body.String(), ott) {
				t.Error("the page echoes the one-time secret")
			}
			if got := rec.Header().Get("Referrer-Policy"); got != "no-referrer" {
				t.Errorf("Referrer-Policy %q, want no-referrer", got)
			}
		})
	}
}

func TestOneTimeTokenNext(t *testing.T) {
	cases := []struct{ next, want string }{
		{"/ui/jobs/default/web", "/ui/jobs/default/web"},
		{"", "/ui/jobs"},
		{"https://evil.example/ui/", "/ui/jobs"},
		{"//evil.example/ui/", "/ui/jobs"},
		{"/ui/\\evil", "/ui/jobs"},
		{"/v1/jobs", "/ui/jobs"},
	}
	for _, c := range cases {
		t.Run(c.next, func(t *testing.T) {
			const ott = "7d1f3c2a-0000-4000-8000-000000000003"
			u := newWorldUI(t, benchWorld(t, 0, 0), &fakeActions{otts: map[string]string{ott: "reader"}})
			rec := get(u, "/ui/settings/tokens?"+url.Values{"ott": {ott}, "next": {c.next}}.Encode(), "")
			if rec.Code != 303 || rec.Header().Get("Location") != c.want {
				t.Fatalf("%d to %q, want 303 to %q", rec.Code, rec.Header().Get("Location"), c.want)
			}
		})
	}
}

// TestOneTimeTokenWithoutACLs: with ACLs off the address just says no
// token is needed.
func TestOneTimeTokenWithoutACLs(t *testing.T) {
	st := benchWorld(t, 0, 0)
	u := New(Config{State: func() *state.StateStore { return st }, Actions: &fakeActions{}})
	rec := get(u, "/ui/settings/tokens?ott=7d1f3c2a-0000-4000-8000-000000000001", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "ACLs are not enabled on this cluster: the one-time token is not needed.") {
		t.Fatalf("%d\n%s", rec.Code, rec.Body.String())
	}
}

func TestLogout(t *testing.T) {
	u := newWorldUI(t, benchWorld(t, 0, 0), &fakeActions{})
	req := httptest.NewRequest("POST", "/ui/logout", nil)
	req.AddCookie(newCookie("reader"))
	rec := httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	cs := rec.Result().Cookies()
	if rec.Code != 303 || len(cs) != 1 || cs[0].Name != cookieName || cs[0].MaxAge >= 0 || cs[0].Value != "" {
		t.Fatalf("%d, cookies %+v: want the session cookie deleted", rec.Code, cs)
	}
	// Another site may not sign the browser out.
	req = httptest.NewRequest("POST", "/ui/logout", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec = httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	if rec.Code != 403 || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("cross-site sign-out: %d, cookies %v; want 403 and none", rec.Code, rec.Result().Cookies())
	}
}

// TestLogStream: the followed log is plain text, authorized like the
// page, with a clear refusal for bad input.
func TestLogStream(t *testing.T) {
	u := newWorldUI(t, benchWorld(t, 1, 2), &fakeActions{})
	base := "/ui/allocations/" + allocRunning + "/logs/stream?task=t&type=stdout"
	cases := []struct {
		name, path, token string
		status            int
		want              string
	}{
		{"follows", base + "&offset=0", "writer", 200, ""},
		{"from an offset before the end", base + "&offset=5", "writer", 200, "two>\n"},
		{"bad offset", base + "&offset=-1", "writer", 400, "offset must be a non-negative number of bytes"},
		{"read-only token", base, "reader", 403, "Your token may not read logs in namespace default (it needs read-logs)."},
		{"unknown allocation", "/ui/allocations/nosuch/logs/stream?task=t", "writer", 404, "No allocation nosuch."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := get(u, c.path, c.token)
			if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
				t.Fatalf("%d, want %d with %q\n%s", rec.Code, c.status, c.want, rec.Body.String())
			}
			if c.status == 200 {
				if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
				if c.want == "" && rec.Body.Len() != 0 {
					t.Errorf("offset 0 from the end sent %q, want only what comes next", rec.Body.String())
				}
			}
		})
	}
}

// TestLogsPageTail: without script the page shows the end of a long log,
// says so, and never starts inside a character.
func TestLogsPageTail(t *testing.T) {
	st := benchWorld(t, 1, 2)
	long := strings.Repeat("é", tailBytes) // two bytes each
	res := fakeResolver{"writer": compile(t, worldPolicies["writer"])}
	u := New(Config{State: func() *state.StateStore { return st }, Resolver: res,
		Token: func(r *http.Request) string { return r.Header.Get("X-Nomad-Token") },
		Logs:  fakeLogs{allocRunning + "/t/stdout": "x" + long + "y"}}) // the last 64 KiB start inside an é
	rec := get(u, "/ui/allocations/"+allocRunning+"/logs?task=t", "writer")
	body := rec.Body.String()
	if rec.Code != 200 || !strings.Contains(body, "The last 64 KiB of stdout.") {
		t.Fatalf("%d\n%.300s", rec.Code, body)
	}
	start := strings.Index(body, `data-stream=`)
	text := body[strings.Index(body[start:], ">")+start+1 : strings.Index(body, "</pre>")]
	if !utf8.ValidString(text) || strings.Contains(text, "x") || !strings.HasSuffix(text, "éy") || len(text) != tailBytes-1 {
		t.Errorf("tail of %d bytes (valid UTF-8 %v), want the last %d bytes from the first whole é", len(text), utf8.ValidString(text), tailBytes-1)
	}
}

package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

var csrfInput = regexp.MustCompile(`<input type="hidden" name="csrf" value="([0-9a-f]{64})">`)

// confirm opens an action's confirmation page as token and returns the
// CSRF cookie it set and the token in its form.
func confirm(t *testing.T, u http.Handler, path, token string) (*http.Cookie, string) {
	t.Helper()
	rec := get(u, path, token)
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body.String())
	}
	m := csrfInput.FindStringSubmatch(rec.Body.String())
	var c *http.Cookie
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == csrfCookie {
			c = ck
		}
	}
	if m == nil || c == nil || c.Value != m[1] || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.MaxAge != 0 {
		t.Fatalf("GET %s: CSRF cookie %+v, form token %v: want the same token in an HttpOnly SameSite=Strict session cookie and the form", path, c, m)
	}
	return c, m[1]
}

func post(u http.Handler, path, token string, form url.Values, cookie *http.Cookie, header map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Nomad-Token", token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	return rec
}

// TestActions: each action confirms first, then does its write once the
// form's CSRF token matches, with the caller's ACL checked as the API
// checks it.
func TestActions(t *testing.T) {
	job := url.Values{"namespace": {"default"}, "job": {"job-0001"}}
	dep := url.Values{"deployment": {worldDepID(0)}}
	with := func(v url.Values, kv ...string) url.Values {
		out := url.Values{}
		for k, vs := range v {
			out[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	cases := []struct {
		name, action string
		target       url.Values
		token        string
		status       int
		want         string
		call         string // the write made, "" for none
	}{
		{"stop", "job-stop", job, "writer", 200, "Job job-0001 is stopping.", "stop default/job-0001"},
		{"purge", "job-purge", job, "writer", 200, "Job job-0001 was purged.", "purge default/job-0001"},
		{"force periodic", "job-periodic-force", with(job, "job", "nightly"), "writer", 200, "Launched an instance of periodic job nightly.", "force default/nightly"},
		{"dispatch", "job-dispatch", with(job, "job", "batchp", "meta", "who = world\n\n", "payload", "hello"), "writer", 200,
			"Dispatched job batchp/dispatch-1.", "dispatch default/batchp who=world payload=hello"},
		{"dispatch refused by the server", "job-dispatch", with(job, "job", "batchp"), "writer", 400, `missing required meta key &#34;who&#34;`, ""},
		{"dispatch with bad meta", "job-dispatch", with(job, "job", "batchp", "meta", "who"), "writer", 400, "Meta line 1: write key=value.", ""},
		{"promote", "deployment-promote", dep, "writer", 200, "Deployment dd000000 was promoted.", "promote " + worldDepID(0)},
		{"fail", "deployment-fail", dep, "writer", 200, "Deployment dd000000 was marked as failed.", "fail " + worldDepID(0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fa := &fakeActions{}
			u := newWorldUI(t, benchWorld(t, 2, 2), fa)
			q := url.Values{}
			for _, k := range []string{"namespace", "job", "deployment"} {
				if v := c.target.Get(k); v != "" {
					q.Set(k, v)
				}
			}
			cookie, tok := confirm(t, u, "/ui/actions/"+c.action+"?"+q.Encode(), c.token)
			rec := post(u, "/ui/actions/"+c.action, c.token, with(c.target, csrfField, tok), cookie, map[string]string{"Origin": "http://example.com"})
			if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
				t.Fatalf("%d, want %d with %q\n%s", rec.Code, c.status, c.want, rec.Body.String())
			}
			var want []string
			if c.call != "" {
				want = []string{c.call}
			}
			if got := fa.called(); !slices.Equal(got, want) {
				t.Errorf("writes %q, want %q", got, want)
			}
		})
	}
}

// TestActionRefusals: a forged or unauthorized POST, or an action that
// does not apply, writes nothing and says why.
func TestActionRefusals(t *testing.T) {
	fa := &fakeActions{}
	u := newWorldUI(t, benchWorld(t, 2, 2), fa)
	cookie, tok := confirm(t, u, "/ui/actions/job-stop?namespace=default&job=job-0001", "writer")
	form := url.Values{"namespace": {"default"}, "job": {"job-0001"}, csrfField: {tok}}
	other := &http.Cookie{Name: csrfCookie, Value: strings.Repeat("0", 64)}
	cases := []struct {
		name, path, token string
		form              url.Values
		cookie            *http.Cookie
		header            map[string]string
		status            int
		want              string
	}{
		{"no CSRF cookie", "/ui/actions/job-stop", "writer", form, nil, nil, 403, "The form has no session"},
		{"CSRF token of another session", "/ui/actions/job-stop", "writer", form, other, nil, 403, "does not match"},
		{"no CSRF field", "/ui/actions/job-stop", "writer", url.Values{"namespace": {"default"}, "job": {"job-0001"}}, cookie, nil, 403, "does not match"},
		{"cross-site origin", "/ui/actions/job-stop", "writer", form, cookie, map[string]string{"Origin": "https://evil.example"}, 403, "sent from another site"},
		{"cross-site fetch", "/ui/actions/job-stop", "writer", form, cookie, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "sent from another site"},
		{"read-only token", "/ui/actions/job-stop", "reader", form, cookie, nil, 403, "Your token may not stop jobs in namespace default (it needs submit-job)."},
		{"other namespace", "/ui/actions/deployment-fail", "writer", url.Values{"deployment": {depTeam}, csrfField: {tok}}, cookie, nil, 403,
			"Your token may not fail deployments in namespace team (it needs submit-job)."},
		{"unknown job", "/ui/actions/job-stop", "writer", url.Values{"namespace": {"default"}, "job": {"nosuch"}, csrfField: {tok}}, cookie, nil, 404, "No job nosuch in namespace default."},
		{"no job named", "/ui/actions/job-stop", "writer", url.Values{csrfField: {tok}}, cookie, nil, 400, "the job parameter is missing"},
		{"unknown action", "/ui/actions/job-explode", "writer", form, cookie, nil, 404, "No action job-explode."},
		{"not periodic", "/ui/actions/job-periodic-force", "writer", form, cookie, nil, 400, "Job job-0001 is not periodic"},
		{"not parameterized", "/ui/actions/job-dispatch", "writer", form, cookie, nil, 400, "Job job-0001 is not parameterized"},
		{"finished deployment", "/ui/actions/deployment-promote", "writer", url.Values{"deployment": {worldDepID(1)}, csrfField: {tok}}, cookie, nil, 409, "is successful, no longer active"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := post(u, c.path, c.token, c.form, c.cookie, c.header)
			if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
				t.Fatalf("%d, want %d with %q\n%s", rec.Code, c.status, c.want, rec.Body.String())
			}
		})
	}
	if got := fa.called(); len(got) != 0 {
		t.Errorf("refused requests wrote %q", got)
	}
	// The confirmation page refuses the same way before any form.
	rec := get(u, "/ui/actions/job-stop?namespace=default&job=job-0001", "reader")
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), "Your token may not stop jobs") || csrfInput.MatchString(rec.Body.String()) {
		t.Errorf("confirmation for a read-only token: %d\n%s", rec.Code, rec.Body.String())
	}
}

// TestConfirmationPage: the page says what confirming does, offers a
// labelled form and a way back, and keeps the CSRF token of the session.
func TestConfirmationPage(t *testing.T) {
	u := newWorldUI(t, benchWorld(t, 2, 2), &fakeActions{})
	req := httptest.NewRequest("GET", "/ui/actions/job-dispatch?namespace=default&job=batchp", nil)
	req.Header.Set("X-Nomad-Token", "writer")
	session := strings.Repeat("ab", 32)
	req.AddCookie(&http.Cookie{Name: csrfCookie, Value: session})
	rec := httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	body := rec.Body.String()
	for _, want := range []string{
		"Dispatches an instance of parameterized job batchp", `<label for="meta">`, `<textarea id="meta" name="meta"`,
		`<label for="payload">`, `<button type="submit">Dispatch</button>`, `<a href="/ui/jobs/default/batchp">Cancel</a>`,
		`name="csrf" value="` + session + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if len(rec.Result().Cookies()) != 0 {
		t.Errorf("a session that has a CSRF cookie got a new one: %v", rec.Result().Cookies())
	}
}

// TestNodeActions: drain (each deadline choice, system jobs kept or
// not), stop drain (eligible again or kept ineligible) and the
// eligibility toggle confirm first, then write once the CSRF token
// matches, with node:write checked as the API's node writes check it.
func TestNodeActions(t *testing.T) {
	draining := func(st *state.StateStore) {
		ds := &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}, StartedAt: time.Unix(1700000000, 0)}
		if err := st.UpdateNodeDrain(200000, "node-001", ds, false, 1700000000, nil); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, action string
		form         url.Values
		setup        func(*state.StateStore)
		status       int
		want         string
		call         string
	}{
		{"drain with the default deadline", "node-drain", url.Values{"deadline": {"1h"}}, nil, 200,
			"Node n001 is draining (deadline in 1 hour (the default)).", "drain node-001 deadline=1h0m0s ignore-system=false"},
		{"drain keeping system jobs", "node-drain", url.Values{"deadline": {"10m"}, "ignore_system": {"1"}}, nil, 200,
			"system jobs stay", "drain node-001 deadline=10m0s ignore-system=true"},
		{"drain without deadline", "node-drain", url.Values{"deadline": {"none"}}, nil, 200, "no deadline", "drain node-001 deadline=0s ignore-system=false"},
		{"forced drain", "node-drain", url.Values{"deadline": {"force"}}, nil, 200, "now: stop every allocation", "drain node-001 deadline=-1ns ignore-system=false"},
		{"drain with a deadline not offered", "node-drain", url.Values{"deadline": {"999h"}}, nil, 400,
			"Deadline: &#34;999h&#34; is not one of the choices (1h, 10m, 4h, 24h, none, force).", ""},
		{"drain without a deadline field", "node-drain", url.Values{}, nil, 400, "Deadline: &#34;&#34; is not one of the choices", ""},
		{"redrain", "node-drain", url.Values{"deadline": {"4h"}}, draining, 200, "Node n001 is draining", "drain node-001 deadline=4h0m0s ignore-system=false"},
		{"stop drain", "node-drain-stop", url.Values{}, draining, 200, "the node is eligible again", "drain-stop node-001 eligible=true"},
		{"stop drain keeping ineligible", "node-drain-stop", url.Values{"keep_ineligible": {"1"}}, draining, 200, "the node stays ineligible", "drain-stop node-001 eligible=false"},
		{"stop a drain that is not", "node-drain-stop", url.Values{}, nil, 409, "Node n001 is not draining", ""},
		{"mark ineligible", "node-ineligible", url.Values{}, nil, 200, "Node n001 is now ineligible.", "eligibility node-001 ineligible"},
		{"mark eligible when eligible", "node-eligible", url.Values{}, nil, 409, "Node n001 is eligible already.", ""},
		{"mark a draining node eligible", "node-eligible", url.Values{}, draining, 409, "Node n001 is draining: stop its drain", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fa := &fakeActions{}
			st := benchWorld(t, 2, 2)
			if c.setup != nil {
				c.setup(st)
			}
			u := newWorldUI(t, st, fa)
			// A refused precondition refuses the confirmation page too.
			if c.status == 409 {
				rec := get(u, "/ui/actions/"+c.action+"?node=node-001", "nodew")
				if rec.Code != 409 || !strings.Contains(rec.Body.String(), c.want) {
					t.Fatalf("confirmation: %d, want 409 with %q\n%s", rec.Code, c.want, rec.Body.String())
				}
				return
			}
			cookie, tok := confirm(t, u, "/ui/actions/"+c.action+"?node=node-001", "nodew")
			form := url.Values{"node": {"node-001"}, csrfField: {tok}}
			for k, v := range c.form {
				form[k] = v
			}
			rec := post(u, "/ui/actions/"+c.action, "nodew", form, cookie, nil)
			if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
				t.Fatalf("%d, want %d with %q\n%s", rec.Code, c.status, c.want, rec.Body.String())
			}
			var want []string
			if c.call != "" {
				want = []string{c.call}
			}
			if got := fa.called(); !slices.Equal(got, want) {
				t.Errorf("writes %q, want %q", got, want)
			}
			if c.status == 200 && !strings.Contains(rec.Body.String(), `<a href="/ui/nodes/node-001">Back to node n001</a>`) {
				t.Errorf("the done page lacks the way back to the node\n%s", rec.Body.String())
			}
		})
	}
}

// TestNodeActionRefusals: without node:write, or without CSRF, nothing
// is written and the page says why; the node page offers the actions to
// a token that may use them and says why not to one that may not.
func TestNodeActionRefusals(t *testing.T) {
	fa := &fakeActions{}
	u := newWorldUI(t, benchWorld(t, 2, 2), fa)
	cookie, tok := confirm(t, u, "/ui/actions/node-drain?node=node-001", "nodew")
	form := url.Values{"node": {"node-001"}, "deadline": {"1h"}, csrfField: {tok}}
	cases := []struct {
		name, path, token string
		form              url.Values
		cookie            *http.Cookie
		status            int
		want              string
	}{
		{"read-only token", "/ui/actions/node-drain", "nodes", form, cookie, 403, "Your token may not drain nodes (it needs node:write)."},
		{"namespace writer", "/ui/actions/node-ineligible", "writer", form, cookie, 403, "Your token may not change the eligibility of nodes (it needs node:write)."},
		{"no CSRF cookie", "/ui/actions/node-drain", "nodew", form, nil, 403, "The form has no session"},
		{"unknown node", "/ui/actions/node-drain", "nodew", url.Values{"node": {"nosuch"}, "deadline": {"1h"}, csrfField: {tok}}, cookie, 404, "No node nosuch."},
		{"no node named", "/ui/actions/node-drain", "nodew", url.Values{"deadline": {"1h"}, csrfField: {tok}}, cookie, 400, "the node parameter is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := post(u, c.path, c.token, c.form, c.cookie, nil)
			if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
				t.Fatalf("%d, want %d with %q\n%s", rec.Code, c.status, c.want, rec.Body.String())
			}
		})
	}
	if got := fa.called(); len(got) != 0 {
		t.Errorf("refused requests wrote %q", got)
	}
	rec := get(u, "/ui/actions/node-drain?node=node-001", "nodes")
	if rec.Code != 403 || csrfInput.MatchString(rec.Body.String()) {
		t.Errorf("confirmation for a read-only token: %d\n%s", rec.Code, rec.Body.String())
	}

	pages := []struct {
		token         string
		want, notWant []string
	}{
		{"nodew", []string{`href="/ui/actions/node-drain?node=node-001">Drain…</a>`, `href="/ui/actions/node-ineligible?node=node-001">Mark ineligible…</a>`},
			[]string{"node-drain-stop", "may not drain this node"}},
		{"nodes", []string{"Your token may not drain this node or change its eligibility (it needs node:write)."}, []string{"/ui/actions/"}},
	}
	for _, p := range pages {
		body := get(u, "/ui/nodes/node-001", p.token).Body.String()
		for _, w := range p.want {
			if !strings.Contains(body, w) {
				t.Errorf("node page for %s lacks %q", p.token, w)
			}
		}
		for _, w := range p.notWant {
			if strings.Contains(body, w) {
				t.Errorf("node page for %s has %q", p.token, w)
			}
		}
	}
	// The drain form offers every deadline, the default checked.
	body := get(u, "/ui/actions/node-drain?node=node-001", "nodew").Body.String()
	for _, w := range []string{`<input type="radio" id="deadline-1h" name="deadline" value="1h" checked>`, `<label for="deadline-force">`,
		`<input type="hidden" name="node" value="node-001">`, `<input type="checkbox" id="ignore_system" name="ignore_system" value="1">`} {
		if !strings.Contains(body, w) {
			t.Errorf("drain form lacks %q", w)
		}
	}
}

// TestSameOrigin: Sec-Fetch-Site decides where a browser sends it (a
// form on a no-referrer page posts "Origin: null" to its own origin);
// without it, Origin decides, and an opaque origin is another site.
func TestSameOrigin(t *testing.T) {
	cases := []struct {
		name          string
		fetchSite, or string
		want          bool
	}{
		{"same origin", "same-origin", "http://example.com", true},
		{"no-referrer page's own form", "same-origin", "null", true},
		{"typed address", "none", "", true},
		{"same site, other origin", "same-site", "http://other.example.com", false},
		{"cross site", "cross-site", "https://evil.example", false},
		{"old browser, same origin", "", "http://example.com", true},
		{"old browser, other origin", "", "https://evil.example", false},
		{"old browser, opaque origin", "", "null", false},
		{"curl", "", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "http://example.com/ui/login", nil)
			if c.fetchSite != "" {
				r.Header.Set("Sec-Fetch-Site", c.fetchSite)
			}
			if c.or != "" {
				r.Header.Set("Origin", c.or)
			}
			if got := sameOrigin(r); got != c.want {
				t.Errorf("sameOrigin = %v, want %v", got, c.want)
			}
		})
	}
}

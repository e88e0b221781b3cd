package ui

import (
	"net/http"
	"strings"
	"testing"
)

// TestNomadPaths: Nomad's UI addresses redirect to the drover page of the
// same object, the query (an ott among it) carried along, and the
// redirected-to page is the object's.
func TestNomadPaths(t *testing.T) {
	const ott = "7d1f3c2a-0000-4000-8000-000000000003"
	fa := &fakeActions{otts: map[string]string{ott: "reader"}}
	u := newWorldUI(t, benchWorld(t, 1, 2), fa)
	cases := []struct {
		name, path, location string
		// final is a string of the page the redirect leads to ("" for
		// no second request).
		final string
	}{
		{"job in its namespace", "/ui/jobs/job-0000@default", "/ui/jobs/default/job-0000", "job-0000"},
		{"job without namespace", "/ui/jobs/job-0000", "/ui/jobs/default/job-0000", "job-0000"},
		{"job in another namespace", "/ui/jobs/web@team", "/ui/jobs/team/web", ""},
		{"job ID with @ and escapes", "/ui/jobs/a%2Fb%40c@team", "/ui/jobs/team/a%2Fb@c", ""},
		{"job with the query", "/ui/jobs/job-0000@default?tab=x", "/ui/jobs/default/job-0000?tab=x", ""},
		{"client", "/ui/clients/node-000", "/ui/nodes/node-000", "node-000"},
		{"client sub-page", "/ui/clients/node-000/allocations", "/ui/nodes/node-000", ""},
		{"clients", "/ui/clients", "/ui/nodes", ""},
		{"volume", "/ui/csi/volumes/vol-000@default", "/ui/volumes/default/vol-000", "vol-000"},
		{"volumes", "/ui/csi/volumes", "/ui/volumes", ""},
		{"csi plugin", "/ui/csi/plugins/hp", "/ui/plugins/csi/hp", ""},
		{"task of an allocation", "/ui/allocations/00000000-0000-0000-0000-000000000000/t", "/ui/allocations/00000000-0000-0000-0000-000000000000", ""},
		{"server", "/ui/servers/server-1", "/ui/servers", ""},
		{"root", "/ui/", "/ui/jobs", ""},
		{"root with an ott", "/ui/?ott=" + ott, "/ui/settings/tokens?ott=" + ott, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := get(u, c.path, "")
			if rec.Code != http.StatusFound || rec.Header().Get("Location") != c.location {
				t.Fatalf("%d to %q, want 302 to %q", rec.Code, rec.Header().Get("Location"), c.location)
			}
			if c.final == "" {
				return
			}
			token := "reader"
			if strings.HasPrefix(c.location, "/ui/nodes") {
				token = "nodes"
			}
			page := get(u, c.location, token)
			if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), c.final) {
				t.Errorf("%s: %d, want 200 showing %q", c.location, page.Code, c.final)
			}
		})
	}
	// The ott that /ui/?ott= forwarded signs the browser in once.
	rec := get(u, "/ui/settings/tokens?ott="+ott, "")
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("exchange after the redirect: %d, want 303", rec.Code)
	}
}

// TestLivePages: list and object pages load live.js (and allow it in
// their CSP); pages with a form or their own script do not; live.js is
// served as JavaScript.
func TestLivePages(t *testing.T) {
	u := newWorldUI(t, benchWorld(t, 1, 2), &fakeActions{})
	const tag = `<script src="/ui/live.js" defer></script>`
	for path, live := range map[string]bool{
		"/ui/jobs":                  true,
		"/ui/jobs/default/job-0000": true,
		"/ui/nodes":                 true,
		"/ui/settings/tokens":       false,
		"/ui/jobs/default/nosuch":   false, // an error page
	} {
		token := "reader"
		if path == "/ui/nodes" {
			token = "nodes"
		}
		rec := get(u, path, token)
		if got := strings.Contains(rec.Body.String(), tag); got != live {
			t.Errorf("%s (%d): live.js included %v, want %v", path, rec.Code, got, live)
		}
		wantCSP := csp
		if live {
			wantCSP = scriptCSP
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != wantCSP {
			t.Errorf("%s: CSP %q, want %q", path, got, wantCSP)
		}
	}
	rec := get(u, "/ui/live.js", "")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/javascript") ||
		!strings.Contains(rec.Body.String(), `getElementById("main")`) {
		t.Errorf("/ui/live.js: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
}

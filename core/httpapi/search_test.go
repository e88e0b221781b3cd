package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/api/contexts"

	"github.com/drover-org/drover/core/structs"
)

// TestSearch: prefix and fuzzy searches answer Nomad's shapes, per
// context and for "all", truncated at 20 a context, and refuse bad input
// with 400 naming the field.
func TestSearch(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedCluster(t, fake)
	web := testJob("default", "web")
	web.TaskGroups[0].Tasks[0].Config = map[string]any{"command": "/usr/bin/webserver"}
	web.TaskGroups[0].Services = []*structs.Service{{Name: "web-http", PortLabel: "http"}}
	seedJob(t, fake.store, 20, web)
	for i := range 25 {
		seedJob(t, fake.store, uint64(21+i), testJob("default", fmt.Sprintf("many-%02d", i)))
	}

	tests := []struct {
		name, path, body string
		code             int
		check            func(t *testing.T, r searchResp, body string)
	}{
		{name: "jobs by prefix", path: "/v1/search", body: `{"Prefix":"we","Context":"jobs"}`, code: 200,
			check: matches("jobs", `["web"]`, false, "evals")},
		{name: "other namespace", path: "/v1/search?namespace=other", body: `{"Prefix":"","Context":"jobs"}`, code: 200,
			check: matches("jobs", `["db"]`, false)},
		{name: "every namespace", path: "/v1/search?namespace=*", body: `{"Prefix":"","Context":"evals"}`, code: 200,
			check: matches("evals", `["eeee1111","eeee2222"]`, false)},
		{name: "body namespace", path: "/v1/search", body: `{"Prefix":"aaaa","Context":"allocs","Namespace":"other"}`, code: 200,
			check: matches("allocs", `["aaaa1111"]`, false)},
		{name: "truncated at 20", path: "/v1/search", body: `{"Prefix":"many-","Context":"jobs"}`, code: 200,
			check: func(t *testing.T, r searchResp, _ string) {
				var ids []string
				_ = json.Unmarshal(r.Matches["jobs"], &ids)
				if len(ids) != 20 || ids[0] != "many-00" || !r.Truncations["jobs"] {
					t.Errorf("jobs %v truncated %v; want the first 20 and true", ids, r.Truncations["jobs"])
				}
			}},
		{name: "all rounds an odd UUID prefix down", path: "/v1/search", body: `{"Prefix":"aaaa2","Context":"all"}`, code: 200,
			check: func(t *testing.T, r searchResp, body string) {
				matches("allocs", `["aaaa2222"]`, false)(t, r, body)
				for _, c := range []string{"jobs", "evals", "nodes", "deployment", "node_pools", "namespaces", "plugins", "volumes", "scaling_policy"} {
					if _, ok := r.Matches[c]; !ok {
						t.Errorf("context %s missing from all: %s", c, body)
					}
				}
			}},
		{name: "nodes", path: "/v1/search", body: `{"Prefix":"node-","Context":"nodes"}`, code: 200,
			check: matches("nodes", `["node-a","node-b"]`, false)},
		{name: "unknown context", path: "/v1/search", body: `{"Prefix":"x","Context":"quotas"}`, code: 400,
			check: bodyHas(`Context: "quotas" is not searchable`)},
		{name: "missing context", path: "/v1/search", body: `{"Prefix":"x"}`, code: 400, check: bodyHas("Context: missing")},
		{name: "bad JSON", path: "/v1/search", body: `{"Prefix":`, code: 400},

		{name: "fuzzy jobs", path: "/v1/search/fuzzy", body: `{"Text":"EB","Context":"jobs"}`, code: 200,
			check: matches("jobs", `[{"ID":"web","Scope":["default"]}]`, false)},
		{name: "fuzzy all finds job parts", path: "/v1/search/fuzzy", body: `{"Text":"web","Context":"all"}`, code: 200,
			check: func(t *testing.T, r searchResp, body string) {
				matches("services", `[{"ID":"web-http","Scope":["default","web","g"]}]`, false)(t, r, body)
				matches("commands", `[{"ID":"/usr/bin/webserver","Scope":["default","web","g","t"]}]`, false)(t, r, body)
				if _, ok := r.Matches["evals"]; ok {
					t.Errorf("fuzzy all searched evals: %s", body)
				}
			}},
		{name: "fuzzy best first", path: "/v1/search/fuzzy", body: `{"Text":"ma","Context":"jobs"}`, code: 200,
			check: func(t *testing.T, r searchResp, _ string) {
				var ms []fuzzyMatch
				_ = json.Unmarshal(r.Matches["jobs"], &ms)
				if len(ms) != 20 || ms[0].ID != "many-00" || !r.Truncations["jobs"] {
					t.Errorf("fuzzy jobs %v truncated %v", ms, r.Truncations["jobs"])
				}
			}},
		{name: "fuzzy text too short", path: "/v1/search/fuzzy", body: `{"Text":"w","Context":"jobs"}`, code: 400, check: bodyHas("Text:")},
		{name: "fuzzy evals are not fuzzy", path: "/v1/search/fuzzy", body: `{"Text":"ee","Context":"evals"}`, code: 400, check: bodyHas("Context:")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, method := range []string{http.MethodPut, http.MethodPost} {
				rec := do(t, api.Handler(), method, tc.path, tc.body)
				if rec.Code != tc.code {
					t.Fatalf("%s %s: %d %s; want %d", method, tc.path, rec.Code, rec.Body, tc.code)
				}
				if tc.code != 200 {
					if tc.check != nil {
						tc.check(t, searchResp{}, rec.Body.String())
					}
					continue
				}
				if rec.Header().Get("X-Nomad-Index") == "" {
					t.Errorf("no X-Nomad-Index")
				}
				var r searchResp
				if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
					t.Fatalf("decode: %v: %s", err, rec.Body)
				}
				tc.check(t, r, rec.Body.String())
			}
		})
	}
}

// searchResp is a search answer with each context's matches kept raw.
type searchResp struct {
	Matches     map[string]json.RawMessage
	Truncations map[string]bool
}

// matches checks one context's matches (as JSON) and truncation, and that
// the contexts in absent are not in the answer.
func matches(context, want string, truncated bool, absent ...string) func(t *testing.T, r searchResp, body string) {
	return func(t *testing.T, r searchResp, body string) {
		t.Helper()
		if got := string(r.Matches[context]); got != want {
			t.Errorf("Matches[%s] = %s; want %s (%s)", context, got, want, body)
		}
		if got, ok := r.Truncations[context]; !ok || got != truncated {
			t.Errorf("Truncations[%s] = %v (present %v); want %v", context, got, ok, truncated)
		}
		for _, c := range absent {
			if _, ok := r.Matches[c]; ok {
				t.Errorf("context %s in the answer: %s", c, body)
			}
		}
	}
}

func bodyHas(s string) func(t *testing.T, _ searchResp, body string) {
	return func(t *testing.T, _ searchResp, body string) {
		t.Helper()
		if !strings.Contains(body, s) {
			t.Errorf("body %q lacks %q", body, s)
		}
	}
}

// TestSearchACL: with ACLs on, a search shows each caller only what it
// could list: by namespace, object by object across namespaces, and no
// context it may not list at all.
func TestSearchACL(t *testing.T) {
	w := newACLWorld(t)
	teamAlloc, defAlloc := w.allocs["team"], w.allocs["default"]
	search := func(caller int, path, body string) map[string][]string {
		t.Helper()
		var req map[string]any
		_ = json.Unmarshal([]byte(body), &req)
		status, b := w.do(caller, "PUT", path, req)
		if status != http.StatusOK {
			t.Fatalf("PUT %s %s as %s: %d %s", path, body, callerNames[caller], status, b)
		}
		var r struct{ Matches map[string][]string }
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r.Matches
	}
	all := `{"Prefix":"","Context":"all"}`
	tests := []struct {
		caller       int
		path         string
		jobs, allocs []string
		nodes        bool // the nodes context is in the answer
		namespaces   []string
	}{
		{caller: callerNone, path: "/v1/search?namespace=*", namespaces: nil},
		{caller: callerNoCap, path: "/v1/search?namespace=*", namespaces: []string{"default"}},
		{caller: callerOtherNS, path: "/v1/search?namespace=*", jobs: []string{"web"}, allocs: []string{teamAlloc}, namespaces: []string{"team"}},
		{caller: callerReadOnly, path: "/v1/search?namespace=*", jobs: []string{"web"}, allocs: []string{defAlloc}, nodes: true, namespaces: []string{"default"}},
		{caller: callerReadOnly, path: "/v1/search?namespace=team", nodes: true, namespaces: []string{"default"}},
		{caller: callerMgmt, path: "/v1/search?namespace=team", jobs: []string{"web"}, allocs: []string{teamAlloc}, nodes: true, namespaces: []string{"default", "team"}},
	}
	for _, tc := range tests {
		t.Run(callerNames[tc.caller]+tc.path, func(t *testing.T) {
			m := search(tc.caller, tc.path, all)
			if got := m["jobs"]; !slices.Equal(got, tc.jobs) {
				t.Errorf("jobs %v; want %v", got, tc.jobs)
			}
			if got := m["allocs"]; !slices.Equal(got, tc.allocs) {
				t.Errorf("allocs %v; want %v", got, tc.allocs)
			}
			if _, ok := m["nodes"]; ok != tc.nodes {
				t.Errorf("nodes context present %v; want %v", ok, tc.nodes)
			}
			if got := m["namespaces"]; !slices.Equal(got, tc.namespaces) {
				t.Errorf("namespaces %v; want %v", got, tc.namespaces)
			}
		})
	}
	// The fuzzy search filters the same way, down to job parts.
	for caller, want := range map[int]int{callerNone: 0, callerOtherNS: 1, callerReadOnly: 1, callerMgmt: 2} {
		status, b := w.do(caller, "PUT", "/v1/search/fuzzy?namespace=*", map[string]string{"Text": "we", "Context": "all"})
		var r struct{ Matches map[string][]fuzzyMatch }
		if err := json.Unmarshal(b, &r); status != 200 || err != nil {
			t.Fatalf("fuzzy as %s: %d %s", callerNames[caller], status, b)
		}
		if got := len(r.Matches["jobs"]); got != want {
			t.Errorf("fuzzy jobs as %s: %v; want %d", callerNames[caller], r.Matches["jobs"], want)
		}
	}
}

// TestSearchNomadClient: the official client's Search().PrefixSearch and
// FuzzySearch decode drover's answers.
func TestSearchNomadClient(t *testing.T) {
	c := aclTestServer(t, false)
	job := nomadapi.NewBatchJob("client-search", "client-search", "global", 50)
	job.Datacenters = []string{"dc1"}
	job.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(nomadapi.NewTask("t", "raw_exec").SetConfig("command", "/bin/true")))
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	res, _, err := c.Search().PrefixSearch("client-", contexts.All, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Matches[contexts.Jobs]; !slices.Equal(got, []string{"client-search"}) || res.Truncations[contexts.Jobs] {
		t.Errorf("prefix search jobs %v truncated %v", got, res.Truncations[contexts.Jobs])
	}
	fz, _, err := c.Search().FuzzySearch("search", contexts.Jobs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fz.Matches[contexts.Jobs]; len(got) != 1 || got[0].ID != "client-search" || !slices.Equal(got[0].Scope, []string{"default"}) {
		t.Errorf("fuzzy search jobs %+v", got)
	}
}

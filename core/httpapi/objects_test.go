package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// seedCluster writes a job, two evals, two allocs and two nodes.
func seedCluster(t *testing.T, fake *fakeServer) {
	t.Helper()
	s := fake.store
	seedNode(t, s, 5, &structs.Node{ID: "node-b", SecretID: "secret-b", Name: "b", Datacenter: "dc1", NodePool: "default", Status: "ready",
		DrainStrategy: &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}})
	seedNode(t, s, 6, &structs.Node{ID: "node-a", SecretID: "secret-a", Name: "a", Datacenter: "dc1", NodePool: "default", Status: "ready"})
	seedJob(t, s, 10, testJob("default", "web"))
	seedJob(t, s, 11, testJob("other", "db"))
	seedEval(t, s, 12, &structs.Evaluation{ID: "eeee1111", Namespace: "default", JobID: "web", Status: "complete", Type: "batch"})
	seedEval(t, s, 13, &structs.Evaluation{ID: "eeee2222", Namespace: "other", JobID: "db", Status: "pending", Type: "batch"})
	web, _ := s.JobByID(nil, "default", "web")
	db, _ := s.JobByID(nil, "other", "db")
	seedAlloc(t, s, 14, &structs.Allocation{ID: "aaaa2222", Namespace: "default", JobID: "web", Job: web, TaskGroup: "g", EvalID: "eeee1111", NodeID: "node-a", DesiredStatus: "run", ClientStatus: "pending"})
	seedAlloc(t, s, 15, &structs.Allocation{ID: "aaaa1111", Namespace: "other", JobID: "db", Job: db, TaskGroup: "g", EvalID: "eeee2222", NodeID: "node-b", DesiredStatus: "run", ClientStatus: "running"})
}

func TestObjectReads(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedCluster(t, fake)

	tests := []struct {
		name, target string
		code         int
		index        string
		check        func(t *testing.T, body string)
	}{
		{name: "allocs default namespace", target: "/v1/allocations", code: 200, index: "15", check: wantIDs("aaaa2222")},
		{name: "allocs every namespace by create index", target: "/v1/allocations?namespace=*", code: 200, index: "15", check: wantIDs("aaaa2222", "aaaa1111")},
		{name: "alloc prefix", target: "/v1/allocations?namespace=*&prefix=aaaa1", code: 200, index: "15", check: wantIDs("aaaa1111")},
		{name: "alloc", target: "/v1/allocation/aaaa1111", code: 200, index: "15", check: contains(`"Job":{`, `"ClientStatus":"running"`)},
		{name: "alloc missing", target: "/v1/allocation/nope", code: 404, index: "15", check: equals("alloc not found")},
		{name: "evals", target: "/v1/evaluations", code: 200, index: "13", check: wantIDs("eeee1111")},
		{name: "evals every namespace", target: "/v1/evaluations?namespace=*", code: 200, index: "13", check: wantIDs("eeee1111", "eeee2222")},
		{name: "eval prefix", target: "/v1/evaluations?namespace=*&prefix=eeee2", code: 200, index: "13", check: wantIDs("eeee2222")},
		{name: "eval", target: "/v1/evaluation/eeee2222", code: 200, index: "13", check: contains(`"Status":"pending"`)},
		{name: "eval missing", target: "/v1/evaluation/nope", code: 404, index: "13", check: equals("eval not found")},
		{name: "eval allocs", target: "/v1/evaluation/eeee1111/allocations", code: 200, index: "15", check: wantIDs("aaaa2222")},
		{name: "nodes by create index", target: "/v1/nodes", code: 200, index: "6", check: all(wantIDs("node-b", "node-a"), contains(`"Drain":true`), lacks("SecretID"))},
		{name: "node prefix", target: "/v1/nodes?prefix=node-a", code: 200, index: "6", check: wantIDs("node-a")},
		{name: "node blanks its secret, adds Drain", target: "/v1/node/node-b", code: 200, index: "5", check: all(contains(`"SecretID":""`, `"Drain":true`), lacks("secret-b"))},
		{name: "node not draining", target: "/v1/node/node-a", code: 200, index: "6", check: contains(`"Drain":false`)},
		{name: "node missing", target: "/v1/node/nope", code: 404, index: "6", check: equals("node not found")},
		{name: "node allocs are full allocs", target: "/v1/node/node-a/allocations", code: 200, index: "15", check: all(wantIDs("aaaa2222"), contains(`"Job":{`))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, api.Handler(), http.MethodGet, tc.target, "")
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.code, rec.Body.String())
			}
			if got := rec.Header().Get("X-Nomad-Index"); got != tc.index {
				t.Errorf("X-Nomad-Index = %q, want %q", got, tc.index)
			}
			tc.check(t, rec.Body.String())
		})
	}
}

func TestStubsAreStubs(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedCluster(t, fake)
	rec := do(t, api.Handler(), http.MethodGet, "/v1/allocations", "")
	mustOK(t, rec)
	stubs := decodeJSON[[]map[string]any](t, rec)
	if len(stubs) != 1 {
		t.Fatalf("stubs = %v", stubs)
	}
	for _, field := range []string{"Job", "Metrics", "AllocStates"} {
		if _, ok := stubs[0][field]; ok {
			t.Errorf("alloc stub carries %s", field)
		}
	}
	if stubs[0]["JobType"] != "batch" {
		t.Errorf("JobType = %v", stubs[0]["JobType"])
	}
}

func TestObjectWrites(t *testing.T) {
	tests := []struct {
		name, method, target, body string
		code                       int
		wantCall                   string
		check                      func(t *testing.T, c call)
		wantBody                   string
	}{
		{name: "alloc stop", method: "POST", target: "/v1/allocation/aaaa1111/stop", code: 200, wantCall: "StopAlloc",
			check: func(t *testing.T, c call) {
				if c.Args[0] != "aaaa1111" {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "alloc stop put", method: "PUT", target: "/v1/allocation/aaaa1111/stop", code: 200, wantCall: "StopAlloc"},
		{name: "eligibility", method: "POST", target: "/v1/node/node-a/eligibility", body: `{"Eligibility":"ineligible"}`, code: 200, wantCall: "UpdateNodeEligibility",
			check: func(t *testing.T, c call) {
				if c.Args[0] != "node-a" || c.Args[1] != "ineligible" {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "eligibility missing", method: "POST", target: "/v1/node/node-a/eligibility", body: `{}`, code: 400, wantBody: "Eligibility: missing"},
		{name: "eligibility invalid", method: "POST", target: "/v1/node/node-a/eligibility", body: `{"Eligibility":"maybe"}`, code: 400, wantBody: `invalid value "maybe"`},
		{name: "drain on", method: "POST", target: "/v1/node/node-a/drain", body: `{"DrainSpec":{"Deadline":3600000000000,"IgnoreSystemJobs":true},"Meta":{"why":"kernel"}}`, code: 200, wantCall: "UpdateNodeDrain",
			check: func(t *testing.T, c call) {
				spec := c.Args[1].(*structs.DrainSpec)
				if spec == nil || spec.Deadline != time.Hour || !spec.IgnoreSystemJobs || c.Args[2] != false || c.Args[3].(map[string]string)["why"] != "kernel" {
					t.Errorf("args %v %+v", c.Args, spec)
				}
			}},
		{name: "drain off", method: "PUT", target: "/v1/node/node-a/drain", body: `{"DrainSpec":null,"MarkEligible":true}`, code: 200, wantCall: "UpdateNodeDrain",
			check: func(t *testing.T, c call) {
				if c.Args[1].(*structs.DrainSpec) != nil || c.Args[2] != true {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "drain bad deadline", method: "POST", target: "/v1/node/node-a/drain", body: `{"DrainSpec":{"Deadline":"1h"}}`, code: 400, wantBody: "DrainSpec.Deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, fake := newTestAPI(t, Config{})
			rec := do(t, api.Handler(), tc.method, tc.target, tc.body)
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.code, rec.Body.String())
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body %q lacks %q", rec.Body.String(), tc.wantBody)
			}
			if tc.code != 200 {
				return
			}
			if rec.Header().Get("X-Nomad-Index") == "" {
				t.Error("write without X-Nomad-Index")
			}
			c := fake.lastCall(t)
			if c.Method != tc.wantCall {
				t.Fatalf("call %s, want %s", c.Method, tc.wantCall)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestWriteErrorsMapToStatus(t *testing.T) {
	tests := []struct {
		err  error
		code int
	}{
		{structs.NewError(structs.ErrNotFound, "alloc not found"), 404},
		{structs.NewError(structs.ErrPermissionDenied, "Permission denied"), 403},
		{structs.NewError(structs.ErrInvalid, "bad"), 400},
		{structs.ErrNoLeader, 503},
		{errPlain("boom"), 500},
	}
	for _, tc := range tests {
		api, fake := newTestAPI(t, Config{})
		fake.err = tc.err
		rec := do(t, api.Handler(), "POST", "/v1/allocation/x/stop", "")
		if rec.Code != tc.code || rec.Body.String() != tc.err.Error() {
			t.Errorf("%v: %d %q, want %d with the message", tc.err, rec.Code, rec.Body.String(), tc.code)
		}
	}
}

type errPlain string

func (e errPlain) Error() string { return string(e) }

// body checks

func wantIDs(ids ...string) func(*testing.T, string) {
	return func(t *testing.T, body string) {
		t.Helper()
		var got []string
		rest := body
		for {
			i := strings.Index(rest, `"ID":"`)
			if i < 0 {
				break
			}
			rest = rest[i+6:]
			id := rest[:strings.Index(rest, `"`)]
			// Nested objects (the alloc's Job) also have IDs: keep the
			// listed kinds only.
			if strings.HasPrefix(id, "aaaa") || strings.HasPrefix(id, "eeee") || strings.HasPrefix(id, "node-") {
				got = append(got, id)
			}
		}
		if strings.Join(got, ",") != strings.Join(ids, ",") {
			t.Errorf("IDs %v, want %v", got, ids)
		}
	}
}

func contains(subs ...string) func(*testing.T, string) {
	return func(t *testing.T, body string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(body, s) {
				t.Errorf("body lacks %q: %s", s, body)
			}
		}
	}
}

func lacks(s string) func(*testing.T, string) {
	return func(t *testing.T, body string) {
		t.Helper()
		if strings.Contains(body, s) {
			t.Errorf("body has %q: %s", s, body)
		}
	}
}

func equals(want string) func(*testing.T, string) {
	return func(t *testing.T, body string) {
		t.Helper()
		if body != want {
			t.Errorf("body %q, want %q", body, want)
		}
	}
}

func all(checks ...func(*testing.T, string)) func(*testing.T, string) {
	return func(t *testing.T, body string) {
		t.Helper()
		for _, c := range checks {
			c(t, body)
		}
	}
}

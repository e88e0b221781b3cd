package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// The scale and revert routes hand the server what the body and the URL
// say, and refuse a malformed request before it reaches the server.
func TestJobScaleRevertRouting(t *testing.T) {
	tests := []struct {
		name, method, target, body string
		status                     int
		want                       string // in the body
		call                       string // the server call, "" for none
		check                      func(t *testing.T, c call)
	}{
		{name: "scale", method: "PUT", target: "/v1/job/web/scale?namespace=team",
			body:   `{"Count":3,"Target":{"Group":"g","Job":"web"},"Message":"m","Meta":{"k":"v"},"PolicyOverride":true}`,
			status: 200, want: `"EvalID":"eval-7"`, call: "ScaleJob", check: func(t *testing.T, c call) {
				req := c.Args[2].(*structs.ScalingRequest)
				if c.Args[0] != "team" || c.Args[1] != "web" || *req.Count != 3 || req.Target["Group"] != "g" || req.Message != "m" || req.Meta["k"] != "v" {
					t.Errorf("call %+v, request %+v", c.Args, req)
				}
			}},
		{name: "scale by POST with an escaped ID", method: "POST", target: "/v1/job/a%2Fb/scale", body: `{"Count":0,"Target":{"Group":"g"}}`,
			status: 200, call: "ScaleJob", check: func(t *testing.T, c call) {
				if c.Args[1] != "a/b" || *c.Args[2].(*structs.ScalingRequest).Count != 0 {
					t.Errorf("call %+v", c.Args)
				}
			}},
		{name: "event only", method: "PUT", target: "/v1/job/web/scale", body: `{"Target":{"Group":"g"},"Error":true,"Message":"x"}`, status: 200, call: "ScaleJob"},
		{name: "no group", method: "PUT", target: "/v1/job/web/scale", body: `{"Count":3}`, status: 400, want: "Target.Group"},
		{name: "negative", method: "PUT", target: "/v1/job/web/scale", body: `{"Count":-2,"Target":{"Group":"g"}}`, status: 400, want: "Count: must not be negative (got -2)"},
		{name: "other job in target", method: "PUT", target: "/v1/job/web/scale", body: `{"Count":1,"Target":{"Group":"g","Job":"db"}}`, status: 400, want: "Target.Job"},
		{name: "other namespace in target", method: "PUT", target: "/v1/job/web/scale", body: `{"Count":1,"Target":{"Group":"g","Namespace":"team"}}`, status: 400, want: "Target.Namespace"},
		{name: "empty body", method: "PUT", target: "/v1/job/web/scale", body: ``, status: 400},
		{name: "unknown field type", method: "PUT", target: "/v1/job/web/scale", body: `{"Count":"x"}`, status: 400},
		{name: "scale with DELETE", method: "DELETE", target: "/v1/job/web/scale", status: 405},
		{name: "revert", method: "PUT", target: "/v1/job/web/revert", body: `{"JobID":"web","JobVersion":2,"EnforcePriorVersion":4}`,
			status: 200, want: `"EvalID":"eval-8"`, call: "RevertJob", check: func(t *testing.T, c call) {
				if c.Args[0] != "default" || c.Args[1] != "web" || c.Args[2] != uint64(2) || *c.Args[3].(*uint64) != 4 {
					t.Errorf("call %+v", c.Args)
				}
			}},
		{name: "revert of another job", method: "PUT", target: "/v1/job/web/revert", body: `{"JobID":"db","JobVersion":2}`, status: 400, want: "JobID"},
		{name: "revert with GET", method: "GET", target: "/v1/job/web/revert", status: 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, fake := newTestAPI(t, Config{})
			rec := do(t, h.Handler(), tc.method, tc.target, tc.body)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("%s %s = %d %q, want %d containing %q", tc.method, tc.target, rec.Code, rec.Body.String(), tc.status, tc.want)
			}
			if tc.call == "" {
				if fake.numCalls() != 0 {
					t.Fatalf("the server was called: %+v", fake.lastCall(t))
				}
				return
			}
			c := fake.lastCall(t)
			if c.Method != tc.call {
				t.Fatalf("server call %s, want %s", c.Method, tc.call)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
			if rec.Header().Get("X-Nomad-Index") == "" {
				t.Error("no X-Nomad-Index on a write")
			}
		})
	}
}

// The scale status counts the allocations the scheduler still wants and
// shows the stored events; Nomad's client decodes it.
func TestJobScaleStatusRead(t *testing.T) {
	h, fake := newTestAPI(t, Config{})
	job := testJob("default", "web")
	job.TaskGroups = append(job.TaskGroups, &structs.TaskGroup{Name: "idle", Count: 0})
	if err := fake.store.UpsertJob(10, job); err != nil {
		t.Fatal(err)
	}
	stored, _ := fake.store.JobByID(nil, "default", "web")
	var allocs []*structs.Allocation
	for i, st := range []struct{ desired, client string }{{"run", "running"}, {"run", "pending"}, {"stop", "complete"}, {"run", "failed"}} {
		allocs = append(allocs, &structs.Allocation{ID: uuid.NewString(), Namespace: "default", JobID: "web", Job: stored, TaskGroup: "g",
			Name: "web.g[" + string(rune('0'+i)) + "]", NodeID: uuid.NewString(), DesiredStatus: st.desired, ClientStatus: st.client})
	}
	if err := fake.store.UpsertAllocs(11, allocs); err != nil {
		t.Fatal(err)
	}
	three := int64(3)
	eval := "eval-9"
	if err := fake.store.WriteTxn(12, func(tx *state.Txn) error {
		return tx.AddScalingEvent("default", "web", "g", &structs.ScalingEvent{Count: &three, PreviousCount: 1, Message: "up", EvalID: &eval, Time: 5})
	}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	st, qm, err := c.Jobs().ScaleStatus("web", nil)
	if err != nil {
		t.Fatal(err)
	}
	g, idle := st.TaskGroups["g"], st.TaskGroups["idle"]
	if st.JobID != "web" || st.JobCreateIndex != 10 || st.JobModifyIndex != 10 || st.JobStopped || qm.LastIndex != 12 {
		t.Fatalf("status %+v at index %d", st, qm.LastIndex)
	}
	if g.Desired != 1 || g.Placed != 2 || g.Running != 1 || g.Healthy != 0 || len(g.Events) != 1 {
		t.Fatalf("group g %+v, want desired 1, placed 2, running 1, one event", g)
	}
	ev := g.Events[0]
	if ev.Count == nil || *ev.Count != 3 || ev.PreviousCount != 1 || ev.Message != "up" || ev.EvalID == nil || *ev.EvalID != eval || ev.Time != 5 || ev.CreateIndex != 12 {
		t.Errorf("event %+v", ev)
	}
	if idle.Desired != 0 || idle.Placed != 0 || idle.Events == nil || len(idle.Events) != 0 {
		t.Errorf("group idle %+v, want zero counts and an empty event list", idle)
	}
	rec := do(t, h.Handler(), "GET", "/v1/job/nope/scale", "")
	if rec.Code != http.StatusNotFound {
		t.Errorf("unknown job: %d %q, want 404", rec.Code, rec.Body.String())
	}
}

// scale-job or submit-job may scale; read-job or read-job-scaling may read
// the status; revert needs submit-job.
func TestJobScaleCapabilities(t *testing.T) {
	srv := devServer(t, true)
	ctx := context.Background()
	job := &structs.Job{ID: "web", Type: "batch", Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"}}}}}}
	if _, err := srv.Jobs().Register(ctx, job, false, 0); err != nil {
		t.Fatal(err)
	}
	caps := map[string]string{"scale": "scale-job", "submit": "submit-job", "readscale": "read-job-scaling", "read": "read-job", "list": "list-jobs"}
	var policies []*structs.ACLPolicy
	var tokens []*structs.ACLToken
	secrets := map[string]string{}
	for name, c := range caps {
		policies = append(policies, &structs.ACLPolicy{Name: name, Rules: `namespace "default" { capabilities = ["` + c + `"] }`})
		tok := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: name, Type: structs.ACLClientToken, Policies: []string{name}}
		tokens = append(tokens, tok)
		secrets[name] = tok.SecretID
	}
	if err := srv.State().UpsertACLPolicies(100000, policies); err != nil {
		t.Fatal(err)
	}
	if err := srv.State().UpsertACLTokens(100001, tokens); err != nil {
		t.Fatal(err)
	}
	h := New(serverConfig(srv, Config{})).Handler()
	tests := []struct {
		caller, method, path, body string
		status                     int
	}{
		{"scale", "PUT", "/v1/job/web/scale", `{"Count":2,"Target":{"Group":"g"}}`, 200},
		{"submit", "PUT", "/v1/job/web/scale", `{"Count":3,"Target":{"Group":"g"}}`, 200},
		{"readscale", "PUT", "/v1/job/web/scale", `{"Count":4,"Target":{"Group":"g"}}`, 403},
		{"read", "PUT", "/v1/job/web/scale", `{"Count":4,"Target":{"Group":"g"}}`, 403},
		{"readscale", "GET", "/v1/job/web/scale", "", 200},
		{"read", "GET", "/v1/job/web/scale", "", 200},
		{"list", "GET", "/v1/job/web/scale", "", 403},
		{"scale", "PUT", "/v1/job/web/revert", `{"JobVersion":0}`, 403},
		{"submit", "PUT", "/v1/job/web/revert", `{"JobVersion":0}`, 200},
	}
	for _, tc := range tests {
		t.Run(tc.caller+" "+tc.method+" "+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			req.Header.Set("X-Nomad-Token", secrets[tc.caller])
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("%d %q, want %d", rec.Code, rec.Body.String(), tc.status)
			}
		})
	}
	stored, _ := srv.State().JobByID(nil, "default", "web")
	if stored.Version != 3 || stored.TaskGroups[0].Count != 1 {
		t.Errorf("job at version %d count %d, want version 3 (two scales, one revert) count 1", stored.Version, stored.TaskGroups[0].Count)
	}
}

package httpapi

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

func TestJobList(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedJob(t, fake.store, 10, testJob("default", "beta"))
	seedJob(t, fake.store, 11, testJob("default", "alpha"))
	seedJob(t, fake.store, 12, testJob("other", "gamma"))

	tests := []struct {
		target string
		want   []string
	}{
		{"/v1/jobs", []string{"alpha", "beta"}},
		{"/v1/jobs?namespace=other", []string{"gamma"}},
		{"/v1/jobs?namespace=*", []string{"alpha", "beta", "gamma"}},
		{"/v1/jobs?prefix=al", []string{"alpha"}},
		{"/v1/jobs?prefix=zz", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			rec := do(t, api.Handler(), http.MethodGet, tc.target, "")
			mustOK(t, rec)
			if got := rec.Header().Get("X-Nomad-Index"); got != "12" {
				t.Errorf("X-Nomad-Index = %q, want 12", got)
			}
			if rec.Header().Get("X-Nomad-KnownLeader") != "true" || rec.Header().Get("X-Nomad-LastContact") != "0" {
				t.Errorf("read headers missing: %v", rec.Header())
			}
			if !strings.HasPrefix(strings.TrimSpace(rec.Body.String()), "[") {
				t.Fatalf("body is not a JSON list: %s", rec.Body.String())
			}
			stubs := decodeJSON[[]*structs.JobListStub](t, rec)
			var ids []string
			for _, s := range stubs {
				ids = append(ids, s.ID)
				if s.JobSummary == nil || s.JobSummary.JobID != s.ID {
					t.Errorf("stub %q lacks its JobSummary: %+v", s.ID, s.JobSummary)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
				t.Errorf("IDs = %v, want %v", ids, tc.want)
			}
		})
	}
}

func TestJobGet(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedJob(t, fake.store, 10, testJob("default", "web"))
	seedJob(t, fake.store, 11, testJob("default", "parent/dispatch-1-ab"))
	seedJob(t, fake.store, 12, testJob("default", "other")) // moves the table index

	tests := []struct {
		name, target string
		code         int
		wantID       string
		wantIndex    string
		wantBody     string
	}{
		{"found", "/v1/job/web", 200, "web", "10", ""},
		{"escaped slash", "/v1/job/parent%2Fdispatch-1-ab", 200, "parent/dispatch-1-ab", "11", ""},
		{"raw slash", "/v1/job/parent/dispatch-1-ab", 200, "parent/dispatch-1-ab", "11", ""},
		{"missing", "/v1/job/nope", 404, "", "12", "job not found"},
		{"other namespace", "/v1/job/web?namespace=other", 404, "", "12", "job not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, api.Handler(), http.MethodGet, tc.target, "")
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.code, rec.Body.String())
			}
			if got := rec.Header().Get("X-Nomad-Index"); got != tc.wantIndex {
				t.Errorf("X-Nomad-Index = %q, want %q", got, tc.wantIndex)
			}
			if tc.code != 200 {
				if rec.Body.String() != tc.wantBody {
					t.Errorf("body %q, want %q", rec.Body.String(), tc.wantBody)
				}
				return
			}
			job := decodeJSON[structs.Job](t, rec)
			if job.ID != tc.wantID || len(job.TaskGroups) != 1 {
				t.Errorf("job = %+v", job)
			}
		})
	}
}

func TestJobSubresources(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	job := testJob("default", "web")
	seedJob(t, fake.store, 10, job)
	seedJob(t, fake.store, 11, testJob("default", "web")) // version 1
	seedEval(t, fake.store, 12, &structs.Evaluation{ID: "e2", Namespace: "default", JobID: "web", Status: "complete", Type: "batch"})
	seedEval(t, fake.store, 13, &structs.Evaluation{ID: "e1", Namespace: "default", JobID: "web", Status: "pending", Type: "batch"})
	stored, _ := fake.store.JobByID(nil, "default", "web")
	seedAlloc(t, fake.store, 14, &structs.Allocation{ID: "a2", Namespace: "default", JobID: "web", Job: stored, TaskGroup: "g", EvalID: "e2", NodeID: "n1", DesiredStatus: "run", ClientStatus: "pending"})
	seedAlloc(t, fake.store, 15, &structs.Allocation{ID: "a1", Namespace: "default", JobID: "web", Job: stored, TaskGroup: "g", EvalID: "e2", NodeID: "n1", DesiredStatus: "run", ClientStatus: "pending"})

	t.Run("allocations are stubs by create index", func(t *testing.T) {
		rec := do(t, api.Handler(), http.MethodGet, "/v1/job/web/allocations", "")
		mustOK(t, rec)
		stubs := decodeJSON[[]map[string]any](t, rec)
		if len(stubs) != 2 || stubs[0]["ID"] != "a2" || stubs[1]["ID"] != "a1" {
			t.Fatalf("stubs = %v", stubs)
		}
		if _, hasJob := stubs[0]["Job"]; hasJob {
			t.Error("a stub must not carry the job")
		}
		if stubs[0]["JobType"] != "batch" {
			t.Errorf("JobType = %v", stubs[0]["JobType"])
		}
		if rec.Header().Get("X-Nomad-Index") != "15" {
			t.Errorf("index %q", rec.Header().Get("X-Nomad-Index"))
		}
	})
	t.Run("evaluations are full", func(t *testing.T) {
		rec := do(t, api.Handler(), http.MethodGet, "/v1/job/web/evaluations", "")
		mustOK(t, rec)
		evals := decodeJSON[[]*structs.Evaluation](t, rec)
		if len(evals) != 2 || evals[0].ID != "e2" || evals[1].ID != "e1" {
			t.Fatalf("evals = %+v", evals)
		}
	})
	t.Run("summary", func(t *testing.T) {
		rec := do(t, api.Handler(), http.MethodGet, "/v1/job/web/summary", "")
		mustOK(t, rec)
		sum := decodeJSON[structs.JobSummary](t, rec)
		if _, ok := sum.Summary["g"]; sum.JobID != "web" || !ok {
			t.Fatalf("summary = %+v", sum)
		}
		if rec := do(t, api.Handler(), http.MethodGet, "/v1/job/nope/summary", ""); rec.Code != 404 || rec.Body.String() != "job not found" {
			t.Errorf("missing summary: %d %q", rec.Code, rec.Body.String())
		}
	})
	t.Run("versions", func(t *testing.T) {
		rec := do(t, api.Handler(), http.MethodGet, "/v1/job/web/versions", "")
		mustOK(t, rec)
		body := decodeJSON[map[string]any](t, rec)
		if d, ok := body["Diffs"]; !ok || d != nil {
			t.Errorf("Diffs = %v (present %t), want null", d, ok)
		}
		versions := decodeJSON[struct{ Versions []*structs.Job }](t, rec).Versions
		if len(versions) != 2 || versions[0].Version != 1 || versions[1].Version != 0 {
			t.Fatalf("versions = %+v", versions)
		}
		if rec := do(t, api.Handler(), http.MethodGet, "/v1/job/nope/versions", ""); rec.Code != 404 {
			t.Errorf("missing versions: %d", rec.Code)
		}
	})
}

func TestJobRegister(t *testing.T) {
	tests := []struct {
		name, method, target, body string
		serverErr                  error
		code                       int
		wantBody                   string // substring
		wantNS                     string
	}{
		{name: "jobs endpoint", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web","TaskGroups":[{"Name":"g"}]}}`, code: 200, wantNS: "default"},
		{name: "post with namespace query", method: "POST", target: "/v1/jobs?namespace=prod", body: `{"Job":{"ID":"web"}}`, code: 200, wantNS: "prod"},
		{name: "job's own namespace wins", method: "PUT", target: "/v1/jobs?namespace=prod", body: `{"Job":{"ID":"web","Namespace":"dev"}}`, code: 200, wantNS: "dev"},
		{name: "job endpoint", method: "PUT", target: "/v1/job/web", body: `{"Job":{"ID":"web"}}`, code: 200, wantNS: "default"},
		{name: "unknown fields are ignored", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web","Multiregion":null,"ConsulToken":"","TaskGroups":[{"Name":"g","Networks":[{"Mode":"host"}],"Consul":{"Namespace":""}}]},"PolicyOverride":false,"PreserveCounts":false}`, code: 200, wantNS: "default"},
		{name: "no job", method: "PUT", target: "/v1/jobs", body: `{}`, code: 400, wantBody: "Job must be specified"},
		{name: "no job ID", method: "PUT", target: "/v1/jobs", body: `{"Job":{"Name":"x"}}`, code: 400, wantBody: "Job ID hasn't been provided"},
		{name: "ID mismatch", method: "PUT", target: "/v1/job/other", body: `{"Job":{"ID":"web"}}`, code: 400, wantBody: "Job ID does not match name"},
		{name: "type error names the field", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web","Priority":"high"}}`, code: 400, wantBody: `Job.Priority`},
		{name: "malformed JSON", method: "PUT", target: "/v1/jobs", body: `{"Job":`, code: 400, wantBody: "Failed to decode request body"},
		{name: "empty body", method: "PUT", target: "/v1/jobs", body: ``, code: 400, wantBody: "empty body"},
		{name: "validation error", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web"}}`,
			serverErr: &structs.ValidationError{Errors: []string{`group "g": restart: interval must be at least 5s`}}, code: 400, wantBody: "interval must be at least 5s"},
		{name: "conflict", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web"}}`,
			serverErr: structs.NewError(structs.ErrConflict, "Enforcing job modify index 3: job exists with conflicting job modify index: 4"), code: 409, wantBody: "conflicting job modify index"},
		{name: "no leader", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web"}}`, serverErr: structs.ErrNoLeader, code: 503, wantBody: "No cluster leader"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, fake := newTestAPI(t, Config{})
			fake.err = tc.serverErr
			rec := do(t, api.Handler(), tc.method, tc.target, tc.body)
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.code, rec.Body.String())
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body %q lacks %q", rec.Body.String(), tc.wantBody)
			}
			if tc.code != 200 {
				if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("error Content-Type %q, want text/plain", ct)
				}
				return
			}
			if rec.Header().Get("X-Nomad-Index") != "40" {
				t.Errorf("X-Nomad-Index = %q", rec.Header().Get("X-Nomad-Index"))
			}
			resp := decodeJSON[structs.JobRegisterResponse](t, rec)
			if resp.EvalID != "eval-1" || resp.Index != 40 {
				t.Errorf("response = %+v", resp)
			}
			c := fake.lastCall(t)
			if job := c.Args[0].(*structs.Job); job.Namespace != tc.wantNS {
				t.Errorf("namespace %q, want %q", job.Namespace, tc.wantNS)
			}
		})
	}
}

func TestJobRegisterEnforceIndex(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	rec := do(t, api.Handler(), "PUT", "/v1/jobs", `{"Job":{"ID":"web"},"EnforceIndex":true,"JobModifyIndex":17}`)
	mustOK(t, rec)
	c := fake.lastCall(t)
	if c.Args[1] != true || c.Args[2] != uint64(17) {
		t.Errorf("enforce args = %v", c.Args[1:])
	}
}

func TestJobWrites(t *testing.T) {
	tests := []struct {
		name, method, target, body string
		code                       int
		wantCall                   string
		check                      func(t *testing.T, c call)
		wantIndex                  string
	}{
		{name: "stop", method: "DELETE", target: "/v1/job/web", code: 200, wantCall: "DeregisterJob", wantIndex: "41",
			check: func(t *testing.T, c call) {
				if c.Args[0] != "default" || c.Args[1] != "web" || c.Args[2] != false {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "purge child", method: "DELETE", target: "/v1/job/p%2Fperiodic-1?purge=true&namespace=prod", code: 200, wantCall: "DeregisterJob", wantIndex: "41",
			check: func(t *testing.T, c call) {
				if c.Args[0] != "prod" || c.Args[1] != "p/periodic-1" || c.Args[2] != true {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "bad purge", method: "DELETE", target: "/v1/job/web?purge=maybe", code: 400},
		{name: "evaluate", method: "POST", target: "/v1/job/web/evaluate", code: 200, wantCall: "EvaluateJob", wantIndex: "42",
			check: func(t *testing.T, c call) {
				if c.Args[2] != (structs.EvalOptions{}) {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "evaluate force reschedule", method: "PUT", target: "/v1/job/web/evaluate",
			body: `{"JobID":"web","EvalOptions":{"ForceReschedule":true}}`, code: 200, wantCall: "EvaluateJob", wantIndex: "42",
			check: func(t *testing.T, c call) {
				if c.Args[2] != (structs.EvalOptions{ForceReschedule: true}) {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "evaluate ID mismatch", method: "PUT", target: "/v1/job/web/evaluate", body: `{"JobID":"other"}`, code: 400},
		{name: "periodic force", method: "PUT", target: "/v1/job/cron/periodic/force", code: 200, wantCall: "ForcePeriodic", wantIndex: "44",
			check: func(t *testing.T, c call) {
				if c.Args[1] != "cron" {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "dispatch", method: "PUT", target: "/v1/job/param/dispatch?idempotency_token=tok",
			body: `{"Payload":"aGVsbG8=","Meta":{"color":"red"},"IdPrefixTemplate":"nightly","Priority":70}`,
			code: 200, wantCall: "DispatchJob", wantIndex: "43",
			check: func(t *testing.T, c call) {
				req := c.Args[1].(*structs.JobDispatchRequest)
				if req.JobID != "param" || string(req.Payload) != "hello" || req.Meta["color"] != "red" ||
					req.IdPrefixTemplate != "nightly" || req.Priority != 70 || req.IdempotencyToken != "tok" {
					t.Errorf("request %+v", req)
				}
			}},
		{name: "dispatch without body", method: "POST", target: "/v1/job/param/dispatch", code: 200, wantCall: "DispatchJob", wantIndex: "43"},
		{name: "dispatch ID mismatch", method: "PUT", target: "/v1/job/param/dispatch", body: `{"JobID":"other"}`, code: 400},
		{name: "dispatch bad payload", method: "PUT", target: "/v1/job/param/dispatch", body: `{"Payload":"not base64!"}`, code: 400},
		{name: "plan", method: "PUT", target: "/v1/job/web/plan", body: `{"Job":{"ID":"web"},"Diff":true}`, code: 200, wantCall: "PlanJob", wantIndex: "45",
			check: func(t *testing.T, c call) {
				if c.Args[0].(*structs.Job).Namespace != "default" || c.Args[1] != true {
					t.Errorf("args %v", c.Args)
				}
			}},
		{name: "plan ID mismatch", method: "PUT", target: "/v1/job/web/plan", body: `{"Job":{"ID":"x"}}`, code: 400},
		{name: "plan without job", method: "PUT", target: "/v1/job/web/plan", body: `{"Diff":true}`, code: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, fake := newTestAPI(t, Config{})
			rec := do(t, api.Handler(), tc.method, tc.target, tc.body)
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.code, rec.Body.String())
			}
			if tc.code != 200 {
				if fake.numCalls() != 0 {
					t.Errorf("a refused request reached the server")
				}
				return
			}
			if got := rec.Header().Get("X-Nomad-Index"); got != tc.wantIndex {
				t.Errorf("X-Nomad-Index = %q, want %q", got, tc.wantIndex)
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

func TestJobParse(t *testing.T) {
	api, _ := newTestAPI(t, Config{})
	hcl := `job "example" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`
	rec := do(t, api.Handler(), "POST", "/v1/jobs/parse", toJSONString(map[string]any{"JobHCL": hcl, "Canonicalize": true}))
	mustOK(t, rec)
	job := decodeJSON[structs.Job](t, rec)
	if job.ID != "example" || job.Type != "batch" || len(job.TaskGroups) != 1 || job.TaskGroups[0].Tasks[0].Driver != "raw_exec" {
		t.Errorf("job = %+v", job)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"JobHCL":"  "}`, "Job spec is empty"},
		{`{"JobHCL":"job \"x\" {"}`, "Failed to parse job"},
	} {
		rec := do(t, api.Handler(), "PUT", "/v1/jobs/parse", tc.body)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %q, want 400 %q", tc.body, rec.Code, rec.Body.String(), tc.want)
		}
	}
}

// typedServer is a fakeServer whose scheduler plugins declare types.
type typedServer struct {
	*fakeServer
	types map[string]*structs.JobTypeBehavior
}

func (s typedServer) JobTypeBehavior(jobType string) (*structs.JobTypeBehavior, bool) {
	b, ok := s.types[jobType]
	return b.Copy(), ok
}

// TestJobParseTypeDefaults: on a server agent the parse endpoint lays a
// group's blocks over the declaration of the plugin serving the job's type;
// without one it parses knowing no type.
func TestJobParseTypeDefaults(t *testing.T) {
	gpu := &structs.JobTypeBehavior{
		RunsToCompletion: true,
		DefaultRestart:   &structs.RestartPolicy{Attempts: 7, Interval: time.Hour, Delay: 3 * time.Second, Mode: structs.RestartPolicyModeDelay},
	}
	hcl := `job "example" {
  type = "gpu-batch"
  group "g" {
    restart {
      attempts = 1
    }
    task "t" {
      driver = "raw_exec"
    }
  }
}`
	store, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeServer{store: store, leader: "127.0.0.1:4647"}
	tests := []struct {
		name     string
		srv      Server
		restart  structs.RestartPolicy
		behavior *structs.JobTypeBehavior
	}{
		{
			name:    "declared type",
			srv:     typedServer{fake, map[string]*structs.JobTypeBehavior{"gpu-batch": gpu}},
			restart: structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: 3 * time.Second, Mode: structs.RestartPolicyModeDelay}, behavior: gpu,
		},
		{
			name:    "type no plugin serves",
			srv:     typedServer{fake, map[string]*structs.JobTypeBehavior{"other": gpu}},
			restart: structs.RestartPolicy{Attempts: 1},
		},
		{
			name:    "server without declarations",
			srv:     fake,
			restart: structs.RestartPolicy{Attempts: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api := New(Config{Server: tc.srv})
			rec := do(t, api.Handler(), "PUT", "/v1/jobs/parse", toJSONString(map[string]any{"JobHCL": hcl}))
			mustOK(t, rec)
			job := decodeJSON[structs.Job](t, rec)
			if got := job.TaskGroups[0].RestartPolicy; got == nil || *got != tc.restart {
				t.Errorf("group restart = %+v, want %+v", got, tc.restart)
			}
			if !reflect.DeepEqual(job.TypeBehavior, tc.behavior) {
				t.Errorf("TypeBehavior = %+v, want %+v", job.TypeBehavior, tc.behavior)
			}
		})
	}
}

// TestJobParseVariables: Variables holds var-file assignments for the job
// file's variables; a bad or missing value is a 400 naming its position,
// and the agent's environment never sets a variable.
func TestJobParseVariables(t *testing.T) {
	api, _ := newTestAPI(t, Config{})
	hcl := `variable "image" {
  type = string
}
variable "count" {
  type    = number
  default = 1
  validation {
    condition     = var.count > 0
    error_message = "count must be positive."
  }
}
job "example" {
  group "g" {
    count = var.count
    task "t" {
      driver = "docker"
      config { image = var.image }
    }
  }
}`
	t.Setenv("NOMAD_VAR_image", "from-the-agent-env")
	tests := []struct {
		name      string
		variables string
		code      int
		want      string // in the body
	}{
		{name: "values", variables: "image = \"redis:7\"\ncount = 3\n", code: 200, want: `"image":"redis:7"`},
		{name: "missing required", variables: "count = 2\n", code: 400, want: `job.hcl:1:1: Missing value for variable; Variable "image" has no default`},
		{name: "validation fails", variables: "image = \"x\"\ncount = 0\n", code: 400, want: "job.hcl:8:21: Invalid value for variable; count must be positive."},
		{name: "undeclared", variables: "image = \"x\"\nimage_tag = 2\n", code: 400, want: `Variables:2:1: Undeclared variable`},
		{name: "wrong type", variables: "image = \"x\"\ncount = \"many\"\n", code: 400, want: `Variables:2:9: Invalid value for variable`},
		{name: "bad syntax", variables: "image = \n", code: 400, want: "Variables:1:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := toJSONString(map[string]any{"JobHCL": hcl, "Variables": tc.variables})
			rec := do(t, api.Handler(), "PUT", "/v1/jobs/parse", body)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("%d %s, want %d with %q", rec.Code, rec.Body.String(), tc.code, tc.want)
			}
			if tc.code == 200 {
				job := decodeJSON[structs.Job](t, rec)
				if job.TaskGroups[0].Count != 3 {
					t.Errorf("count = %d, want 3", job.TaskGroups[0].Count)
				}
			}
		})
	}
}

package job

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

const periodicHCL = `job "cron" {
  type = "batch"
  periodic {
    crons = ["*/5 * * * *"]
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`

func TestJobRun(t *testing.T) {
	complete := &structs.Evaluation{ID: clitest.EvalID, JobID: "web", Status: "complete", CreateIndex: 10}
	placed := []*structs.AllocListStub{{ID: "a1b2c3d4-0000-0000-0000-000000000000", NodeID: "e5f6a7b8-0000-0000-0000-000000000000", TaskGroup: "g", CreateIndex: 11}}
	failed := &structs.Evaluation{ID: clitest.EvalID, JobID: "web", Status: "complete", CreateIndex: 10, BlockedEval: "b10c4ed0-0000-0000-0000-000000000000",
		FailedTGAllocs: map[string]*structs.AllocMetric{"g": {NodesEvaluated: 3, ConstraintFiltered: map[string]int{"${attr.kernel.name} = plan9": 3}}}}

	tests := []struct {
		name     string
		src      string
		args     []string
		eval     *structs.Evaluation
		allocs   []*structs.AllocListStub
		regErr   string
		code     int
		wantOut  []string
		wantErr  string
		checkReq func(t *testing.T, body map[string]any)
	}{
		{name: "monitors to completion", src: clitest.BatchHCL, eval: complete, allocs: placed, code: 0, wantOut: []string{
			`==> Monitoring evaluation "4f6c9e5e"`,
			`    Evaluation triggered by job "web"`,
			`    Allocation "a1b2c3d4" created: node "e5f6a7b8", group "g"`,
			`==> Evaluation "4f6c9e5e" finished with status "complete"`,
		}},
		{name: "placement failure exits 2", src: clitest.BatchHCL, eval: failed, code: 2, wantOut: []string{
			`==> Evaluation "4f6c9e5e" finished with status "complete" but failed to place all allocations:`,
			`    Task Group "g" (failed to place 1 allocation):`,
			`      * Constraint "${attr.kernel.name} = plan9": 3 nodes excluded by filter`,
			`    Evaluation "b10c4ed0" waiting for additional capacity to place remainder`,
		}},
		{name: "detach", src: clitest.BatchHCL, args: []string{"-detach"}, code: 0, wantOut: []string{"Job registration successful", "Evaluation ID: " + clitest.EvalID}},
		{name: "check index", src: clitest.BatchHCL, args: []string{"-detach", "-check-index", "0"}, code: 0,
			checkReq: func(t *testing.T, body map[string]any) {
				if body["EnforceIndex"] != true || body["JobModifyIndex"] != float64(0) {
					t.Errorf("body %v", body)
				}
			}},
		{name: "no check index", src: clitest.BatchHCL, args: []string{"-detach"}, code: 0,
			checkReq: func(t *testing.T, body map[string]any) {
				job := body["Job"].(map[string]any)
				if body["EnforceIndex"] != false || job["ID"] != "web" || job["Type"] != "batch" {
					t.Errorf("body %v", body)
				}
			}},
		{name: "periodic", src: periodicHCL, code: 0, wantOut: []string{"Job registration successful", "Approximate next launch time:", "(5m from now)"}},
		{name: "bad file", src: "job {", code: 1, wantErr: "Error getting job struct"},
		// The server's refusal is placed at the block each message names.
		{name: "server refusal", src: clitest.BatchHCL, regErr: "group \"g\": count must be positive", code: 1, wantErr: ".hcl:3:3: group \"g\": count must be positive)"},
		{name: "server refusals", src: clitest.BatchHCL, regErr: "2 errors occurred:\n\t* group \"g\": task \"t\": vault: not supported\n\t* job: x", code: 1,
			wantErr: ".hcl:4:5: group \"g\": task \"t\": vault: not supported\n\t* "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			if tc.regErr != "" {
				f.Fail("PUT /v1/jobs", 400, tc.regErr)
			} else {
				id := clitest.EvalID
				if tc.src == periodicHCL {
					id = ""
				}
				f.JSON("PUT /v1/jobs", structs.JobRegisterResponse{EvalID: id, Index: 10})
			}
			if tc.eval != nil {
				clitest.ServeEval(f, tc.eval, tc.allocs)
			}
			args := append([]string{"job", "run"}, tc.args...)
			r := f.Run(t, "", append(args, clitest.WriteJobFile(t, tc.src))...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stdout", r.Out, tc.wantOut...)
			clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
			if tc.checkReq != nil {
				var body map[string]any
				if err := json.Unmarshal(f.Request("PUT /v1/jobs").Body, &body); err != nil {
					t.Fatal(err)
				}
				tc.checkReq(t, body)
			}
		})
	}
}

func TestJobRunFromStdin(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/jobs", structs.JobRegisterResponse{EvalID: clitest.EvalID})
	r := f.Run(t, clitest.BatchHCL, "job", "run", "-detach", "-")
	clitest.WantCode(t, r, 0)
	if !strings.Contains(string(f.Request("PUT /v1/jobs").Body), `"ID":"web"`) {
		t.Error("job from stdin not submitted")
	}
}

// A job file that names no namespace goes to the CLI's: -namespace, then
// DROVER_NAMESPACE / NOMAD_NAMESPACE, as Nomad's CLI does; a file's own
// namespace wins. job plan posts the same job.
func TestJobFileNamespace(t *testing.T) {
	own := strings.Replace(clitest.BatchHCL, `type = "batch"`, `type = "batch"
  namespace = "own"`, 1)
	for _, tc := range []struct {
		name, src, want string
		args            []string
		env             map[string]string
	}{
		{name: "none", src: clitest.BatchHCL, want: "default"},
		{name: "flag", src: clitest.BatchHCL, args: []string{"-namespace", "team"}, want: "team"},
		{name: "NOMAD_NAMESPACE", src: clitest.BatchHCL, env: map[string]string{"NOMAD_NAMESPACE": "ops"}, want: "ops"},
		{name: "DROVER_NAMESPACE", src: clitest.BatchHCL, env: map[string]string{"DROVER_NAMESPACE": "ops2"}, want: "ops2"},
		{name: "file wins", src: own, args: []string{"-namespace", "team"}, want: "own"},
	} {
		for _, cmd := range []string{"run", "plan"} {
			t.Run(tc.name+"/"+cmd, func(t *testing.T) {
				f := clitest.NewFakeAgent(t)
				route := "PUT /v1/jobs"
				if cmd == "plan" {
					route = "PUT /v1/job/web/plan"
					f.JSON(route, &structs.JobPlanResponse{Diff: &structs.JobDiff{Type: "None", ID: "web"}})
				} else {
					f.JSON(route, structs.JobRegisterResponse{EvalID: clitest.EvalID, Index: 10})
				}
				env := map[string]string{"DROVER_ADDR": f.Srv.URL}
				for k, v := range tc.env {
					env[k] = v
				}
				args := append(append([]string{"job", cmd, "-detach"}, tc.args...), clitest.WriteJobFile(t, tc.src))
				if cmd == "plan" {
					args = append(append([]string{"job", cmd}, tc.args...), clitest.WriteJobFile(t, tc.src))
				}
				clitest.RunCLI(t, env, "", nil, args...)
				var body struct{ Job struct{ Namespace string } }
				if err := json.Unmarshal(f.Request(route).Body, &body); err != nil {
					t.Fatal(err)
				}
				if body.Job.Namespace != tc.want {
					t.Fatalf("posted job namespace %q, want %q", body.Job.Namespace, tc.want)
				}
			})
		}
	}
}

func TestJobPlan(t *testing.T) {
	tests := []struct {
		name    string
		resp    *structs.JobPlanResponse
		code    int
		wantOut []string
	}{
		{name: "new allocations exit 1", code: 1, resp: &structs.JobPlanResponse{
			Diff:           &structs.JobDiff{Type: "Added", ID: "web"},
			Annotations:    &structs.PlanAnnotations{DesiredTGUpdates: map[string]*structs.DesiredUpdates{"g": {Place: 3}}},
			JobModifyIndex: 0,
		}, wantOut: []string{`+ Job: "web"`, `+ Task Group: "g" (3 create)`, "- All tasks successfully allocated.", "drover job run -check-index 0 "}},
		{name: "no changes exit 0", code: 0, resp: &structs.JobPlanResponse{
			Diff:           &structs.JobDiff{Type: "None", ID: "web"},
			Annotations:    &structs.PlanAnnotations{DesiredTGUpdates: map[string]*structs.DesiredUpdates{"g": {Ignore: 3}}},
			JobModifyIndex: 12,
		}, wantOut: []string{`Task Group: "g" (3 ignore)`, "Job Modify Index: 12", "-check-index 12"}},
		{name: "edited with failures", code: 1, resp: &structs.JobPlanResponse{
			Diff: &structs.JobDiff{Type: "Edited", ID: "web", Fields: []*structs.FieldDiff{{Type: "Edited", Name: "Priority", Old: "50", New: "60"}}},
			Annotations: &structs.PlanAnnotations{DesiredTGUpdates: map[string]*structs.DesiredUpdates{
				"g": {DestructiveUpdate: 1, Ignore: 2}}},
			FailedTGAllocs: map[string]*structs.AllocMetric{"g": {NodesEvaluated: 0}},
		}, wantOut: []string{`+/- Job: "web"`, `+/- Priority: "50" => "60"`, `+/- Task Group: "g" (1 create/destroy update, 2 ignore)`,
			"- WARNING: Failed to place all allocations.", `  Task Group "g" (failed to place 1 allocation):`, "    * No nodes were eligible for evaluation"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.JSON("PUT /v1/job/web/plan", tc.resp)
			r := f.Run(t, "", "job", "plan", clitest.WriteJobFile(t, clitest.BatchHCL))
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stdout", r.Out, tc.wantOut...)
			if !strings.Contains(string(f.Request("PUT /v1/job/web/plan").Body), `"Diff":true`) {
				t.Error("plan did not ask for a diff")
			}
		})
	}
	t.Run("error exits 255", func(t *testing.T) {
		f := clitest.NewFakeAgent(t)
		f.Fail("PUT /v1/job/web/plan", 500, "boom")
		r := f.Run(t, "", "job", "plan", clitest.WriteJobFile(t, clitest.BatchHCL))
		clitest.WantCode(t, r, 255)
		clitest.WantContains(t, "stderr", r.ErrOut, "Error during plan")
		r = f.Run(t, "", "job", "plan", "-nope")
		clitest.WantCode(t, r, 255)
	})
}

func TestJobStop(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		stdin   string
		code    int
		query   string
		wantOut []string
		noCall  bool
	}{
		{name: "stop and monitor", args: []string{"web"}, query: "namespace=default", wantOut: []string{`==> Monitoring evaluation "4f6c9e5e"`, `finished with status "complete"`}},
		{name: "purge detached", args: []string{"-purge", "-detach", "web"}, query: "namespace=default&purge=true", wantOut: []string{clitest.EvalID}},
		{name: "prefix asks, yes", args: []string{"-detach", "we"}, stdin: "y\n", query: "namespace=default", wantOut: []string{`Are you sure you want to stop job "web"? [y/N]`, clitest.EvalID}},
		{name: "prefix asks, no", args: []string{"-detach", "we"}, stdin: "n\n", noCall: true, wantOut: []string{"Cancelling job stop"}},
		{name: "prefix -yes", args: []string{"-detach", "-yes", "we"}, query: "namespace=default", wantOut: []string{clitest.EvalID}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "web", Namespace: "default"}})
			f.JSON("DELETE /v1/job/web", structs.JobDeregisterResponse{EvalID: clitest.EvalID})
			clitest.ServeEval(f, &structs.Evaluation{ID: clitest.EvalID, JobID: "web", Status: "complete"}, nil)
			r := f.Run(t, tc.stdin, append([]string{"job", "stop"}, tc.args...)...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stdout", r.Out, tc.wantOut...)
			if tc.noCall {
				return
			}
			if q := f.Request("DELETE /v1/job/web").Query; q != tc.query {
				t.Errorf("query %q, want %q", q, tc.query)
			}
		})
	}
}

func TestJobDispatch(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/job/param/dispatch", structs.JobDispatchResponse{DispatchedJobID: "param/dispatch-1-abcd", EvalID: clitest.EvalID})
	r := f.Run(t, "the payload", "job", "dispatch", "-detach", "-meta", "color=red", "-meta", "size=xl",
		"-id-prefix-template", "nightly", "-idempotency-token", "tok-1", "param", "-")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "Dispatched Job ID = param/dispatch-1-abcd", "Evaluation ID     = "+clitest.EvalID)
	req := f.Request("PUT /v1/job/param/dispatch")
	if req.Query != "idempotency_token=tok-1" {
		t.Errorf("query %q", req.Query)
	}
	var body struct {
		Payload          []byte
		Meta             map[string]string
		IdPrefixTemplate string
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	if string(body.Payload) != "the payload" || body.Meta["color"] != "red" || body.Meta["size"] != "xl" || body.IdPrefixTemplate != "nightly" {
		t.Errorf("body %+v", body)
	}

	r = f.Run(t, "", "job", "dispatch", "-meta", "novalue", "param")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "must be key=value")

	f.Fail("PUT /v1/job/param/dispatch", 400, "Dispatch did not provide required meta keys: [color]")
	r = f.Run(t, "", "job", "dispatch", "param")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Failed to dispatch job", "required meta keys: [color]")
}

func TestJobPeriodicForce(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "cron", Namespace: "default", Periodic: true}, {ID: "web", Namespace: "default"}})
	f.JSON("PUT /v1/job/cron/periodic/force", structs.PeriodicForceResponse{EvalID: clitest.EvalID})
	r := f.Run(t, "", "job", "periodic", "force", "-detach", "cron")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "Force periodic successful", "Evaluation ID: "+clitest.EvalID)

	r = f.Run(t, "", "job", "periodic", "force", "web")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, `Job "web" is not periodic`)
}

func TestJobEval(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		force bool
	}{
		{[]string{"job", "eval", "-detach", "web"}, false},
		{[]string{"job", "eval", "-detach", "-force-reschedule", "web"}, true},
	} {
		f := clitest.NewFakeAgent(t)
		f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "web", Namespace: "default"}})
		var got struct {
			JobID       string
			EvalOptions structs.EvalOptions
		}
		f.Handle("PUT /v1/job/web/evaluate", func(w http.ResponseWriter, r *http.Request) {
			if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
				t.Errorf("body: %v", err)
			}
			_ = json.NewEncoder(w).Encode(structs.JobRegisterResponse{EvalID: clitest.EvalID})
		})
		r := f.Run(t, "", tc.args...)
		clitest.WantCode(t, r, 0)
		clitest.WantContains(t, "stdout", r.Out, "Evaluation created", "Evaluation ID: "+clitest.EvalID)
		if got.JobID != "web" || got.EvalOptions.ForceReschedule != tc.force {
			t.Errorf("%v: body %+v, want JobID web and ForceReschedule %v", tc.args, got, tc.force)
		}
	}
}

func TestJobInspect(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "web"}})
	f.Handle("GET /v1/job/web", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"ID":"web","SubmitTime":1796221963506792833,"Version":2}`))
	})
	f.JSON("GET /v1/job/web/versions", map[string]any{"Versions": []map[string]any{{"ID": "web", "Version": 2}, {"ID": "web", "Version": 1}}})
	r := f.Run(t, "", "job", "inspect", "web")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, `"Job": {`, `"SubmitTime": 1796221963506792833`)

	r = f.Run(t, "", "job", "inspect", "-version", "1", "web")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, `"Version": 1`)

	r = f.Run(t, "", "job", "inspect", "-version", "9", "web")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, `Job "web" has no version 9`)
}

func TestMonitorFollowsChangesAndNextEval(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	const nextID = "5e5e5e5e-0000-0000-0000-000000000000"
	var looks atomic.Int32
	// First look: pending with one pending alloc; second: the alloc runs
	// and the eval completes, pointing at a follow-up eval.
	f.Handle("GET /v1/evaluation/"+clitest.EvalID, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Nomad-Index", "7")
		e := &structs.Evaluation{ID: clitest.EvalID, JobID: "web", Status: "pending", CreateIndex: 10}
		if looks.Add(1) > 1 {
			e.Status, e.NextEval, e.Wait = "complete", nextID, 5*time.Second
		}
		_ = json.NewEncoder(w).Encode(e)
	})
	f.Handle("GET /v1/evaluation/"+clitest.EvalID+"/allocations", func(w http.ResponseWriter, r *http.Request) {
		a := &structs.AllocListStub{ID: "a1b2c3d4-0", NodeID: "e5f6a7b8-0", TaskGroup: "g", CreateIndex: 11, ClientStatus: "pending"}
		if looks.Load() > 1 {
			a.ClientStatus, a.ClientDescription = "running", "Tasks are running"
		}
		_ = json.NewEncoder(w).Encode([]*structs.AllocListStub{a})
	})
	clitest.ServeEval(f, &structs.Evaluation{ID: nextID, JobID: "web", Status: "complete", CreateIndex: 12}, nil)

	m := &cli.Monitor{UI: &cli.UI{Out: &strings.Builder{}, Err: &strings.Builder{}}, Client: &cli.APIClient{Address: f.Srv.URL}}
	code := m.Run(context.Background(), clitest.EvalID)
	out := m.UI.Out.(*strings.Builder).String()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	want := `==> Monitoring evaluation "4f6c9e5e"
    Evaluation triggered by job "web"
    Allocation "a1b2c3d4" created: node "e5f6a7b8", group "g"
    Allocation "a1b2c3d4" status changed: "pending" -> "running" (Tasks are running)
    Evaluation status changed: "pending" -> "complete"
==> Monitoring next evaluation "5e5e5e5e" in 5s
    Evaluation triggered by job "web"
==> Evaluation "5e5e5e5e" finished with status "complete"
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	// The second look at the first eval was a blocking query.
	if q := f.Request("GET /v1/evaluation/" + clitest.EvalID).Query; q != "index=7&wait=30s" {
		t.Errorf("blocking query %q", q)
	}
}

// `job run` and `job plan` parse the job file with the declarations the
// agent's scheduler plugins make (GET /v1/agent/plugins), and without them
// when the agent cannot give them.
func TestJobFileUsesAgentTypeDefaults(t *testing.T) {
	const src = `job "gpu" {
  type = "gpu-batch"
  group "g" {
    restart {
      attempts = 1
    }
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`
	declared := structs.JobTypeBehavior{
		RunsToCompletion: true,
		DefaultRestart:   &structs.RestartPolicy{Attempts: 7, Interval: time.Hour, Delay: 3 * time.Second, Mode: structs.RestartPolicyModeDelay},
	}
	plugins := map[string]any{"Plugins": []structs.AgentPlugin{
		{Name: "rawexec", Kind: "driver", Builtin: true, Health: structs.AgentPluginHealthy},
		{Name: "gpu", Kind: "scheduler", Path: "/opt/drover/plugins/gpu", Health: structs.AgentPluginHealthy,
			JobTypes: []structs.AgentJobType{{Name: "gpu-batch", Behavior: declared}}},
	}}
	laid := structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: 3 * time.Second, Mode: structs.RestartPolicyModeDelay}
	offline := structs.RestartPolicy{Attempts: 1}

	tests := []struct {
		name    string
		cmd     string
		serve   func(f *clitest.FakeAgent)
		restart structs.RestartPolicy
	}{
		{"run with the agent's declarations", "run", func(f *clitest.FakeAgent) { f.JSON("GET /v1/agent/plugins", plugins) }, laid},
		{"plan with the agent's declarations", "plan", func(f *clitest.FakeAgent) { f.JSON("GET /v1/agent/plugins", plugins) }, laid},
		{"agent without the plugin list (404)", "run", func(*clitest.FakeAgent) {}, offline},
		{"agent failing the plugin list", "run", func(f *clitest.FakeAgent) { f.Fail("GET /v1/agent/plugins", 500, "boom") }, offline},
		{"agent answering garbage", "run", func(f *clitest.FakeAgent) {
			f.Handle("GET /v1/agent/plugins", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{not json")) })
		}, offline},
		{"no scheduler declares the type", "run", func(f *clitest.FakeAgent) {
			f.JSON("GET /v1/agent/plugins", map[string]any{"Plugins": []structs.AgentPlugin{{Name: "rawexec", Kind: "driver"}}})
		}, offline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			tc.serve(f)
			f.JSON("PUT /v1/jobs", structs.JobRegisterResponse{EvalID: clitest.EvalID, Index: 10})
			f.JSON("PUT /v1/job/gpu/plan", structs.JobPlanResponse{JobModifyIndex: 0})
			var key string
			var r clitest.Result
			if tc.cmd == "run" {
				key = "PUT /v1/jobs"
				r = f.Run(t, "", "job", "run", "-detach", clitest.WriteJobFile(t, src))
			} else {
				key = "PUT /v1/job/gpu/plan"
				r = f.Run(t, "", "job", "plan", clitest.WriteJobFile(t, src))
			}
			clitest.WantCode(t, r, 0)
			f.Request("GET /v1/agent/plugins")
			var body struct{ Job structs.Job }
			if err := json.Unmarshal(f.Request(key).Body, &body); err != nil {
				t.Fatal(err)
			}
			if got := body.Job.TaskGroups[0].RestartPolicy; got == nil || *got != tc.restart {
				t.Errorf("submitted group restart = %+v, want %+v", got, tc.restart)
			}
		})
	}
}

package job

import (
	"encoding/json"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestJobScale(t *testing.T) {
	oneGroup := &structs.Job{ID: "web", Namespace: "default", TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1}}}
	twoGroups := &structs.Job{ID: "web", Namespace: "default", TaskGroups: []*structs.TaskGroup{{Name: "g"}, {Name: "h"}}}
	complete := &structs.Evaluation{ID: clitest.EvalID, JobID: "web", Status: "complete", CreateIndex: 10}
	tests := []struct {
		name      string
		args      []string
		job       *structs.Job // GET /v1/job/web; nil: none served
		jobs      []*structs.JobListStub
		scaleErr  string
		code      int
		wantOut   []string
		wantErr   string
		wantGroup string
		wantCount int64
		wantIndex uint64
		noEval    bool
	}{
		{name: "group and count, detached", args: []string{"-detach", "web", "g", "3"}, code: 0,
			wantOut: []string{"Job scale successful", "Evaluation ID: " + clitest.EvalID}, wantGroup: "g", wantCount: 3},
		{name: "group looked up when the job has one", args: []string{"-detach", "web", "0"}, job: oneGroup, code: 0,
			wantOut: []string{"Evaluation ID: " + clitest.EvalID}, wantGroup: "g", wantCount: 0},
		{name: "check index", args: []string{"-detach", "-check-index", "12", "web", "g", "2"}, code: 0,
			wantGroup: "g", wantCount: 2, wantIndex: 12},
		{name: "monitors the eval", args: []string{"web", "g", "2"}, code: 0,
			wantOut: []string{`==> Monitoring evaluation "4f6c9e5e"`, `finished with status "complete"`}, wantGroup: "g", wantCount: 2},
		{name: "periodic parent: no eval to monitor", args: []string{"cron", "g", "2"}, jobs: []*structs.JobListStub{{ID: "cron", Namespace: "default", Periodic: true}},
			noEval: true, code: 0, wantOut: []string{"Job scale successful"}},
		{name: "group required with several", args: []string{"web", "2"}, job: twoGroups, code: 1,
			wantErr: `Job "web" has 2 task groups: name the one to scale`},
		{name: "count not a number", args: []string{"web", "g", "many"}, code: 1, wantErr: `Count must be a non-negative whole number, got "many"`},
		{name: "too few arguments", args: []string{"web"}, code: 1, wantErr: "This command takes two or three arguments"},
		{name: "unknown job", args: []string{"nope", "g", "2"}, jobs: []*structs.JobListStub{}, code: 1, wantErr: `No job(s) with prefix or id "nope" found`},
		{name: "server refusal", args: []string{"web", "g", "9"}, scaleErr: `group "g": count is 9, but batch jobs run at most 5`, code: 1,
			wantErr: `Error scaling job: Unexpected response code: 400 (group "g": count is 9, but batch jobs run at most 5`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			jobs := tc.jobs
			if jobs == nil {
				jobs = []*structs.JobListStub{{ID: "web", Namespace: "default", Type: "batch"}}
			}
			f.JSON("GET /v1/jobs", jobs)
			if tc.job != nil {
				f.JSON("GET /v1/job/web", tc.job)
			}
			switch {
			case tc.noEval:
				f.JSON("PUT /v1/job/cron/scale", structs.JobRegisterResponse{Index: 10})
			case tc.scaleErr != "":
				f.Fail("PUT /v1/job/web/scale", 400, tc.scaleErr)
			default:
				f.JSON("PUT /v1/job/web/scale", structs.JobRegisterResponse{EvalID: clitest.EvalID, Index: 10})
			}
			clitest.ServeEval(f, complete, nil)
			r := f.Run(t, "", append([]string{"job", "scale"}, tc.args...)...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stdout", r.Out, tc.wantOut...)
			clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
			if tc.wantGroup == "" {
				return
			}
			var body structs.ScalingRequest
			if err := json.Unmarshal(f.Request("PUT /v1/job/web/scale").Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.Count == nil || *body.Count != tc.wantCount || body.Target["Group"] != tc.wantGroup || body.Target["Job"] != "web" || body.JobModifyIndex != tc.wantIndex {
				t.Errorf("scale request %+v (count %v), want group %q count %d index %d", body, body.Count, tc.wantGroup, tc.wantCount, tc.wantIndex)
			}
		})
	}
}

func TestJobRevert(t *testing.T) {
	complete := &structs.Evaluation{ID: clitest.EvalID, JobID: "web", Status: "complete", CreateIndex: 10}
	tests := []struct {
		name        string
		args        []string
		revertErr   string
		code        int
		wantOut     []string
		wantErr     string
		wantVersion *uint64
	}{
		{name: "detached", args: []string{"-detach", "web", "0"}, code: 0, wantOut: []string{clitest.EvalID}, wantVersion: new(uint64(0))},
		{name: "monitors the eval", args: []string{"web", "2"}, code: 0, wantOut: []string{`==> Monitoring evaluation "4f6c9e5e"`}, wantVersion: new(uint64(2))},
		{name: "version not a number", args: []string{"web", "latest"}, code: 1, wantErr: `Version must be a non-negative whole number, got "latest"`},
		{name: "one argument", args: []string{"web"}, code: 1, wantErr: "This command takes two arguments: <job> <version>"},
		{name: "server refusal", args: []string{"web", "1"}, revertErr: "JobVersion: can't revert to the current version 1", code: 1,
			wantErr: `Error reverting job "web" to version 1: Unexpected response code: 400 (JobVersion: can't revert to the current version 1)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "web", Namespace: "default", Type: "batch"}})
			if tc.revertErr != "" {
				f.Fail("PUT /v1/job/web/revert", 400, tc.revertErr)
			} else {
				f.JSON("PUT /v1/job/web/revert", structs.JobRegisterResponse{EvalID: clitest.EvalID, Index: 10})
			}
			clitest.ServeEval(f, complete, nil)
			r := f.Run(t, "", append([]string{"job", "revert"}, tc.args...)...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stdout", r.Out, tc.wantOut...)
			clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
			if tc.wantVersion == nil {
				return
			}
			var body structs.JobRevertRequest
			if err := json.Unmarshal(f.Request("PUT /v1/job/web/revert").Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.JobID != "web" || body.JobVersion != *tc.wantVersion || body.EnforcePriorVersion != nil {
				t.Errorf("revert request %+v, want job web version %d", body, *tc.wantVersion)
			}
		})
	}
}

package job

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

var testDeployment = &structs.Deployment{
	ID: "d1d1d1d1-aaaa-bbbb-cccc-000000000001", Namespace: "default", JobID: "web", JobVersion: 3,
	Status: structs.DeploymentStatusRunning, StatusDescription: structs.DeploymentStatusDescriptionRunningNeedsPromotion,
	CreateIndex: 10,
	TaskGroups: map[string]*structs.DeploymentState{
		"api": {AutoRevert: true, DesiredTotal: 3, DesiredCanaries: 1, PlacedAllocs: 1, HealthyAllocs: 1,
			PlacedCanaries: []string{"c1"}, RequireProgressBy: time.Date(2026, 5, 1, 12, 10, 0, 0, time.UTC)},
		"worker": {DesiredTotal: 2, PlacedAllocs: 2, HealthyAllocs: 1, UnhealthyAllocs: 1},
	},
}

func TestDeploymentStatusAndList(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/deployments", []*structs.Deployment{testDeployment})
	r := f.Run(t, "", "deployment", "status", "d1d1")
	clitest.WantCode(t, r, 0)
	if q := f.Request("GET /v1/deployments").Query; q != "namespace=%2A&prefix=d1d1" {
		t.Errorf("lookup query %q", q)
	}
	clitest.WantContains(t, "status", r.Out,
		"ID          = d1d1d1d1\nJob ID      = web\nJob Version = 3\nStatus      = running\nDescription = Deployment is running but requires manual promotion",
		"Deployed\nTask Group  Auto Revert  Promoted  Desired  Canaries  Placed  Healthy  Unhealthy  Progress Deadline\n"+
			"api         true         false     3        1         1       1        0          2026-05-01T12:10:00Z\n"+
			"worker      false        N/A       2        0         2       1        1          N/A",
	)
	r = f.Run(t, "", "deployment", "list")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list", r.Out, "ID        Job ID  Job Version  Status   Description\nd1d1d1d1  web     3            running  Deployment is running but requires manual promotion")

	f.JSON("GET /v1/deployments", []*structs.Deployment{}) // the agent filters by prefix
	r = f.Run(t, "", "deployment", "status", "zz")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, `No deployment(s) with prefix or id "zz" found`)
}

func TestDeploymentWrites(t *testing.T) {
	id := testDeployment.ID
	reverted := uint64(2)
	tests := []struct {
		args     []string
		action   string
		answer   *structs.DeploymentUpdateResponse
		wantBody map[string]any
		wantOut  string
	}{
		{[]string{"promote", "d1d1"}, "promote", &structs.DeploymentUpdateResponse{EvalID: "eeeeeeee-1"},
			map[string]any{"DeploymentID": id, "All": true, "Groups": nil}, "Deployment \"d1d1d1d1\" promoted\nEvaluation ID: eeeeeeee"},
		{[]string{"promote", "-group", "api", "-group", "worker", "d1d1"}, "promote", &structs.DeploymentUpdateResponse{},
			map[string]any{"DeploymentID": id, "All": false, "Groups": []any{"api", "worker"}}, "promoted"},
		{[]string{"pause", "d1d1"}, "pause", &structs.DeploymentUpdateResponse{}, map[string]any{"DeploymentID": id, "Pause": true}, "paused"},
		{[]string{"resume", "d1d1"}, "pause", &structs.DeploymentUpdateResponse{}, map[string]any{"DeploymentID": id, "Pause": false}, "resumed"},
		{[]string{"fail", "d1d1"}, "fail", &structs.DeploymentUpdateResponse{RevertedJobVersion: &reverted},
			map[string]any{"DeploymentID": id}, "Deployment \"d1d1d1d1\" failed. Auto-reverted to job version 2."},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.JSON("GET /v1/deployments", []*structs.Deployment{testDeployment})
			f.JSON("PUT /v1/deployment/"+tt.action+"/"+id, tt.answer)
			r := f.Run(t, "", append([]string{"deployment"}, tt.args...)...)
			clitest.WantCode(t, r, 0)
			clitest.WantContains(t, "stdout", r.Out, tt.wantOut)
			var got map[string]any
			if err := json.Unmarshal(f.Request("PUT /v1/deployment/"+tt.action+"/"+id).Body, &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.wantBody {
				if b1, _ := json.Marshal(got[k]); string(b1) != mustJSON(want) {
					t.Errorf("body %s = %s, want %s", k, b1, mustJSON(want))
				}
			}
		})
	}
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/deployments", []*structs.Deployment{testDeployment})
	f.Fail("PUT /v1/deployment/fail/"+id, 400, "can't fail terminal deployment")
	r := f.Run(t, "", "deployment", "fail", "d1d1")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Error failing deployment", "terminal deployment")
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestJobStatusLatestDeployment(t *testing.T) {
	for _, declared := range []bool{true, false} {
		f := clitest.NewFakeAgent(t)
		f.JSON("GET /v1/jobs", []*structs.JobListStub{{ID: "web"}})
		f.JSON("GET /v1/job/web", &structs.Job{ID: "web", Name: "web", Type: "service", Status: "running",
			TypeBehavior: &structs.JobTypeBehavior{Deployments: declared},
			TaskGroups:   []*structs.TaskGroup{{Name: "api"}, {Name: "worker"}}})
		f.JSON("GET /v1/job/web/summary", &structs.JobSummary{JobID: "web"})
		f.JSON("GET /v1/job/web/evaluations", []*structs.Evaluation{})
		f.JSON("GET /v1/job/web/allocations", []*structs.AllocListStub{})
		f.JSON("GET /v1/job/web/deployment", testDeployment)
		r := f.Run(t, "", "job", "status", "web")
		clitest.WantCode(t, r, 0)
		section := "Latest Deployment\nID          = d1d1d1d1\nStatus      = running\nDescription = Deployment is running but requires manual promotion\n\nDeployed\nTask Group  Auto Revert"
		if declared {
			clitest.WantContains(t, "job status", r.Out, section)
		} else if strings.Contains(r.Out, "Latest Deployment") {
			t.Errorf("a type without deployments shows one:\n%s", r.Out)
		}
	}
}

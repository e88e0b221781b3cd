package command

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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
	f := newFakeAgent(t)
	f.json("GET /v1/deployments", []*structs.Deployment{testDeployment})
	r := f.run(t, "", "deployment", "status", "d1d1")
	wantCode(t, r, 0)
	if q := f.request("GET /v1/deployments").Query; q != "namespace=%2A&prefix=d1d1" {
		t.Errorf("lookup query %q", q)
	}
	wantContains(t, "status", r.out,
		"ID          = d1d1d1d1\nJob ID      = web\nJob Version = 3\nStatus      = running\nDescription = Deployment is running but requires manual promotion",
		"Deployed\nTask Group  Auto Revert  Promoted  Desired  Canaries  Placed  Healthy  Unhealthy  Progress Deadline\n"+
			"api         true         false     3        1         1       1        0          2026-05-01T12:10:00Z\n"+
			"worker      false        N/A       2        0         2       1        1          N/A",
	)
	r = f.run(t, "", "deployment", "list")
	wantCode(t, r, 0)
	wantContains(t, "list", r.out, "ID        Job ID  Job Version  Status   Description\nd1d1d1d1  web     3            running  Deployment is running but requires manual promotion")

	f.json("GET /v1/deployments", []*structs.Deployment{}) // the agent filters by prefix
	r = f.run(t, "", "deployment", "status", "zz")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.errOut, `No deployment(s) with prefix or id "zz" found`)
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
			f := newFakeAgent(t)
			f.json("GET /v1/deployments", []*structs.Deployment{testDeployment})
			f.json("PUT /v1/deployment/"+tt.action+"/"+id, tt.answer)
			r := f.run(t, "", append([]string{"deployment"}, tt.args...)...)
			wantCode(t, r, 0)
			wantContains(t, "stdout", r.out, tt.wantOut)
			var got map[string]any
			if err := json.Unmarshal(f.request("PUT /v1/deployment/"+tt.action+"/"+id).Body, &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range tt.wantBody {
				if b1, _ := json.Marshal(got[k]); string(b1) != mustJSON(want) {
					t.Errorf("body %s = %s, want %s", k, b1, mustJSON(want))
				}
			}
		})
	}
	f := newFakeAgent(t)
	f.json("GET /v1/deployments", []*structs.Deployment{testDeployment})
	f.fail("PUT /v1/deployment/fail/"+id, 400, "can't fail terminal deployment")
	r := f.run(t, "", "deployment", "fail", "d1d1")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.errOut, "Error failing deployment", "terminal deployment")
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestJobStatusLatestDeployment(t *testing.T) {
	for _, declared := range []bool{true, false} {
		f := newFakeAgent(t)
		f.json("GET /v1/jobs", []*structs.JobListStub{{ID: "web"}})
		f.json("GET /v1/job/web", &structs.Job{ID: "web", Name: "web", Type: "service", Status: "running",
			TypeBehavior: &structs.JobTypeBehavior{Deployments: declared},
			TaskGroups:   []*structs.TaskGroup{{Name: "api"}, {Name: "worker"}}})
		f.json("GET /v1/job/web/summary", &structs.JobSummary{JobID: "web"})
		f.json("GET /v1/job/web/evaluations", []*structs.Evaluation{})
		f.json("GET /v1/job/web/allocations", []*structs.AllocListStub{})
		f.json("GET /v1/job/web/deployment", testDeployment)
		r := f.run(t, "", "job", "status", "web")
		wantCode(t, r, 0)
		section := "Latest Deployment\nID          = d1d1d1d1\nStatus      = running\nDescription = Deployment is running but requires manual promotion\n\nDeployed\nTask Group  Auto Revert"
		if declared {
			wantContains(t, "job status", r.out, section)
		} else if strings.Contains(r.out, "Latest Deployment") {
			t.Errorf("a type without deployments shows one:\n%s", r.out)
		}
	}
}

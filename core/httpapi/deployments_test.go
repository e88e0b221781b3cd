package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

func (f *fakeServer) Promote(_ context.Context, id string, all bool, groups []string) (*structs.DeploymentUpdateResponse, error) {
	if err := f.record("PromoteDeployment", id, all, groups); err != nil {
		return nil, err
	}
	return &structs.DeploymentUpdateResponse{EvalID: "eval-p", Index: 60}, nil
}

func (f *fakeServer) Pause(_ context.Context, id string, pause bool) (*structs.DeploymentUpdateResponse, error) {
	if err := f.record("PauseDeployment", id, pause); err != nil {
		return nil, err
	}
	return &structs.DeploymentUpdateResponse{Index: 61}, nil
}

func (f *fakeServer) Fail(_ context.Context, id string) (*structs.DeploymentUpdateResponse, error) {
	if err := f.record("FailDeployment", id); err != nil {
		return nil, err
	}
	return &structs.DeploymentUpdateResponse{Index: 62}, nil
}

func (f *fakeServer) SetAllocHealth(_ context.Context, id string, healthy, unhealthy []string) (*structs.DeploymentUpdateResponse, error) {
	if err := f.record("SetDeploymentAllocHealth", id, healthy, unhealthy); err != nil {
		return nil, err
	}
	return &structs.DeploymentUpdateResponse{Index: 63}, nil
}

// TestDeploymentsNomadAPI reads and writes deployments of a real server
// through the official client.
func TestDeploymentsNomadAPI(t *testing.T) {
	srv := devServer(t, false)
	st := srv.State()
	node := &structs.Node{ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n", Datacenter: "dc1",
		NodePool: structs.NodePoolDefault, Status: structs.NodeStatusReady}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.UpsertNode(st.LatestIndex()+1, node))
	job := testJob(structs.DefaultNamespace, "web")
	must(st.UpsertJob(st.LatestIndex()+1, job))
	job, _ = st.JobByID(nil, structs.DefaultNamespace, "web")
	d := &structs.Deployment{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, JobVersion: job.Version,
		JobCreateIndex: job.CreateIndex, Status: structs.DeploymentStatusPaused, StatusDescription: structs.DeploymentStatusDescriptionPaused,
		TaskGroups: map[string]*structs.DeploymentState{"g": {DesiredTotal: 2, DesiredCanaries: 1,
			ProgressDeadline: 10 * time.Minute, RequireProgressBy: time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)}}}
	canary := &structs.Allocation{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, Job: job, NodeID: node.ID,
		TaskGroup: "g", Name: "web.g[0]", DeploymentID: d.ID, DeploymentStatus: &structs.AllocDeploymentStatus{Canary: true}}
	must(st.UpsertPlanResults(st.LatestIndex()+1, &structs.ApplyPlanResultsRequest{Job: job, Deployment: d, AllocsUpdated: []*structs.Allocation{canary}}))

	h := New(serverConfig(srv, Config{}))
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	must(err)
	deps := c.Deployments()

	list, meta, err := deps.List(nil)
	must(err)
	if len(list) != 1 || list[0].ID != d.ID || meta.LastIndex == 0 {
		t.Fatalf("List = %+v (index %d)", list, meta.LastIndex)
	}
	if byPrefix, _, err := deps.PrefixList(d.ID[:6]); err != nil || len(byPrefix) != 1 {
		t.Errorf("PrefixList = %v, %v", byPrefix, err)
	}
	info, _, err := deps.Info(d.ID[:8], nil) // a unique prefix names it
	must(err)
	g := info.TaskGroups["g"]
	if info.Status != structs.DeploymentStatusPaused || g.DesiredTotal != 2 || g.PlacedAllocs != 1 ||
		len(g.PlacedCanaries) != 1 || !g.RequireProgressBy.Equal(d.TaskGroups["g"].RequireProgressBy) || g.ProgressDeadline != 10*time.Minute {
		t.Errorf("Info = %+v, group %+v", info, g)
	}
	if _, _, err := deps.Info(uuid.NewString(), nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Info of an unknown deployment: %v, want a 404", err)
	}
	allocs, _, err := deps.Allocations(d.ID, nil)
	must(err)
	if len(allocs) != 1 || allocs[0].DeploymentStatus == nil || !allocs[0].DeploymentStatus.Canary {
		t.Fatalf("Allocations = %+v", allocs)
	}
	jobDeps, _, err := c.Jobs().Deployments("web", false, nil)
	must(err)
	latest, _, err := c.Jobs().LatestDeployment("web", nil)
	must(err)
	if len(jobDeps) != 1 || latest == nil || latest.ID != d.ID {
		t.Errorf("job deployments %d, latest %v", len(jobDeps), latest)
	}
	if none, _, err := c.Jobs().LatestDeployment("nojob", nil); err != nil || none != nil {
		t.Errorf("latest deployment of a job without one: %v, %v; want nil", none, err)
	}

	// Writes: manual health, promotion, pause/resume, fail.
	if _, _, err := deps.PromoteAll(d.ID, nil); err == nil || !strings.Contains(err.Error(), "healthy canaries") {
		t.Errorf("promoting an unhealthy canary: %v", err)
	}
	if _, _, err := deps.SetAllocHealth(d.ID, []string{canary.ID}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := deps.Info(d.ID, nil); got.TaskGroups["g"].HealthyAllocs != 1 {
		t.Errorf("after manual health: %+v", got.TaskGroups["g"])
	}
	resp, _, err := deps.PromoteGroups(d.ID, []string{"g"}, nil)
	must(err)
	if resp.EvalID == "" || resp.DeploymentModifyIndex == 0 {
		t.Errorf("promote answer %+v", resp)
	}
	if got, _, _ := deps.Info(d.ID, nil); !got.TaskGroups["g"].Promoted {
		t.Errorf("not promoted")
	}
	if _, _, err := deps.Pause(d.ID, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := deps.Pause(d.ID, true, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := deps.Info(d.ID, nil); got.Status != structs.DeploymentStatusPaused {
		t.Errorf("status after pause %s", got.Status)
	}
	if _, _, err := deps.Fail(d.ID, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := deps.Info(d.ID, nil); got.Status != structs.DeploymentStatusFailed {
		t.Errorf("status after fail %s", got.Status)
	}
	if _, _, err := deps.Fail(d.ID, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("failing a failed deployment: %v, want a 400", err)
	}
}

func TestDeploymentWriteRefusals(t *testing.T) {
	h, fake := newTestAPI(t, Config{})
	job := testJob(structs.DefaultNamespace, "web")
	seedJob(t, fake.store, 10, job)
	d := &structs.Deployment{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, Status: structs.DeploymentStatusRunning,
		TaskGroups: map[string]*structs.DeploymentState{"g": {}}}
	if err := fake.store.UpsertDeployment(11, d); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path, body string
		code                     int
		call                     string
	}{
		{"unknown deployment", "PUT", "/v1/deployment/fail/" + uuid.NewString(), "", http.StatusNotFound, ""},
		{"body names another deployment", "PUT", "/v1/deployment/pause/" + d.ID, `{"DeploymentID":"x","Pause":true}`, http.StatusBadRequest, ""},
		{"bad body", "PUT", "/v1/deployment/promote/" + d.ID, `{"All":"yes"}`, http.StatusBadRequest, ""},
		{"GET is not a write", "GET", "/v1/deployment/fail/" + d.ID, "", http.StatusMethodNotAllowed, ""},
		{"promote", "POST", "/v1/deployment/promote/" + d.ID, `{"DeploymentID":"` + d.ID + `","All":true}`, http.StatusOK, "PromoteDeployment"},
		{"health", "PUT", "/v1/deployment/allocation-health/" + d.ID, `{"HealthyAllocationIDs":["a"]}`, http.StatusOK, "SetDeploymentAllocHealth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fake.numCalls()
			rec := do(t, h.Handler(), tt.method, tt.path, tt.body)
			if rec.Code != tt.code {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.code, rec.Body.String())
			}
			if tt.call == "" {
				if fake.numCalls() != before {
					t.Errorf("a refused request reached the server")
				}
				return
			}
			if got := fake.lastCall(t); got.Method != tt.call || got.Args[0] != d.ID {
				t.Errorf("server got %s%v, want %s for %s", got.Method, got.Args, tt.call, d.ID)
			}
			if rec.Header().Get(headerIndex) == "" {
				t.Errorf("write answer without an index header")
			}
		})
	}
}

// deploymentMatrixCases adds a running deployment of job "web" in each of
// "default" and "team" and returns the ACL matrix cases of the deployment
// routes. A caller that may not read the deployment's namespace is told it
// does not exist (404), as for allocations and evals; one that may read
// but not submit is refused (403).
func deploymentMatrixCases(w *aclWorld) []matrixCase {
	st := w.h.srv.State()
	ids := map[string]string{}
	for _, ns := range []string{"default", "team"} {
		d := &structs.Deployment{ID: uuid.NewString(), Namespace: ns, JobID: "web", Status: structs.DeploymentStatusRunning,
			TaskGroups: map[string]*structs.DeploymentState{"g": {DesiredTotal: 1}}}
		if err := st.UpsertDeployment(st.LatestIndex()+1, d); err != nil {
			w.t.Fatal(err)
		}
		ids[ns] = d.ID
	}
	def, team := ids["default"], ids["team"]
	var cases []matrixCase
	for _, m := range []string{"PUT", "POST"} {
		for _, action := range []string{"promote", "allocation-health", "pause", "fail"} {
			pattern := m + " /v1/deployment/" + action + "/{id}"
			cases = append(cases,
				matrixCase{pattern, m, "/v1/deployment/" + action + "/" + def, map[string]any{"All": true, "Pause": true}, "444-x"},
				matrixCase{pattern, m, "/v1/deployment/" + action + "/" + team, map[string]any{"All": true, "Pause": true}, "44x4x"})
		}
	}
	return append(cases,
		matrixCase{"GET /v1/deployments", "GET", "/v1/deployments", nil, "---22"},
		matrixCase{"GET /v1/deployments", "GET", "/v1/deployments?namespace=*", nil, "22222"}, // filtered
		matrixCase{"GET /v1/deployment/{id}", "GET", "/v1/deployment/" + def, nil, "44422"},
		matrixCase{"GET /v1/deployment/{id}", "GET", "/v1/deployment/" + team, nil, "44242"},
		matrixCase{"GET /v1/deployment/allocations/{id}", "GET", "/v1/deployment/allocations/" + def, nil, "22222"}, // empty unless readable
		matrixCase{"/v1/job/", "GET", "/v1/job/web/deployments", nil, "---22"},
		matrixCase{"/v1/job/", "GET", "/v1/job/web/deployment?namespace=team", nil, "--2-2"},
	)
}

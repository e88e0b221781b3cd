package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// deployFSM is an FSM holding a node, a service job and a deployment of it
// with one canary placed by a plan.
func deployFSM(t *testing.T) (*FSM, *recorder, *structs.Job, *structs.Deployment, *structs.Allocation) {
	t.Helper()
	f, rec := testFSM(t)
	node := mockNode()
	mustApply(t, f, 1, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node, Now: 1})
	job := mockJob("service")
	mustApply(t, f, 2, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Now: 2})
	job, _ = f.State().JobByID(nil, structs.DefaultNamespace, job.ID)
	d := &structs.Deployment{
		ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, JobVersion: job.Version, JobCreateIndex: job.CreateIndex,
		Status: structs.DeploymentStatusRunning,
		TaskGroups: map[string]*structs.DeploymentState{"web": {
			DesiredTotal: 1, DesiredCanaries: 1, ProgressDeadline: time.Minute,
		}},
	}
	canary := mockAlloc(job, node.ID)
	canary.DeploymentID = d.ID
	canary.DeploymentStatus = &structs.AllocDeploymentStatus{Canary: true}
	mustApply(t, f, 3, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
		Job: job, Deployment: d, AllocsUpdated: []*structs.Allocation{canary}, UpdatedAt: 3,
	})
	return f, rec, job, d, canary
}

func TestFSMDeploymentEntries(t *testing.T) {
	f, rec, job, d, canary := deployFSM(t)
	now := time.Unix(100, 0).UTC()
	mustApply(t, f, 4, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Now: now.UnixNano(), Alloc: []*structs.Allocation{{
		ID: canary.ID, ClientStatus: structs.AllocClientStatusRunning,
		DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: boolp(true)},
	}}})
	got, _ := f.State().DeploymentByID(nil, d.ID)
	g := got.TaskGroups["web"]
	if g.PlacedAllocs != 1 || g.HealthyAllocs != 1 || !g.RequireProgressBy.Equal(now.Add(time.Minute)) {
		t.Fatalf("after health: %+v, want placed 1 healthy 1 progress by %s", g, now.Add(time.Minute))
	}
	promoteEval := mockEval(job.Namespace, job.ID, structs.EvalStatusPending)
	mustApply(t, f, 5, structs.DeploymentPromoteRequestType, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, All: true, Eval: promoteEval, Now: 5})
	if got, _ := f.State().DeploymentByID(nil, d.ID); !got.TaskGroups["web"].Promoted {
		t.Errorf("not promoted")
	}
	if len(rec.evals) == 0 || rec.evals[len(rec.evals)-1].ID != promoteEval.ID {
		t.Errorf("the promotion's eval did not reach the broker hook")
	}
	mustApply(t, f, 6, structs.DeploymentStatusUpdateRequestType, &structs.DeploymentStatusUpdateRequest{
		DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: d.ID, Status: structs.DeploymentStatusSuccessful,
			StatusDescription: structs.DeploymentStatusDescriptionSuccessful}, Now: 6,
	})
	if j, _ := f.State().JobByID(nil, job.Namespace, job.ID); !j.Stable {
		t.Errorf("successful deployment left the job unstable")
	}

	// Refused entries answer with an error of the store's kind and leave
	// the FSM applying.
	refused := []struct {
		name string
		typ  structs.MessageType
		msg  any
		kind error
	}{
		{"status of unknown deployment", structs.DeploymentStatusUpdateRequestType, &structs.DeploymentStatusUpdateRequest{
			DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: "nope", Status: structs.DeploymentStatusFailed}}, structs.ErrNotFound},
		{"status of a terminal deployment", structs.DeploymentStatusUpdateRequestType, &structs.DeploymentStatusUpdateRequest{
			DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: d.ID, Status: structs.DeploymentStatusRunning}}, structs.ErrInvalid},
		{"promote a terminal deployment", structs.DeploymentPromoteRequestType, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, All: true}, structs.ErrInvalid},
		{"health of a terminal deployment", structs.DeploymentAllocHealthRequestType, &structs.DeploymentAllocHealthRequest{
			DeploymentID: d.ID, HealthyAllocationIDs: []string{canary.ID}}, structs.ErrInvalid},
	}
	for i, tt := range refused {
		resp := apply(t, f, uint64(10+i), tt.typ, tt.msg)
		if err, _ := resp.(error); !errors.Is(err, tt.kind) {
			t.Errorf("%s: response %v, want kind %v", tt.name, resp, tt.kind)
		}
	}
	if err := f.Failed(); err != nil {
		t.Fatalf("a refused entry stopped the FSM: %v", err)
	}
	mustApply(t, f, 20, structs.DeploymentDeleteRequestType, &structs.DeploymentDeleteRequest{Deployments: []string{d.ID}})
	if got, _ := f.State().DeploymentByID(nil, d.ID); got != nil {
		t.Errorf("deployment not deleted")
	}
}

func TestFSMDeploymentRevertWritesJobAndEval(t *testing.T) {
	f, rec, job, d, canary := deployFSM(t)
	revert := job.Copy()
	revert.Meta = map[string]string{"reverted": "yes"}
	ev := mockEval(job.Namespace, job.ID, structs.EvalStatusPending)
	mustApply(t, f, 4, structs.DeploymentAllocHealthRequestType, &structs.DeploymentAllocHealthRequest{
		DeploymentID: d.ID, UnhealthyAllocationIDs: []string{canary.ID},
		DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: d.ID, Status: structs.DeploymentStatusFailed},
		Job:              revert, Eval: ev, Now: 4,
	})
	j, _ := f.State().JobByID(nil, job.Namespace, job.ID)
	if j.Version != job.Version+1 || j.Meta["reverted"] != "yes" {
		t.Errorf("job version %d meta %v, want the reverted spec as version %d", j.Version, j.Meta, job.Version+1)
	}
	if len(rec.upserted) == 0 || rec.upserted[len(rec.upserted)-1].Version != j.Version {
		t.Errorf("JobUpserted not told about the reverted job")
	}
	if e, _ := f.State().EvalByID(nil, ev.ID); e == nil || e.JobModifyIndex != 4 {
		t.Errorf("revert eval %+v, want stored at the job's new modify index 4", e)
	}
}

func TestFSMDeploymentSnapshotRoundTrip(t *testing.T) {
	f, _, _, d, _ := deployFSM(t)
	buf := snapshotBytes(t, f)
	g, _ := testFSM(t)
	must(t, g.Restore(io.NopCloser(bytes.NewReader(buf))))
	got, err := g.State().DeploymentByID(nil, d.ID)
	must(t, err)
	if got == nil || got.TaskGroups["web"].PlacedAllocs != 1 || len(got.TaskGroups["web"].PlacedCanaries) != 1 {
		t.Fatalf("restored deployment %+v, want one placed canary", got)
	}
}

func TestCheckEntryBoundsDeploymentEntries(t *testing.T) {
	many := make([]string, structs.MaxDeploymentAllocHealth+1)
	for i := range many {
		many[i] = "a"
	}
	tests := []struct {
		name string
		typ  structs.MessageType
		msg  any
		want string // "" = accepted
	}{
		{"health within bounds", structs.DeploymentAllocHealthRequestType, &structs.DeploymentAllocHealthRequest{DeploymentID: "d", HealthyAllocationIDs: many[:10]}, ""},
		{"too many health IDs", structs.DeploymentAllocHealthRequestType, &structs.DeploymentAllocHealthRequest{DeploymentID: "d", HealthyAllocationIDs: many}, "HealthyAllocationIDs"},
		{"too many deletes", structs.DeploymentDeleteRequestType, &structs.DeploymentDeleteRequest{Deployments: many}, "Deployments"},
		{"status without update", structs.DeploymentStatusUpdateRequestType, &structs.DeploymentStatusUpdateRequest{}, "DeploymentUpdate"},
		{"too many plan deployment updates", structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
			DeploymentUpdates: updates(structs.MaxDeploymentUpdates + 1)}, "more than"},
		{"plan deployment updates within bounds", structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
			DeploymentUpdates: updates(structs.MaxDeploymentUpdates)}, ""},
		{"nil plan deployment update", structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
			DeploymentUpdates: []*structs.DeploymentStatusUpdate{nil}}, "DeploymentUpdates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf, err := Encode(tt.typ, tt.msg)
			must(t, err)
			err = CheckEntry(buf)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

func boolp(b bool) *bool { return &b }

func updates(n int) []*structs.DeploymentStatusUpdate {
	out := make([]*structs.DeploymentStatusUpdate, n)
	for i := range out {
		out[i] = &structs.DeploymentStatusUpdate{DeploymentID: "d", Status: structs.DeploymentStatusCancelled}
	}
	return out
}

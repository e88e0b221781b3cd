package state

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

var deployNow = time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)

// deployFixture is a stored service job with a node, and a deployment of
// its current version for group "web" (2 wanted, 1 canary) placed by a
// plan with one canary and one regular alloc.
type deployFixture struct {
	s              *StateStore
	job            *structs.Job
	node           *structs.Node
	d              *structs.Deployment
	canary, normal *structs.Allocation
}

func mockDeployment(job *structs.Job) *structs.Deployment {
	return &structs.Deployment{
		ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, JobVersion: job.Version,
		JobModifyIndex: job.JobModifyIndex, JobCreateIndex: job.CreateIndex,
		Status: structs.DeploymentStatusRunning, StatusDescription: structs.DeploymentStatusDescriptionRunning,
		TaskGroups: map[string]*structs.DeploymentState{"web": {
			DesiredTotal: 2, DesiredCanaries: 1, ProgressDeadline: 10 * time.Minute,
			RequireProgressBy: deployNow.Add(10 * time.Minute),
		}},
	}
}

func newDeployFixture(t *testing.T) *deployFixture {
	t.Helper()
	f := &deployFixture{s: testStore(t).At(deployNow), node: mockNode()}
	must(t, f.s.UpsertNode(1, f.node))
	f.job = storedJob(t, f.s, 2, mockJob("service"))
	f.d = mockDeployment(f.job)
	f.canary, f.normal = mockAlloc(f.job, f.node.ID), mockAlloc(f.job, f.node.ID)
	for _, a := range []*structs.Allocation{f.canary, f.normal} {
		a.DeploymentID = f.d.ID
	}
	f.canary.DeploymentStatus = &structs.AllocDeploymentStatus{Canary: true}
	must(t, f.s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{
		Job: f.job, Deployment: f.d, AllocsUpdated: []*structs.Allocation{f.canary, f.normal},
	}))
	return f
}

func (f *deployFixture) deployment(t *testing.T, id string) *structs.Deployment {
	t.Helper()
	d, err := f.s.DeploymentByID(nil, id)
	must(t, err)
	if d == nil {
		t.Fatalf("deployment %s missing", id)
	}
	return d
}

func boolp(b bool) *bool { return &b }

func TestDeploymentPlacedByPlanCountsAndCancelsOlder(t *testing.T) {
	f := newDeployFixture(t)
	d := f.deployment(t, f.d.ID)
	st := d.TaskGroups["web"]
	if st.PlacedAllocs != 2 || !slices.Equal(st.PlacedCanaries, []string{f.canary.ID}) {
		t.Fatalf("placed = %d canaries %v, want 2 and [%s]", st.PlacedAllocs, st.PlacedCanaries, f.canary.ID)
	}
	if d.CreateIndex != 3 || d.ModifyIndex != 3 || d.CreateTime != deployNow.UnixNano() {
		t.Errorf("indexes %d/%d time %d, want 3/3 %d", d.CreateIndex, d.ModifyIndex, d.CreateTime, deployNow.UnixNano())
	}
	// Writing the same alloc again (an in-place update) counts nothing.
	again := f.normal.Copy()
	must(t, f.s.UpsertPlanResults(4, &structs.ApplyPlanResultsRequest{Job: f.job, AllocsUpdated: []*structs.Allocation{again}}))
	if n := f.deployment(t, f.d.ID).TaskGroups["web"].PlacedAllocs; n != 2 {
		t.Errorf("after an in-place write placed = %d, want 2", n)
	}
	// A new deployment of the job cancels the active one.
	d2 := mockDeployment(f.job)
	must(t, f.s.UpsertPlanResults(5, &structs.ApplyPlanResultsRequest{Job: f.job, Deployment: d2}))
	old := f.deployment(t, f.d.ID)
	if old.Status != structs.DeploymentStatusCancelled || old.StatusDescription != structs.DeploymentStatusDescriptionNewerJob {
		t.Errorf("older deployment %s %q, want cancelled %q", old.Status, old.StatusDescription, structs.DeploymentStatusDescriptionNewerJob)
	}
	latest, err := f.s.LatestDeploymentByJob(nil, f.job.Namespace, f.job.ID)
	must(t, err)
	if latest == nil || latest.ID != d2.ID {
		t.Errorf("latest deployment = %v, want %s", latest, d2.ID)
	}
	// A plan's update of a deployment that is over is skipped, not an
	// error that would refuse the plan.
	must(t, f.s.UpsertPlanResults(6, &structs.ApplyPlanResultsRequest{Job: f.job, DeploymentUpdates: []*structs.DeploymentStatusUpdate{
		{DeploymentID: f.d.ID, Status: structs.DeploymentStatusSuccessful}, {DeploymentID: "gone", Status: structs.DeploymentStatusFailed},
	}}))
	if st := f.deployment(t, f.d.ID).Status; st != structs.DeploymentStatusCancelled {
		t.Errorf("cancelled deployment became %s", st)
	}
}

func TestDeploymentClientHealthCounters(t *testing.T) {
	f := newDeployFixture(t)
	steps := []struct {
		name               string
		alloc              string
		healthy            *bool
		wantHealthy, wantU int
		wantProgressMoved  bool
	}{
		{"no health reported", f.normal.ID, nil, 0, 0, false},
		{"healthy", f.normal.ID, boolp(true), 1, 0, true},
		{"healthy again counts once", f.normal.ID, boolp(true), 1, 0, false},
		{"canary unhealthy", f.canary.ID, boolp(false), 1, 1, false},
		{"healthy turns unhealthy", f.normal.ID, boolp(false), 0, 2, false},
	}
	index := uint64(10)
	for _, st := range steps {
		index++
		before := f.deployment(t, f.d.ID).TaskGroups["web"].RequireProgressBy
		s := f.s.At(deployNow.Add(time.Duration(index) * time.Minute))
		u := &structs.Allocation{ID: st.alloc, ClientStatus: structs.AllocClientStatusRunning}
		if st.healthy != nil {
			u.DeploymentStatus = &structs.AllocDeploymentStatus{Healthy: st.healthy, Timestamp: time.Unix(1, 0)}
		}
		must(t, s.UpdateAllocsFromClient(index, []*structs.Allocation{u}))
		g := f.deployment(t, f.d.ID).TaskGroups["web"]
		if g.HealthyAllocs != st.wantHealthy || g.UnhealthyAllocs != st.wantU {
			t.Errorf("%s: healthy/unhealthy = %d/%d, want %d/%d", st.name, g.HealthyAllocs, g.UnhealthyAllocs, st.wantHealthy, st.wantU)
		}
		if moved := !g.RequireProgressBy.Equal(before); moved != st.wantProgressMoved {
			t.Errorf("%s: RequireProgressBy moved = %v, want %v", st.name, moved, st.wantProgressMoved)
		}
		if st.wantProgressMoved && !g.RequireProgressBy.Equal(deployNow.Add(time.Duration(index)*time.Minute+10*time.Minute)) {
			t.Errorf("%s: RequireProgressBy = %s, want the write's time plus the deadline", st.name, g.RequireProgressBy)
		}
	}
	a, err := f.s.AllocByID(nil, f.canary.ID)
	must(t, err)
	if !a.DeploymentStatus.IsCanary() || !a.DeploymentStatus.IsUnhealthy() || a.DeploymentStatus.Timestamp.Equal(time.Unix(1, 0)) {
		t.Errorf("canary's status %+v: want canary kept, unhealthy, stamped with the leader's time", a.DeploymentStatus)
	}
	// Outside a deployment the client reports health per the group's
	// migrate block: it is kept on the alloc (a drain waits for it) and
	// counts in no deployment.
	before := *f.deployment(t, f.d.ID).TaskGroups["web"]
	lone := mockAlloc(f.job, f.node.ID)
	must(t, f.s.UpsertAllocs(30, []*structs.Allocation{lone}))
	must(t, f.s.UpdateAllocsFromClient(31, []*structs.Allocation{{ID: lone.ID, DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: boolp(true)}}}))
	got, err := f.s.AllocByID(nil, lone.ID)
	must(t, err)
	if !got.DeploymentStatus.IsHealthy() || got.DeploymentStatus.ModifyIndex != 31 || got.DeploymentID != "" {
		t.Errorf("alloc outside a deployment: status %+v in deployment %q, want healthy at index 31 in none", got.DeploymentStatus, got.DeploymentID)
	}
	if after := f.deployment(t, f.d.ID).TaskGroups["web"]; after.HealthyAllocs != before.HealthyAllocs || after.PlacedAllocs != before.PlacedAllocs {
		t.Errorf("alloc outside the deployment moved its counters: healthy %d -> %d, placed %d -> %d",
			before.HealthyAllocs, after.HealthyAllocs, before.PlacedAllocs, after.PlacedAllocs)
	}
}

func TestDeploymentStatusUpdate(t *testing.T) {
	tests := []struct {
		name     string
		update   func(f *deployFixture) *structs.DeploymentStatusUpdate
		wantKind error
		check    func(t *testing.T, f *deployFixture)
	}{
		{"unknown deployment", func(*deployFixture) *structs.DeploymentStatusUpdate {
			return &structs.DeploymentStatusUpdate{DeploymentID: "nope", Status: structs.DeploymentStatusFailed}
		}, structs.ErrNotFound, nil},
		{"unknown status", func(f *deployFixture) *structs.DeploymentStatusUpdate {
			return &structs.DeploymentStatusUpdate{DeploymentID: f.d.ID, Status: "exploded"}
		}, structs.ErrInvalid, nil},
		{"missing update", func(*deployFixture) *structs.DeploymentStatusUpdate { return nil }, structs.ErrInvalid, nil},
		{"pause", func(f *deployFixture) *structs.DeploymentStatusUpdate {
			return &structs.DeploymentStatusUpdate{DeploymentID: f.d.ID, Status: structs.DeploymentStatusPaused, StatusDescription: structs.DeploymentStatusDescriptionPaused}
		}, nil, func(t *testing.T, f *deployFixture) {
			if d := f.deployment(t, f.d.ID); d.Status != structs.DeploymentStatusPaused || d.ModifyIndex != 50 {
				t.Errorf("deployment %s at %d, want paused at 50", d.Status, d.ModifyIndex)
			}
		}},
		{"successful marks the job version stable", func(f *deployFixture) *structs.DeploymentStatusUpdate {
			return &structs.DeploymentStatusUpdate{DeploymentID: f.d.ID, Status: structs.DeploymentStatusSuccessful}
		}, nil, func(t *testing.T, f *deployFixture) {
			j, _ := f.s.JobByID(nil, f.job.Namespace, f.job.ID)
			v, _ := f.s.JobByIDAndVersion(nil, f.job.Namespace, f.job.ID, f.job.Version)
			if !j.Stable || !v.Stable {
				t.Errorf("job stable %v, version stable %v, want both", j.Stable, v.Stable)
			}
			if j.JobModifyIndex != f.job.JobModifyIndex || j.Version != f.job.Version {
				t.Errorf("marking stable changed the job's version: %d/%d", j.Version, j.JobModifyIndex)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newDeployFixture(t)
			before := f.s.LatestIndex()
			err := f.s.UpdateDeploymentStatus(50, &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: tt.update(f), Eval: mockEval(f.job, structs.EvalStatusPending)})
			if tt.wantKind != nil {
				if !errors.Is(err, tt.wantKind) {
					t.Fatalf("err = %v, want kind %v", err, tt.wantKind)
				}
				if f.s.LatestIndex() != before {
					t.Errorf("a refused update wrote at %d", f.s.LatestIndex())
				}
				return
			}
			must(t, err)
			evals, _ := f.s.EvalsByJob(nil, f.job.Namespace, f.job.ID)
			if len(evals) != 1 {
				t.Errorf("evals = %d, want the update's one", len(evals))
			}
			tt.check(t, f)
		})
	}
	t.Run("terminal deployment refuses", func(t *testing.T) {
		f := newDeployFixture(t)
		must(t, f.s.UpdateDeploymentStatus(50, &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: f.d.ID, Status: structs.DeploymentStatusFailed}}))
		err := f.s.UpdateDeploymentStatus(51, &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: f.d.ID, Status: structs.DeploymentStatusRunning}})
		if !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("err = %v, want ErrInvalid", err)
		}
	})
}

func TestDeploymentPromotion(t *testing.T) {
	tests := []struct {
		name        string
		healthy     bool
		req         func(f *deployFixture) *structs.DeploymentPromoteRequest
		wantKind    error
		wantPromote bool
	}{
		{"unknown deployment", true, func(*deployFixture) *structs.DeploymentPromoteRequest {
			return &structs.DeploymentPromoteRequest{DeploymentID: "nope", All: true}
		}, structs.ErrNotFound, false},
		{"unknown group", true, func(f *deployFixture) *structs.DeploymentPromoteRequest {
			return &structs.DeploymentPromoteRequest{DeploymentID: f.d.ID, Groups: []string{"db"}}
		}, structs.ErrInvalid, false},
		{"nothing named", true, func(f *deployFixture) *structs.DeploymentPromoteRequest {
			return &structs.DeploymentPromoteRequest{DeploymentID: f.d.ID}
		}, structs.ErrInvalid, false},
		{"canary not healthy", false, func(f *deployFixture) *structs.DeploymentPromoteRequest {
			return &structs.DeploymentPromoteRequest{DeploymentID: f.d.ID, All: true}
		}, structs.ErrInvalid, false},
		{"all", true, func(f *deployFixture) *structs.DeploymentPromoteRequest {
			return &structs.DeploymentPromoteRequest{DeploymentID: f.d.ID, All: true, Eval: mockEval(f.job, structs.EvalStatusPending)}
		}, nil, true},
		{"named group", true, func(f *deployFixture) *structs.DeploymentPromoteRequest {
			return &structs.DeploymentPromoteRequest{DeploymentID: f.d.ID, Groups: []string{"web"}}
		}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newDeployFixture(t)
			if tt.healthy {
				must(t, f.s.UpdateAllocsFromClient(10, []*structs.Allocation{{ID: f.canary.ID, DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: boolp(true)}}}))
			}
			before := f.s.LatestIndex()
			err := f.s.UpdateDeploymentPromotion(20, tt.req(f))
			if tt.wantKind != nil && !errors.Is(err, tt.wantKind) {
				t.Fatalf("err = %v, want kind %v", err, tt.wantKind)
			}
			if tt.wantKind != nil && f.s.LatestIndex() != before {
				t.Errorf("a refused promotion wrote")
			}
			if tt.wantKind == nil {
				must(t, err)
			}
			d := f.deployment(t, f.d.ID)
			if d.TaskGroups["web"].Promoted != tt.wantPromote {
				t.Errorf("promoted = %v, want %v", d.TaskGroups["web"].Promoted, tt.wantPromote)
			}
			a, _ := f.s.AllocByID(nil, f.canary.ID)
			if tt.wantPromote && a.DeploymentStatus.IsCanary() {
				t.Errorf("a promoted canary is still a canary")
			}
		})
	}
}

func TestDeploymentAllocHealth(t *testing.T) {
	t.Run("an alloc of another deployment is refused whole", func(t *testing.T) {
		f := newDeployFixture(t)
		other := mockAlloc(f.job, f.node.ID)
		must(t, f.s.UpsertAllocs(10, []*structs.Allocation{other}))
		err := f.s.UpdateDeploymentAllocHealth(11, &structs.DeploymentAllocHealthRequest{
			DeploymentID: f.d.ID, HealthyAllocationIDs: []string{f.normal.ID, other.ID},
		})
		if !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
		if g := f.deployment(t, f.d.ID).TaskGroups["web"]; g.HealthyAllocs != 0 {
			t.Errorf("a refused request counted %d healthy", g.HealthyAllocs)
		}
	})
	t.Run("unhealthy with failure and revert", func(t *testing.T) {
		f := newDeployFixture(t)
		revert := f.job.Copy()
		ev := mockEval(f.job, structs.EvalStatusPending)
		must(t, f.s.UpdateDeploymentAllocHealth(12, &structs.DeploymentAllocHealthRequest{
			DeploymentID: f.d.ID, HealthyAllocationIDs: []string{f.canary.ID}, UnhealthyAllocationIDs: []string{f.normal.ID},
			DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: f.d.ID, Status: structs.DeploymentStatusFailed,
				StatusDescription: structs.DeploymentStatusDescriptionFailedAllocations},
			Job: revert, Eval: ev,
		}))
		d := f.deployment(t, f.d.ID)
		g := d.TaskGroups["web"]
		if g.HealthyAllocs != 1 || g.UnhealthyAllocs != 1 || d.Status != structs.DeploymentStatusFailed {
			t.Errorf("deployment %s healthy %d unhealthy %d, want failed 1 1", d.Status, g.HealthyAllocs, g.UnhealthyAllocs)
		}
		j, _ := f.s.JobByID(nil, f.job.Namespace, f.job.ID)
		if j.Version != f.job.Version+1 || j.JobModifyIndex != 12 {
			t.Errorf("reverted job at version %d index %d, want %d at 12", j.Version, j.JobModifyIndex, f.job.Version+1)
		}
		stored, _ := f.s.EvalByID(nil, ev.ID)
		if stored == nil || stored.JobModifyIndex != 12 {
			t.Errorf("revert eval %+v, want stored with the job's modify index", stored)
		}
	})
}

func TestDeploymentReadDeleteAndSnapshot(t *testing.T) {
	f := newDeployFixture(t)
	must(t, f.s.UpdateAllocsFromClient(10, []*structs.Allocation{{ID: f.canary.ID, DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: boolp(true)}}}))
	restored := roundTrip(t, f.s)
	for _, s := range []*StateStore{f.s, restored} {
		d, err := s.DeploymentByID(nil, f.d.ID)
		must(t, err)
		if d == nil || d.TaskGroups["web"].HealthyAllocs != 1 || d.TaskGroups["web"].PlacedAllocs != 2 {
			t.Fatalf("deployment %+v, want placed 2 healthy 1", d)
		}
		byPrefix, err := s.DeploymentsByIDPrefix(nil, structs.DefaultNamespace, f.d.ID[:4])
		must(t, err)
		if len(byPrefix) != 1 {
			t.Errorf("by prefix: %d deployments", len(byPrefix))
		}
		other, _ := s.DeploymentsByIDPrefix(nil, "other", "")
		if len(other) != 0 {
			t.Errorf("namespace filter let %d through", len(other))
		}
		allocs, err := s.AllocsByDeployment(nil, d)
		must(t, err)
		if len(allocs) != 2 {
			t.Errorf("allocs of the deployment: %d, want 2", len(allocs))
		}
		if s.Index(TableDeployments) != 10 {
			t.Errorf("deployments index %d, want 10", s.Index(TableDeployments))
		}
	}
	must(t, restored.DeleteDeployments(40, []string{f.d.ID, "unknown"}))
	if d, _ := restored.DeploymentByID(nil, f.d.ID); d != nil {
		t.Errorf("deleted deployment still there")
	}
}

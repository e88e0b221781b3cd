package planapply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/server/planqueue"
	"github.com/drover-org/drover/core/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeServer is the applier's Config over a state store seeded directly:
// commits are recorded, not applied.
type fakeServer struct {
	p        *planStore
	mu       sync.Mutex
	commits  []*structs.ApplyPlanResultsRequest
	minIdx   []uint64
	observed []int
	snapErr  error
}

const commitIndex = 5000

func (f *fakeServer) applier() *Applier {
	return New(Config{
		Snapshot: func(_ context.Context, minIndex uint64) (Snapshot, error) {
			f.mu.Lock()
			f.minIdx = append(f.minIdx, minIndex)
			f.mu.Unlock()
			if f.snapErr != nil {
				return nil, f.snapErr
			}
			return f.p.snapshot(), nil
		},
		Commit: func(req *structs.ApplyPlanResultsRequest) (uint64, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.commits = append(f.commits, req)
			return commitIndex, nil
		},
		NewEval: func(job *structs.Job, trigger string) *structs.Evaluation {
			return &structs.Evaluation{ID: "ev-" + job.ID, JobID: job.ID, Namespace: job.Namespace, TriggeredBy: trigger}
		},
		Now: func() time.Time { return time.Unix(1000, 0) },
		Observe: func(_ time.Duration, rejected int) {
			f.mu.Lock()
			f.observed = append(f.observed, rejected)
			f.mu.Unlock()
		},
	})
}

func TestApplyCommitsWhatFits(t *testing.T) {
	p := newPlanStore(t)
	f := &fakeServer{p: p}
	good, full := p.node(nil), p.node(nil)
	p.alloc(full, 4000, 64, nil)
	victim := p.alloc(good, 100, 64, nil)
	plan := newPlan(p.job)
	plan.SnapshotIndex = 42
	metric := &structs.AllocMetric{NodesEvaluated: 2}
	a1, a2 := newPlanAlloc(p.job, good.ID, 500, 64), newPlanAlloc(p.job, good.ID, 500, 64)
	a1.Metrics, a2.Metrics = metric, metric
	plan.NodeAllocation[good.ID] = []*structs.Allocation{a1, a2}
	plan.NodeUpdate[good.ID] = []*structs.Allocation{stopOf(victim, "")}
	plan.NodeAllocation[full.ID] = []*structs.Allocation{newPlanAlloc(p.job, full.ID, 500, 64)}
	plan.Deployment = &structs.Deployment{ID: "d1"}

	res, err := f.applier().Apply(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.minIdx, []uint64{42}) {
		t.Fatalf("snapshot asked at %v, want the plan's index 42", f.minIdx)
	}
	if len(f.commits) != 1 {
		t.Fatalf("%d commits, want 1", len(f.commits))
	}
	req := f.commits[0]
	if res.AllocIndex != commitIndex || res.RefreshIndex != commitIndex {
		t.Fatalf("AllocIndex %d RefreshIndex %d, want both the commit's %d", res.AllocIndex, res.RefreshIndex, commitIndex)
	}
	if !slices.Equal(res.RejectedNodes, []string{full.ID}) {
		t.Fatalf("rejected %v", res.RejectedNodes)
	}
	if req.Job != p.job || req.EvalID != plan.EvalID || req.UpdatedAt != time.Unix(1000, 0).UnixNano() {
		t.Fatalf("entry header = job %v eval %q at %d", req.Job != nil, req.EvalID, req.UpdatedAt)
	}
	if req.Deployment == nil || req.Deployment.ID != "d1" {
		t.Fatal("a partial plan's deployment was not committed with it")
	}
	if len(req.AllocsStopped) != 1 || req.AllocsStopped[0].ID != victim.ID {
		t.Fatalf("stopped %v", req.AllocsStopped)
	}
	if len(req.AllocsUpdated) != 2 || req.PlacementMetric != metric {
		t.Fatalf("placed %d, metric %v", len(req.AllocsUpdated), req.PlacementMetric)
	}
	for _, a := range req.AllocsUpdated {
		if a.Metrics != nil {
			t.Fatal("a placement carries the shared metrics itself")
		}
	}
	if a1.Metrics != metric {
		t.Fatal("the plan's alloc was modified")
	}
}

func TestApplyWithoutCommit(t *testing.T) {
	p := newPlanStore(t)
	f := &fakeServer{p: p}
	full := p.node(nil)
	p.alloc(full, 4000, 64, nil)
	ctx := context.Background()

	// Everything rejected: answered without a write.
	plan := newPlan(p.job)
	plan.NodeAllocation[full.ID] = []*structs.Allocation{newPlanAlloc(p.job, full.ID, 500, 64)}
	res, err := f.applier().Apply(ctx, plan)
	if err != nil || res.AllocIndex != 0 || res.RefreshIndex == 0 || len(f.commits) != 0 {
		t.Fatalf("rejected plan: %+v %v, %d commits", res, err, len(f.commits))
	}

	// An all-at-once plan that was refused drops its deployment too.
	plan.AllAtOnce = true
	plan.Deployment = &structs.Deployment{ID: "d1"}
	if res, err = f.applier().Apply(ctx, plan); err != nil || len(f.commits) != 0 || !res.IsNoOp() {
		t.Fatalf("refused all-at-once plan: %+v %v, %d commits", res, err, len(f.commits))
	}

	// A deployment alone commits.
	dep := newPlan(p.job)
	dep.DeploymentUpdates = []*structs.DeploymentStatusUpdate{{DeploymentID: "d1", Status: "paused"}}
	if res, err = f.applier().Apply(ctx, dep); err != nil || len(f.commits) != 1 || res.AllocIndex != commitIndex {
		t.Fatalf("deployment-only plan: %+v %v, %d commits", res, err, len(f.commits))
	}
	if len(f.commits[0].DeploymentUpdates) != 1 {
		t.Fatal("deployment update not in the entry")
	}

	// Placements without a job are refused before any decision.
	nojob := newPlan(p.job)
	nojob.Job = nil
	nojob.NodeAllocation[full.ID] = []*structs.Allocation{newPlanAlloc(p.job, full.ID, 1, 1)}
	if _, err := f.applier().Apply(ctx, nojob); err == nil || !strings.Contains(err.Error(), "has no job") {
		t.Fatalf("placing plan without job: %v", err)
	}

	// A snapshot that cannot be had fails the plan.
	f.snapErr = errors.New("timed out waiting for state index 7")
	if _, err := f.applier().Apply(ctx, newPlan(p.job)); !errors.Is(err, f.snapErr) {
		t.Fatalf("snapshot error: %v", err)
	}
	if len(f.commits) != 1 {
		t.Fatalf("%d commits, want the deployment's only", len(f.commits))
	}
}

func TestApplyPreemptionEvals(t *testing.T) {
	p := newPlanStore(t)
	f := &fakeServer{p: p}
	n := p.node(nil)
	low := p.seedJob("low", nil)
	stopped := p.seedJob("stopped", func(j *structs.Job) { j.Stop = true })
	v1 := p.allocOf(low, n, 1000, 64)
	v2 := p.allocOf(low, n, 1000, 64)
	v3 := p.allocOf(stopped, n, 1000, 64)
	plan := newPlan(p.job)
	place := newPlanAlloc(p.job, n.ID, 3000, 64)
	plan.NodeAllocation[n.ID] = []*structs.Allocation{place}
	for _, v := range []*structs.Allocation{v1, v2, v3} {
		plan.NodePreemptions[n.ID] = append(plan.NodePreemptions[n.ID],
			&structs.Allocation{ID: v.ID, NodeID: n.ID, JobID: v.JobID, Namespace: v.Namespace, PreemptedByAllocation: place.ID})
	}
	if _, err := f.applier().Apply(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	req := f.commits[0]
	if len(req.AllocsPreempted) != 3 {
		t.Fatalf("preempted %d, want 3", len(req.AllocsPreempted))
	}
	// One eval for the live job however many of its allocs go; none for
	// the stopped job.
	if len(req.PreemptionEvals) != 1 {
		t.Fatalf("preemption evals = %d, want 1", len(req.PreemptionEvals))
	}
	ev := req.PreemptionEvals[0]
	if ev.JobID != "low" || ev.TriggeredBy != structs.EvalTriggerPreemption || ev.JobModifyIndex != low.JobModifyIndex || ev.JobModifyIndex == 0 {
		t.Fatalf("preemption eval = %+v, want one for low at its JobModifyIndex %d", ev, low.JobModifyIndex)
	}
}

// Run applies queued plans one at a time, answers each submitter, reports
// each to Observe and ends with its context.
func TestRun(t *testing.T) {
	p := newPlanStore(t)
	f := &fakeServer{p: p}
	full := p.node(nil)
	p.alloc(full, 4000, 64, nil)
	good := p.node(nil)
	q := planqueue.New()
	q.SetEnabled(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.applier().Run(ctx, q)
	}()

	rejected := newPlan(p.job)
	rejected.NodeAllocation[full.ID] = []*structs.Allocation{newPlanAlloc(p.job, full.ID, 500, 64)}
	fits := newPlan(p.job)
	fits.NodeAllocation[good.ID] = []*structs.Allocation{newPlanAlloc(p.job, good.ID, 500, 64)}
	wait, waitCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer waitCancel()
	for _, tc := range []struct {
		plan     *structs.Plan
		rejected int
		allocIdx uint64
	}{{rejected, 1, 0}, {fits, 0, commitIndex}} {
		fut, err := q.Enqueue(tc.plan)
		if err != nil {
			t.Fatal(err)
		}
		res, err := fut.Wait(wait)
		if err != nil || len(res.RejectedNodes) != tc.rejected || res.AllocIndex != tc.allocIdx {
			t.Fatalf("result %+v %v, want %d rejected at index %d", res, err, tc.rejected, tc.allocIdx)
		}
	}
	cancel()
	select {
	case <-done:
	case <-wait.Done():
		t.Fatal("Run did not end with its context")
	}
	if !slices.Equal(f.observed, []int{1, 0}) {
		t.Fatalf("observed %v, want [1 0]", f.observed)
	}
}

func TestCommitRequestDeployment(t *testing.T) {
	place := map[string][]*structs.Allocation{"n1": {{ID: "a"}}}
	for _, tc := range []struct {
		name      string
		allAtOnce bool
		rejected  []string
		placed    map[string][]*structs.Allocation
		commit    bool
		deploy    bool
	}{
		{"nothing at all", false, nil, nil, false, false},
		{"deployment alone", false, nil, nil, true, true},
		{"partial commit keeps it", false, []string{"n2"}, place, true, true},
		{"refused all-at-once drops it", true, []string{"n2"}, nil, false, false},
		{"all-at-once that fits keeps it", true, nil, place, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := &structs.Plan{EvalID: "e", AllAtOnce: tc.allAtOnce}
			if tc.name != "nothing at all" {
				plan.Deployment = &structs.Deployment{ID: "d"}
			}
			res := &structs.PlanResult{NodeAllocation: tc.placed, RejectedNodes: tc.rejected}
			req, commit := commitRequest(plan, res, time.Unix(1, 0))
			if commit != tc.commit || (req != nil && (req.Deployment != nil) != tc.deploy) {
				t.Fatalf("commit %v deploy %v, want %v %v", commit, req != nil && req.Deployment != nil, tc.commit, tc.deploy)
			}
		})
	}
}

package deploywatcher

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)

// harness is a watcher over a real FSM: its Raft is a counter, so every
// decision goes through the same checks and appliers as on a server.
type harness struct {
	t     *testing.T
	f     *fsm.FSM
	mu    sync.Mutex
	index uint64
	now   time.Time
	w     *Watcher
	node  *structs.Node
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: t0}
	f, err := fsm.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.f = f
	h.w = New(Config{
		State: f.State, Apply: h.apply, Now: h.clock,
		NewEval: func(job *structs.Job, trigger string) *structs.Evaluation {
			return &structs.Evaluation{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, Type: job.Type,
				Priority: job.Priority, TriggeredBy: trigger, Status: structs.EvalStatusPending}
		},
	})
	h.node = &structs.Node{ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n", Datacenter: "dc1",
		NodePool: structs.NodePoolDefault, Status: structs.NodeStatusReady}
	h.mustApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: h.node})
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now = h.now.Add(d)
}

func (h *harness) apply(typ structs.MessageType, msg any) (uint64, error) {
	if st, ok := msg.(structs.Stamped); ok {
		st.StampNow(h.clock().UnixNano())
	}
	buf, err := fsm.Encode(typ, msg)
	if err != nil {
		return 0, err
	}
	if err := fsm.CheckEntry(buf); err != nil {
		return 0, err
	}
	h.mu.Lock()
	h.index++
	idx := h.index
	h.mu.Unlock()
	if resp := h.f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: buf}); resp != nil {
		if err, ok := resp.(error); ok {
			return idx, err
		}
	}
	return idx, nil
}

func (h *harness) mustApply(typ structs.MessageType, msg any) {
	h.t.Helper()
	if _, err := h.apply(typ, msg); err != nil {
		h.t.Fatal(err)
	}
}

// register writes a version of job "web" with one group of count, and
// returns the stored version.
func (h *harness) register(id string, count int, stable bool, meta string) *structs.Job {
	h.t.Helper()
	job := &structs.Job{ID: id, Namespace: structs.DefaultNamespace, Type: "service", Priority: 50, Stable: stable,
		Meta: map[string]string{"v": meta},
		TaskGroups: []*structs.TaskGroup{{Name: "web", Count: count,
			Update: &structs.UpdateStrategy{MaxParallel: 1, AutoRevert: true},
			Tasks:  []*structs.Task{{Name: "t", Driver: "raw_exec"}}}},
	}
	h.mustApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
	out, _ := h.f.State().JobByID(nil, job.Namespace, job.ID)
	return out
}

// deploy places a deployment of job's current version with allocs, the
// first canaries of them canaries.
func (h *harness) deploy(job *structs.Job, st structs.DeploymentState, allocs, canaries int) (*structs.Deployment, []*structs.Allocation) {
	h.t.Helper()
	d := &structs.Deployment{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, JobVersion: job.Version,
		JobCreateIndex: job.CreateIndex, Status: structs.DeploymentStatusRunning,
		StatusDescription: structs.DeploymentStatusDescriptionRunning,
		TaskGroups:        map[string]*structs.DeploymentState{"web": &st}}
	var out []*structs.Allocation
	for i := 0; i < allocs; i++ {
		out = append(out, &structs.Allocation{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, Job: job,
			NodeID: h.node.ID, TaskGroup: "web", Name: structs.AllocName(job.ID, "web", i), DeploymentID: d.ID,
			DeploymentStatus: &structs.AllocDeploymentStatus{Canary: i < canaries}})
	}
	h.mustApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, Deployment: d, AllocsUpdated: out})
	return d, out
}

func (h *harness) health(a *structs.Allocation, healthy bool) {
	h.t.Helper()
	h.mustApply(structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{{
		ID: a.ID, ClientStatus: structs.AllocClientStatusRunning,
		DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: &healthy},
	}}})
}

func (h *harness) tick() {
	h.t.Helper()
	if err := h.w.Tick(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) deployment(id string) *structs.Deployment {
	h.t.Helper()
	d, err := h.f.State().DeploymentByID(nil, id)
	if err != nil || d == nil {
		h.t.Fatalf("deployment %s: %v", id, err)
	}
	return d
}

func (h *harness) watcherEvals(job *structs.Job) int {
	evals, _ := h.f.State().EvalsByJob(nil, job.Namespace, job.ID)
	n := 0
	for _, e := range evals {
		if e.TriggeredBy == structs.EvalTriggerDeploymentWatcher {
			n++
		}
	}
	return n
}

func TestWatcherProgressDeadline(t *testing.T) {
	h := newHarness(t)
	job := h.register("web", 2, false, "1")
	d, _ := h.deploy(job, structs.DeploymentState{DesiredTotal: 2, ProgressDeadline: 10 * time.Minute,
		RequireProgressBy: t0.Add(10 * time.Minute)}, 2, 0)
	h.advance(9 * time.Minute)
	h.tick()
	if got := h.deployment(d.ID); got.Status != structs.DeploymentStatusRunning {
		t.Fatalf("before the deadline: %s", got.Status)
	}
	h.advance(2 * time.Minute)
	h.tick()
	got := h.deployment(d.ID)
	want := structs.DeploymentStatusDescriptionProgressDeadline
	if got.Status != structs.DeploymentStatusFailed || got.StatusDescription != want {
		t.Errorf("after the deadline: %s %q, want failed %q", got.Status, got.StatusDescription, want)
	}
	if h.watcherEvals(job) != 1 {
		t.Errorf("failure evals = %d, want 1", h.watcherEvals(job))
	}
}

func TestWatcherRevertWithoutStableVersion(t *testing.T) {
	h := newHarness(t)
	job := h.register("web", 1, false, "1")
	d, allocs := h.deploy(job, structs.DeploymentState{DesiredTotal: 1, AutoRevert: true}, 1, 0)
	h.health(allocs[0], false)
	h.tick()
	want := structs.DeploymentStatusDescriptionNoRollbackTarget(structs.DeploymentStatusDescriptionFailedAllocations)
	if got := h.deployment(d.ID); got.StatusDescription != want {
		t.Errorf("description %q, want %q", got.StatusDescription, want)
	}
	if stored, _ := h.f.State().JobByID(nil, job.Namespace, job.ID); stored.Version != job.Version {
		t.Errorf("job moved to version %d without a revert target", stored.Version)
	}
}

func TestWatcherUnhealthyRevertsToStable(t *testing.T) {
	h := newHarness(t)
	h.register("web", 1, true, "good") // version 0, stable
	bad := h.register("web", 1, false, "bad")
	d, allocs := h.deploy(bad, structs.DeploymentState{DesiredTotal: 1, AutoRevert: true}, 1, 0)
	h.health(allocs[0], false)
	h.tick()
	got := h.deployment(d.ID)
	if got.Status != structs.DeploymentStatusFailed ||
		got.StatusDescription != structs.DeploymentStatusDescriptionRollback(structs.DeploymentStatusDescriptionFailedAllocations, 0) {
		t.Fatalf("deployment %s %q", got.Status, got.StatusDescription)
	}
	job, _ := h.f.State().JobByID(nil, bad.Namespace, bad.ID)
	if job.Version != 2 || job.Meta["v"] != "good" || job.Stable {
		t.Errorf("job after revert: version %d meta %v stable %v, want version 2 with version 0's spec", job.Version, job.Meta, job.Stable)
	}
	evals, _ := h.f.State().EvalsByJob(nil, job.Namespace, job.ID)
	var revertEval *structs.Evaluation
	for _, e := range evals {
		if e.TriggeredBy == structs.EvalTriggerDeploymentWatcher {
			revertEval = e
		}
	}
	if revertEval == nil || revertEval.JobModifyIndex != job.JobModifyIndex {
		t.Errorf("revert eval %+v, want one at the reverted job's modify index %d", revertEval, job.JobModifyIndex)
	}
	// The failed deployment is no longer watched: another pass does nothing.
	h.tick()
	if n := h.watcherEvals(job); n != 1 {
		t.Errorf("evals after a second pass: %d, want 1", n)
	}
}

func TestWatcherSuccessMarksStable(t *testing.T) {
	h := newHarness(t)
	job := h.register("web", 2, false, "1")
	d, allocs := h.deploy(job, structs.DeploymentState{DesiredTotal: 2}, 2, 0)
	h.health(allocs[0], true)
	h.tick()
	if got := h.deployment(d.ID); got.Status != structs.DeploymentStatusRunning || h.watcherEvals(job) != 1 {
		t.Fatalf("one of two healthy: %s with %d evals, want running with one eval for the next batch", got.Status, h.watcherEvals(job))
	}
	h.tick()
	if h.watcherEvals(job) != 1 {
		t.Errorf("a pass without change made an eval")
	}
	h.health(allocs[1], true)
	h.tick()
	got := h.deployment(d.ID)
	if got.Status != structs.DeploymentStatusSuccessful || got.StatusDescription != structs.DeploymentStatusDescriptionSuccessful {
		t.Errorf("all healthy: %s %q", got.Status, got.StatusDescription)
	}
	stored, _ := h.f.State().JobByID(nil, job.Namespace, job.ID)
	if !stored.Stable {
		t.Errorf("successful deployment left the job version unstable")
	}
}

func TestWatcherPromotion(t *testing.T) {
	for _, auto := range []bool{true, false} {
		t.Run(map[bool]string{true: "auto", false: "manual"}[auto], func(t *testing.T) {
			h := newHarness(t)
			job := h.register("web", 2, false, "1")
			d, allocs := h.deploy(job, structs.DeploymentState{DesiredTotal: 2, DesiredCanaries: 1, AutoPromote: auto,
				ProgressDeadline: time.Minute, RequireProgressBy: t0.Add(time.Minute)}, 1, 1)
			h.health(allocs[0], true)
			// Waiting for promotion, the progress deadline does not run.
			h.advance(time.Hour)
			h.tick()
			got := h.deployment(d.ID)
			if auto {
				if !got.TaskGroups["web"].Promoted || got.Status != structs.DeploymentStatusRunning {
					t.Errorf("auto_promote: promoted %v status %s", got.TaskGroups["web"].Promoted, got.Status)
				}
				if h.watcherEvals(job) != 1 {
					t.Errorf("promotion evals = %d, want 1", h.watcherEvals(job))
				}
				return
			}
			if got.TaskGroups["web"].Promoted || got.StatusDescription != structs.DeploymentStatusDescriptionRunningNeedsPromotion {
				t.Errorf("manual: promoted %v description %q", got.TaskGroups["web"].Promoted, got.StatusDescription)
			}
		})
	}
}

func TestWatcherCancelsForStoppedJob(t *testing.T) {
	h := newHarness(t)
	job := h.register("web", 1, false, "1")
	d, _ := h.deploy(job, structs.DeploymentState{DesiredTotal: 1}, 1, 0)
	h.mustApply(structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: job.Namespace, JobID: job.ID})
	h.tick()
	if got := h.deployment(d.ID); got.Status != structs.DeploymentStatusCancelled || got.StatusDescription != structs.DeploymentStatusDescriptionStoppedJob {
		t.Errorf("stopped job's deployment: %s %q", got.Status, got.StatusDescription)
	}
}

func TestDecide(t *testing.T) {
	job := &structs.Job{ID: "j", Version: 3, CreateIndex: 7}
	base := func(st structs.DeploymentState) *structs.Deployment {
		return &structs.Deployment{ID: "d", JobVersion: 3, JobCreateIndex: 7, Status: structs.DeploymentStatusRunning,
			TaskGroups: map[string]*structs.DeploymentState{"web": &st}}
	}
	tests := []struct {
		name    string
		d       *structs.Deployment
		job     *structs.Job
		changed bool
		want    Action
	}{
		{"purged job", base(structs.DeploymentState{}), nil, false, Cancel},
		{"newer version", base(structs.DeploymentState{}), &structs.Job{ID: "j", Version: 4, CreateIndex: 7}, false, Cancel},
		{"re-created job", base(structs.DeploymentState{}), &structs.Job{ID: "j", Version: 3, CreateIndex: 9}, false, Cancel},
		{"paused", &structs.Deployment{JobVersion: 3, JobCreateIndex: 7, Status: structs.DeploymentStatusPaused,
			TaskGroups: map[string]*structs.DeploymentState{"web": {UnhealthyAllocs: 1}}}, job, true, None},
		{"unhealthy", base(structs.DeploymentState{DesiredTotal: 2, UnhealthyAllocs: 1}), job, true, Fail},
		{"unhealthy, progress deadline ahead: replaced, not failed", base(structs.DeploymentState{DesiredTotal: 2, UnhealthyAllocs: 1,
			ProgressDeadline: time.Minute, RequireProgressBy: t0.Add(time.Second)}), job, true, Eval},
		{"unhealthy, progress deadline passed", base(structs.DeploymentState{DesiredTotal: 2, UnhealthyAllocs: 1,
			ProgressDeadline: time.Minute, RequireProgressBy: t0.Add(-time.Second)}), job, false, Fail},
		{"deadline passed", base(structs.DeploymentState{DesiredTotal: 2, RequireProgressBy: t0.Add(-time.Second)}), job, false, Fail},
		{"deadline ahead", base(structs.DeploymentState{DesiredTotal: 2, RequireProgressBy: t0.Add(time.Second)}), job, false, None},
		{"done ignores deadline", base(structs.DeploymentState{DesiredTotal: 1, HealthyAllocs: 1, RequireProgressBy: t0.Add(-time.Second)}), job, false, Succeed},
		{"progress", base(structs.DeploymentState{DesiredTotal: 2, HealthyAllocs: 1}), job, true, Eval},
		{"canaries healthy, auto", base(structs.DeploymentState{DesiredTotal: 2, DesiredCanaries: 1, AutoPromote: true,
			PlacedCanaries: []string{"c"}, HealthyAllocs: 1}), job, true, Promote},
		{"canaries pending, auto", base(structs.DeploymentState{DesiredTotal: 2, DesiredCanaries: 1, AutoPromote: true,
			PlacedCanaries: []string{"c"}}), job, false, None},
		{"canaries pending, auto, described once", &structs.Deployment{JobVersion: 3, JobCreateIndex: 7, Status: structs.DeploymentStatusRunning,
			StatusDescription: structs.DeploymentStatusDescriptionRunning, TaskGroups: map[string]*structs.DeploymentState{"web": {
				DesiredTotal: 2, DesiredCanaries: 1, AutoPromote: true, PlacedCanaries: []string{"c"}}}}, job, false, Describe},
		{"promoted, all healthy", base(structs.DeploymentState{DesiredTotal: 2, DesiredCanaries: 1, Promoted: true,
			PlacedCanaries: []string{"c"}, HealthyAllocs: 2}), job, true, Succeed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.d, tt.job, t0, tt.changed)
			if got.Action != tt.want {
				t.Errorf("Decide = %s (%q), want %s", got.Action, got.Description, tt.want)
			}
		})
	}
}

func TestRunActsOnChangesAndStops(t *testing.T) {
	h := newHarness(t)
	job := h.register("web", 1, false, "1")
	d, allocs := h.deploy(job, structs.DeploymentState{DesiredTotal: 1}, 1, 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.w.Run(ctx) }()
	h.health(allocs[0], true)
	testwait.For(t, 10*time.Second, "the watcher to complete the deployment", func() bool {
		return h.deployment(d.ID).Status == structs.DeploymentStatusSuccessful
	})
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if !strings.Contains(h.deployment(d.ID).StatusDescription, "successfully") {
		t.Errorf("description %q", h.deployment(d.ID).StatusDescription)
	}
}

func TestWatcherNoEvalForPlacementsOrPromotion(t *testing.T) {
	h := newHarness(t)
	job := h.register("web", 3, false, "1")
	d, allocs := h.deploy(job, structs.DeploymentState{DesiredTotal: 3, DesiredCanaries: 1}, 1, 1)
	h.tick()
	// More placements in the deployment: no eval.
	more := &structs.Allocation{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, Job: job, NodeID: h.node.ID,
		TaskGroup: "web", Name: "web.web[1]", DeploymentID: d.ID, DeploymentStatus: &structs.AllocDeploymentStatus{}}
	h.mustApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{more}})
	h.tick()
	if n := h.watcherEvals(job); n != 0 {
		t.Fatalf("evals after a placement: %d, want 0", n)
	}
	h.health(allocs[0], true)
	h.tick() // needs promotion: described, no eval
	h.mustApply(structs.DeploymentPromoteRequestType, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, All: true})
	h.tick()
	if n := h.watcherEvals(job); n != 0 {
		t.Errorf("evals after promotion by an entry without one: %d, want 0 (the promote entry carries its own)", n)
	}
	if got := h.deployment(d.ID); got.TaskGroups["web"].PlacedAllocs != 2 || !got.TaskGroups["web"].Promoted {
		t.Errorf("deployment %+v", got.TaskGroups["web"])
	}
}

// In a group with a progress deadline an unhealthy allocation does not
// fail the deployment, as in Nomad: the watcher marks it for replacement
// (DesiredTransition.Reschedule) with an eval in the same entry, once; the
// deployment fails when the deadline passes without progress.
func TestWatcherMarksUnhealthyForReplacement(t *testing.T) {
	h := newHarness(t)
	job := h.register("web", 2, false, "1")
	d, allocs := h.deploy(job, structs.DeploymentState{DesiredTotal: 2, ProgressDeadline: 10 * time.Minute,
		RequireProgressBy: t0.Add(10 * time.Minute)}, 2, 0)
	h.health(allocs[0], false)
	h.tick()
	if got := h.deployment(d.ID); got.Status != structs.DeploymentStatusRunning {
		t.Fatalf("an unhealthy alloc before the progress deadline: deployment %s (%s), want running", got.Status, got.StatusDescription)
	}
	marked := func(a *structs.Allocation) bool {
		stored, _ := h.f.State().AllocByID(nil, a.ID)
		r := stored.DesiredTransition.Reschedule
		return r != nil && *r
	}
	if !marked(allocs[0]) || marked(allocs[1]) {
		t.Fatalf("reschedule marks: unhealthy %v, unknown health %v; want only the unhealthy one", marked(allocs[0]), marked(allocs[1]))
	}
	evals, _ := h.f.State().EvalsByJob(nil, job.Namespace, job.ID)
	if len(evals) != 1 || evals[0].TriggeredBy != structs.EvalTriggerDeploymentWatcher || evals[0].DeploymentID != d.ID {
		t.Fatalf("evals %+v, want one deployment-watcher eval of the deployment", evals)
	}
	h.tick()
	if n := h.watcherEvals(job); n != 1 {
		t.Errorf("evals after a pass without change: %d, want 1 (the alloc is marked once)", n)
	}
	h.advance(11 * time.Minute)
	h.tick()
	if got := h.deployment(d.ID); got.Status != structs.DeploymentStatusFailed || got.StatusDescription != structs.DeploymentStatusDescriptionProgressDeadline {
		t.Errorf("past the progress deadline: %s %q, want failed by the deadline", got.Status, got.StatusDescription)
	}
}

func TestReplacements(t *testing.T) {
	yes, no := true, false
	healthy := func(h bool) *structs.AllocDeploymentStatus { return &structs.AllocDeploymentStatus{Healthy: &h} }
	d := &structs.Deployment{ID: "d", TaskGroups: map[string]*structs.DeploymentState{
		"progress": {ProgressDeadline: time.Minute}, "none": {},
	}}
	allocs := []*structs.Allocation{
		{ID: "b-unhealthy", DeploymentID: "d", TaskGroup: "progress", DeploymentStatus: healthy(false)},
		{ID: "a-unhealthy-unmarked", DeploymentID: "d", TaskGroup: "progress", DeploymentStatus: healthy(false),
			DesiredTransition: structs.DesiredTransition{Reschedule: &no}},
		{ID: "marked", DeploymentID: "d", TaskGroup: "progress", DeploymentStatus: healthy(false),
			DesiredTransition: structs.DesiredTransition{Reschedule: &yes}},
		{ID: "healthy", DeploymentID: "d", TaskGroup: "progress", DeploymentStatus: healthy(true)},
		{ID: "unknown", DeploymentID: "d", TaskGroup: "progress"},
		{ID: "no-deadline", DeploymentID: "d", TaskGroup: "none", DeploymentStatus: healthy(false)},
		{ID: "other-deployment", DeploymentID: "e", TaskGroup: "progress", DeploymentStatus: healthy(false)},
		{ID: "other-group", DeploymentID: "d", TaskGroup: "gone", DeploymentStatus: healthy(false)},
	}
	got := Replacements(d, allocs)
	want := []string{"a-unhealthy-unmarked", "b-unhealthy"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Replacements = %v, want %v", got, want)
	}
}

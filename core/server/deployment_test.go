package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/gc"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// rolloutType is a made-up job type whose test scheduler (rollout) rolls a
// group out through a deployment with canaries: the first plan of a job
// version creates the deployment and places the canaries; once promoted,
// each eval places up to max_parallel more until desired_total are placed.
const rolloutType = "rollout"

var rolloutBehavior = structs.JobTypeBehavior{
	MaxAttempts: 3, Deployments: true,
	DefaultRestart: &structs.RestartPolicy{Attempts: 0, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail},
}

type rolloutRouter struct{ sched *rollout }

func (r rolloutRouter) Lookup(t string) (scheduler.Scheduler, int, error) {
	if t != rolloutType && t != "nodeploy" {
		return nil, 0, structs.NewError(structs.ErrInvalid, "job type %q is not served", t)
	}
	return r.sched, 3, nil
}
func (rolloutRouter) ServedTypes() []string { return []string{"nodeploy", rolloutType} }
func (rolloutRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	switch t {
	case rolloutType:
		return *rolloutBehavior.Copy(), true
	case "nodeploy": // the same, without deployments
		b := rolloutBehavior.Copy()
		b.Deployments = false
		return *b, true
	}
	return structs.JobTypeBehavior{}, false
}

// rollout is the test scheduler. It records the deployment of each request
// so the test can check what the core sent.
type rollout struct {
	mu   sync.Mutex
	seen []*schedulerpb.Deployment
}

func (r *rollout) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{Name: "rollout", JobTypes: []*schedulerpb.JobTypeInfo{{Name: rolloutType, Deployments: true}}}, nil
}

func (r *rollout) Schedule(_ context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	r.mu.Lock()
	r.seen = append(r.seen, req.Deployment)
	r.mu.Unlock()
	job, plan := req.Job, &schedulerpb.Plan{}
	resp := &schedulerpb.ScheduleResponse{Plan: plan}
	if job == nil || job.Stop || len(req.Nodes) == 0 {
		return resp, nil
	}
	tg := job.TaskGroups[0]
	node := req.Nodes[0]
	place := func(n int, canary bool) {
		for i := 0; i < n; i++ {
			plan.NodeAllocation = append(plan.NodeAllocation, &schedulerpb.PlacedAlloc{
				Id: uuid.NewString(), Name: job.Id + "." + tg.Name, NodeId: node.Id, NodeName: node.Name, TaskGroup: tg.Name,
				TaskResources: map[string]*schedulerpb.Resources{"t": {Cpu: 10, MemoryMb: 10}}, Canary: canary,
			})
		}
	}
	d := req.Deployment
	if d == nil || d.JobVersion != job.Version {
		plan.CreateDeployment = &schedulerpb.Deployment{TaskGroups: map[string]*schedulerpb.DeploymentGroupState{
			tg.Name: {DesiredTotal: tg.Count, DesiredCanaries: tg.Update.Canary},
		}}
		place(int(tg.Update.Canary), true)
		return resp, nil
	}
	st := d.TaskGroups[tg.Name]
	if d.Status != structs.DeploymentStatusRunning || !st.Promoted {
		return resp, nil
	}
	inFlight := st.PlacedAllocs - st.HealthyAllocs
	want := min(st.DesiredTotal-st.PlacedAllocs, tg.Update.MaxParallel-inFlight)
	place(int(max(want, 0)), false)
	return resp, nil
}

func rolloutServer(t *testing.T) (*Server, *rollout, *structs.Node) {
	sched := &rollout{}
	s := testServer(t, func(c *Config) { c.Schedulers = rolloutRouter{sched} })
	node := testNode("n1")
	if _, err := s.Nodes().Register(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	return s, sched, node
}

func rolloutJob(id string) *structs.Job {
	j := testJob(id, rolloutType)
	j.TypeBehavior = nil
	j.TaskGroups[0].Count = 2
	j.TaskGroups[0].Update = &structs.UpdateStrategy{MaxParallel: 1, Canary: 1, HealthCheck: "task_states",
		MinHealthyTime: time.Second, HealthyDeadline: time.Minute, ProgressDeadline: 10 * time.Minute}
	return j
}

func deploymentAllocs(t *testing.T, s *Server, d *structs.Deployment) []*structs.Allocation {
	t.Helper()
	allocs, err := s.State().AllocsByDeployment(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	return allocs
}

func reportHealthy(t *testing.T, s *Server, node *structs.Node, allocs ...*structs.Allocation) {
	t.Helper()
	var ups []*structs.Allocation
	for _, a := range allocs {
		h := true
		ups = append(ups, &structs.Allocation{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning,
			DeploymentStatus: &structs.AllocDeploymentStatus{Healthy: &h, Timestamp: time.Now()}})
	}
	if err := s.Nodes().UpdateAllocs(context.Background(), node.ID, node.SecretID, ups); err != nil {
		t.Fatal(err)
	}
}

// TestDeploymentRolloutEndToEnd drives plan → deployment → client health
// → watcher → promote → eval → placement → success on a real server.
func TestDeploymentRolloutEndToEnd(t *testing.T) {
	s, sched, node := rolloutServer(t)
	ctx := context.Background()
	job := rolloutJob("web")
	if _, err := s.Jobs().Register(ctx, job, false, 0); err != nil {
		t.Fatal(err)
	}
	var d *structs.Deployment
	waitFor(t, 10*time.Second, "the deployment and its canary", func() bool {
		d, _ = s.State().LatestDeploymentByJob(nil, structs.DefaultNamespace, "web")
		return d != nil && len(deploymentAllocs(t, s, d)) == 1
	})
	if g := d.TaskGroups["g"]; g.DesiredTotal != 2 || g.DesiredCanaries != 1 || g.PlacedAllocs != 1 || len(g.PlacedCanaries) != 1 ||
		!g.RequireProgressBy.After(time.Now()) {
		t.Fatalf("deployment group %+v", g)
	}
	canary := deploymentAllocs(t, s, d)[0]
	if !canary.DeploymentStatus.IsCanary() {
		t.Fatalf("placed canary has status %+v", canary.DeploymentStatus)
	}
	// Promotion before the canary is healthy is refused, with its kind.
	if _, err := s.Deployments().Promote(ctx, d.ID, true, nil); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("early promotion: %v, want ErrInvalid", err)
	}
	reportHealthy(t, s, node, canary)
	waitFor(t, 10*time.Second, "the watcher to ask for promotion", func() bool {
		d, _ = s.State().DeploymentByID(nil, d.ID)
		return d.StatusDescription == structs.DeploymentStatusDescriptionRunningNeedsPromotion
	})
	resp, err := s.Deployments().Promote(ctx, d.ID, false, []string{"g"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the promotion eval to place the second alloc", func() bool {
		return evalStatus(t, s, resp.EvalID) == structs.EvalStatusComplete && len(deploymentAllocs(t, s, d)) == 2
	})
	var second *structs.Allocation
	for _, a := range deploymentAllocs(t, s, d) {
		if a.ID != canary.ID {
			second = a
		}
	}
	if second.DeploymentStatus.IsCanary() {
		t.Errorf("the post-promotion alloc is a canary")
	}
	reportHealthy(t, s, node, second)
	waitFor(t, 10*time.Second, "the deployment to succeed", func() bool {
		d, _ = s.State().DeploymentByID(nil, d.ID)
		return d.Status == structs.DeploymentStatusSuccessful
	})
	stored, _ := s.State().JobByID(nil, structs.DefaultNamespace, "web")
	if !stored.Stable {
		t.Errorf("job version not marked stable")
	}
	sched.mu.Lock()
	defer sched.mu.Unlock()
	last := sched.seen[len(sched.seen)-1]
	if last == nil || last.Id != d.ID || last.TaskGroups["g"].HealthyAllocs < 1 {
		t.Errorf("the scheduler's last request carried deployment %+v", last)
	}
}

func TestDeploymentEndpointsRefuse(t *testing.T) {
	s, _, _ := rolloutServer(t)
	ctx := context.Background()
	if _, err := s.Jobs().Register(ctx, rolloutJob("web"), false, 0); err != nil {
		t.Fatal(err)
	}
	var d *structs.Deployment
	waitFor(t, 10*time.Second, "the deployment", func() bool {
		d, _ = s.State().LatestDeploymentByJob(nil, structs.DefaultNamespace, "web")
		return d != nil && len(deploymentAllocs(t, s, d)) == 1
	})
	// The worker records its eval's end after the plan that placed the
	// alloc: wait for it, so that no write of its own lands between a
	// refused call and the check that the call wrote nothing.
	waitFor(t, 10*time.Second, "the job's evals to end", func() bool {
		evals, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, "web")
		if err != nil || len(evals) == 0 {
			return false
		}
		for _, e := range evals {
			if !e.TerminalStatus() {
				return false
			}
		}
		return true
	})
	tests := []struct {
		name string
		call func() error
		kind error
		msg  string
	}{
		{"promote unknown", func() error { _, err := s.Deployments().Promote(ctx, "nope", true, nil); return err }, structs.ErrNotFound, "not found"},
		{"promote nothing", func() error { _, err := s.Deployments().Promote(ctx, d.ID, false, nil); return err }, structs.ErrInvalid, "Groups"},
		{"promote unknown group", func() error { _, err := s.Deployments().Promote(ctx, d.ID, false, []string{"db"}); return err }, structs.ErrInvalid, `"db"`},
		{"health of no alloc", func() error { _, err := s.Deployments().SetAllocHealth(ctx, d.ID, nil, nil); return err }, structs.ErrInvalid, "HealthyAllocationIDs"},
		{"health of a foreign alloc", func() error {
			_, err := s.Deployments().SetAllocHealth(ctx, d.ID, []string{uuid.NewString()}, nil)
			return err
		}, structs.ErrInvalid, "not part of deployment"},
		{"pause unknown", func() error { _, err := s.Deployments().Pause(ctx, "nope", true); return err }, structs.ErrNotFound, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.State().LatestIndex()
			err := tt.call()
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want kind %v naming %q", err, tt.kind, tt.msg)
			}
			if s.State().LatestIndex() != before {
				t.Errorf("a refused call wrote to the state")
			}
		})
	}
	// Pause, resume, then fail by hand: terminal, and further writes refused.
	if _, err := s.Deployments().Pause(ctx, d.ID, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.State().DeploymentByID(nil, d.ID); got.Status != structs.DeploymentStatusPaused {
		t.Errorf("paused deployment is %s", got.Status)
	}
	if _, err := s.Deployments().Pause(ctx, d.ID, false); err != nil {
		t.Fatal(err)
	}
	alloc := deploymentAllocs(t, s, d)[0]
	if _, err := s.Deployments().SetAllocHealth(ctx, d.ID, []string{alloc.ID}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Deployments().Fail(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := s.State().DeploymentByID(nil, d.ID)
	if got.Status != structs.DeploymentStatusFailed || !strings.HasPrefix(got.StatusDescription, structs.DeploymentStatusDescriptionFailedByUser) {
		t.Errorf("failed deployment %s %q", got.Status, got.StatusDescription)
	}
	if _, err := s.Deployments().Fail(ctx, d.ID); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("failing a failed deployment: %v, want ErrInvalid", err)
	}
}

func TestCanaryRefusedForTypesWithoutDeployments(t *testing.T) {
	s, _, _ := rolloutServer(t)
	job := rolloutJob("plain")
	job.Type = "nodeploy"
	before := s.State().LatestIndex()
	_, err := s.Jobs().Register(context.Background(), job, false, 0)
	var ve *structs.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || !strings.Contains(ve.Errors[0], `group "g": update.canary is 1`) {
		t.Fatalf("err = %v, want one validation error naming the group's update.canary", err)
	}
	if s.State().LatestIndex() != before {
		t.Errorf("a refused job was written")
	}
	job.TaskGroups[0].Update.Canary = 0
	if _, err := s.Jobs().Register(context.Background(), job, false, 0); err != nil {
		t.Errorf("without canaries the job is accepted: %v", err)
	}
}

func TestConvertPlanDeploymentRefusesBadPlugins(t *testing.T) {
	s, _, node := rolloutServer(t)
	ctx := context.Background()
	if _, err := s.Jobs().Register(ctx, rolloutJob("web"), false, 0); err != nil {
		t.Fatal(err)
	}
	var d *structs.Deployment
	waitFor(t, 10*time.Second, "the deployment", func() bool {
		d, _ = s.State().LatestDeploymentByJob(nil, structs.DefaultNamespace, "web")
		return d != nil
	})
	// A second job, whose deployment the first one's plans may not touch.
	if _, err := s.Jobs().Register(ctx, rolloutJob("other"), false, 0); err != nil {
		t.Fatal(err)
	}
	var otherD *structs.Deployment
	waitFor(t, 10*time.Second, "the other deployment", func() bool {
		otherD, _ = s.State().LatestDeploymentByJob(nil, structs.DefaultNamespace, "other")
		return otherD != nil
	})
	snap, err := s.State().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	job, _ := snap.JobByID(nil, structs.DefaultNamespace, "web")
	ev := &structs.Evaluation{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, Priority: 50}
	group := func(total, canaries int32) map[string]*schedulerpb.DeploymentGroupState {
		return map[string]*schedulerpb.DeploymentGroupState{"g": {DesiredTotal: total, DesiredCanaries: canaries}}
	}
	placed := func(canary bool) []*schedulerpb.PlacedAlloc {
		return []*schedulerpb.PlacedAlloc{{Id: uuid.NewString(), NodeId: node.ID, TaskGroup: "g", Canary: canary}}
	}
	tests := []struct {
		name string
		plan *schedulerpb.Plan
		want string // "" = accepted
	}{
		{"valid creation", &schedulerpb.Plan{CreateDeployment: &schedulerpb.Deployment{TaskGroups: group(2, 1)}, NodeAllocation: placed(true)}, ""},
		{"unknown group", &schedulerpb.Plan{CreateDeployment: &schedulerpb.Deployment{TaskGroups: map[string]*schedulerpb.DeploymentGroupState{"db": {}}}}, `group "db"`},
		{"no groups", &schedulerpb.Plan{CreateDeployment: &schedulerpb.Deployment{}}, "task_groups is empty"},
		{"total over count", &schedulerpb.Plan{CreateDeployment: &schedulerpb.Deployment{TaskGroups: group(3, 0)}}, "desired_total is 3"},
		{"negative canaries", &schedulerpb.Plan{CreateDeployment: &schedulerpb.Deployment{TaskGroups: group(2, -1)}}, "desired_canaries is -1"},
		{"bad id", &schedulerpb.Plan{CreateDeployment: &schedulerpb.Deployment{Id: "x", TaskGroups: group(2, 1)}}, "not a UUID"},
		{"id of another job's deployment", &schedulerpb.Plan{CreateDeployment: &schedulerpb.Deployment{Id: otherD.ID, TaskGroups: group(2, 1)}}, "already names"},
		{"update of another job's deployment", &schedulerpb.Plan{DeploymentUpdates: []*schedulerpb.DeploymentStatusUpdate{
			{DeploymentId: otherD.ID, Status: structs.DeploymentStatusCancelled}}}, "not a deployment of the job"},
		{"unknown status", &schedulerpb.Plan{DeploymentUpdates: []*schedulerpb.DeploymentStatusUpdate{
			{DeploymentId: d.ID, Status: "done"}}}, `status "done"`},
		{"canary without a deployment of the group", &schedulerpb.Plan{DeploymentUpdates: []*schedulerpb.DeploymentStatusUpdate{
			{DeploymentId: d.ID, Status: structs.DeploymentStatusCancelled}}, NodeAllocation: placed(true)}, "is a canary"},
		{"placement joins the active deployment", &schedulerpb.Plan{NodeAllocation: placed(false)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, _, err := schedio.ConvertPlan(snap, ev, "tok", job, tt.plan, s.cfg.Now())
			if tt.want != "" {
				if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want ErrInvalid naming %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, allocs := range plan.NodeAllocation {
				for _, a := range allocs {
					wantID := d.ID
					if plan.Deployment != nil {
						wantID = plan.Deployment.ID
					}
					if a.DeploymentID != wantID {
						t.Errorf("placed alloc in deployment %q, want %q", a.DeploymentID, wantID)
					}
				}
			}
			if pd := plan.Deployment; pd != nil {
				if pd.JobID != "web" || pd.JobVersion != job.Version || pd.Status != structs.DeploymentStatusRunning ||
					pd.TaskGroups["g"].ProgressDeadline != 10*time.Minute || pd.TaskGroups["g"].RequireProgressBy.IsZero() {
					t.Errorf("created deployment %+v", pd)
				}
				again, _, _ := schedio.ConvertPlan(snap, ev, "tok", job, tt.plan, s.cfg.Now())
				if again.Deployment.ID != pd.ID {
					t.Errorf("deployment ID %s then %s: not derived from the eval", pd.ID, again.Deployment.ID)
				}
			}
		})
	}
}

func TestGCReapsFinishedDeployments(t *testing.T) {
	s, _ := gcServer(t, gc.New(), nil)
	node := testNode("a")
	registerNodes(t, s, node)
	if _, err := s.Jobs().Register(context.Background(), testJob("j", "sysbatch"), false, 0); err != nil {
		t.Fatal(err)
	}
	job, _ := s.State().JobByID(nil, structs.DefaultNamespace, "j")
	mk := func() *structs.Deployment {
		return &structs.Deployment{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, JobCreateIndex: job.CreateIndex,
			Status: structs.DeploymentStatusRunning, TaskGroups: map[string]*structs.DeploymentState{"g": {DesiredTotal: 1}}}
	}
	apply := func(typ structs.MessageType, msg any) {
		t.Helper()
		if _, err := s.raftApply(typ, msg); err != nil {
			t.Fatal(err)
		}
	}
	end := func(d *structs.Deployment) {
		apply(structs.DeploymentStatusUpdateRequestType, &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{
			DeploymentID: d.ID, Status: structs.DeploymentStatusFailed}})
	}
	// done: failed, nothing live. running: active. busy: failed with a
	// live alloc. (Each new deployment cancels the job's older active
	// one, so they are created in this order.)
	done, busy, running := mk(), mk(), mk()
	apply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, Deployment: done})
	end(done)
	live := &structs.Allocation{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, Job: job, NodeID: node.ID,
		TaskGroup: "g", Name: "j.g[0]", DeploymentID: busy.ID, ClientStatus: structs.AllocClientStatusRunning}
	apply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, Deployment: busy, AllocsUpdated: []*structs.Allocation{live}})
	end(busy)
	apply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, Deployment: running})

	forceGC(t, s)
	for _, tt := range []struct {
		d    *structs.Deployment
		kept bool
	}{{done, false}, {busy, true}, {running, true}} {
		got, _ := s.State().DeploymentByID(nil, tt.d.ID)
		if (got != nil) != tt.kept {
			t.Errorf("deployment %s (%s): kept %v, want %v", tt.d.ID, tt.d.Status, got != nil, tt.kept)
		}
	}
}

func TestSubmittedStableIsIgnored(t *testing.T) {
	s, _, _ := rolloutServer(t)
	job := rolloutJob("web")
	job.Stable = true
	if _, err := s.Jobs().Register(context.Background(), job, false, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.State().JobByID(nil, structs.DefaultNamespace, "web"); got.Stable {
		t.Errorf("a submitted Stable flag was stored")
	}
}

// An operator who sets an allocation unhealthy fails its deployment at
// once, as Nomad does, though the group's progress deadline (10m) would
// let the watcher replace an allocation its client reports unhealthy.
func TestSetAllocUnhealthyFailsDeployment(t *testing.T) {
	s, _, _ := rolloutServer(t)
	ctx := context.Background()
	if _, err := s.Jobs().Register(ctx, rolloutJob("web"), false, 0); err != nil {
		t.Fatal(err)
	}
	var d *structs.Deployment
	waitFor(t, 10*time.Second, "the deployment", func() bool {
		d, _ = s.State().LatestDeploymentByJob(nil, structs.DefaultNamespace, "web")
		return d != nil && len(deploymentAllocs(t, s, d)) == 1
	})
	if d.TaskGroups["g"].ProgressDeadline == 0 {
		t.Fatalf("deployment group %+v has no progress deadline", d.TaskGroups["g"])
	}
	alloc := deploymentAllocs(t, s, d)[0]
	resp, err := s.Deployments().SetAllocHealth(ctx, d.ID, nil, []string{alloc.ID})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.State().DeploymentByID(nil, d.ID)
	if got.Status != structs.DeploymentStatusFailed || !strings.HasPrefix(got.StatusDescription, structs.DeploymentStatusDescriptionFailedAllocations) {
		t.Errorf("deployment after an unhealthy verdict: %s %q, want failed by its allocations", got.Status, got.StatusDescription)
	}
	if ev, _ := s.State().EvalByID(nil, resp.EvalID); ev == nil || ev.DeploymentID != d.ID {
		t.Errorf("eval %q of the failure: %+v", resp.EvalID, ev)
	}
}

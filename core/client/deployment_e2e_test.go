package client

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// canaryRollout is a minimal scheduler plugin that rolls a job's one group
// out with canaries through a deployment: the first plan of a version
// creates the deployment and places the canaries; once promoted, each eval
// places up to max_parallel more, until desired_total.
type canaryRollout struct{}

const canaryType = "canary-rollout"

func (canaryRollout) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{Name: "canary", JobTypes: []*schedulerpb.JobTypeInfo{{Name: canaryType, Deployments: true}}}, nil
}

func (canaryRollout) Schedule(_ context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	plan := &schedulerpb.Plan{}
	resp := &schedulerpb.ScheduleResponse{Plan: plan}
	job := req.Job
	if job == nil || len(req.Nodes) == 0 {
		return resp, nil
	}
	tg, node := job.TaskGroups[0], req.Nodes[0]
	if job.Stop {
		for _, a := range req.Allocs {
			if a.DesiredStatus == structs.AllocDesiredStatusRun {
				plan.NodeUpdate = append(plan.NodeUpdate, &schedulerpb.AllocStop{AllocId: a.Id, NodeId: a.NodeId, DesiredDescription: "alloc not needed due to job stop"})
			}
		}
		return resp, nil
	}
	place := func(n int, canary bool) {
		for i := 0; i < n; i++ {
			plan.NodeAllocation = append(plan.NodeAllocation, &schedulerpb.PlacedAlloc{
				Id: uuid.NewString(), Name: job.Id + "." + tg.Name, NodeId: node.Id, NodeName: node.Name, TaskGroup: tg.Name,
				TaskResources: map[string]*schedulerpb.Resources{tg.Tasks[0].Name: {Cpu: 10, MemoryMb: 10}}, Canary: canary,
			})
		}
	}
	d := req.Deployment
	if d == nil || d.JobVersion != job.Version {
		plan.CreateDeployment = &schedulerpb.Deployment{TaskGroups: map[string]*schedulerpb.DeploymentGroupState{
			tg.Name: {DesiredTotal: tg.Count, DesiredCanaries: tg.Update.Canary}}}
		place(int(tg.Update.Canary), true)
		return resp, nil
	}
	st := d.TaskGroups[tg.Name]
	if d.Status == structs.DeploymentStatusRunning && st.Promoted {
		place(int(max(0, min(st.DesiredTotal-st.PlacedAllocs, tg.Update.MaxParallel-(st.PlacedAllocs-st.HealthyAllocs)))), false)
	}
	return resp, nil
}

type canaryRouter struct{}

func (canaryRouter) Lookup(string) (scheduler.Scheduler, int, error) { return canaryRollout{}, 3, nil }
func (canaryRouter) ServedTypes() []string                           { return []string{canaryType} }
func (canaryRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	return structs.JobTypeBehavior{MaxAttempts: 3, Deployments: true,
		DefaultRestart: &structs.RestartPolicy{Attempts: 0, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail}}, t == canaryType
}

// TestDeploymentEndToEnd runs the whole path on a real server and a real
// client with real tasks: plan → deployment → canary placed → client runs
// it and reports health → watcher asks for promotion → promote → eval →
// next placement → healthy → deployment successful, job version stable.
func TestDeploymentEndToEnd(t *testing.T) {
	srv, err := server.New(server.Config{Logger: hclog.NewNullLogger(), DevMode: true, Schedulers: canaryRouter{},
		KnownDrivers: []string{rawexec.Name}, HeartbeatTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := srv.WaitForLeader(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{StateDir: t.TempDir(), Server: server.NewClientConn(srv), Drivers: fakeProvider{rawexec.Name: newRawExec(t)},
		UpdateBatchInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond, LogPollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	select {
	case <-c.Registered():
	case <-time.After(testTimeout):
		t.Fatal("client did not register")
	}

	job := &structs.Job{ID: "web", Type: canaryType, Datacenters: []string{"*"}, TaskGroups: []*structs.TaskGroup{{
		Name: "web", Count: 2, Tasks: []*structs.Task{rawTask("web", "/bin/sleep", "60")},
		Update: &structs.UpdateStrategy{MaxParallel: 1, Canary: 1, HealthCheck: structs.UpdateHealthCheckTaskStates,
			MinHealthyTime: 100 * time.Millisecond, HealthyDeadline: time.Minute, ProgressDeadline: 10 * time.Minute},
	}}}
	job.TaskGroups[0].Tasks[0].Resources = &structs.Resources{CPU: 10, MemoryMB: 10}
	if _, err := srv.Jobs().Register(ctx, job, false, 0); err != nil {
		t.Fatal(err)
	}
	st := srv.State()
	latest := func() *structs.Deployment {
		d, err := st.LatestDeploymentByJob(nil, structs.DefaultNamespace, "web")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	waitFor(t, "the canary healthy and the watcher asking for promotion", func() bool {
		d := latest()
		return d != nil && d.TaskGroups["web"].HealthyAllocs == 1 && d.StatusDescription == structs.DeploymentStatusDescriptionRunningNeedsPromotion
	})
	d := latest()
	if _, err := srv.Deployments().Promote(ctx, d.ID, true, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deployment to succeed", func() bool { return latest().Status == structs.DeploymentStatusSuccessful })
	d = latest()
	if g := d.TaskGroups["web"]; g.PlacedAllocs != 2 || g.HealthyAllocs != 2 || len(g.PlacedCanaries) != 1 || !g.Promoted {
		t.Errorf("final group state %+v", g)
	}
	stored, _ := st.JobByID(nil, structs.DefaultNamespace, "web")
	if !stored.Stable {
		t.Errorf("job version not marked stable")
	}
	allocs, _ := st.AllocsByDeployment(nil, d)
	for _, a := range allocs {
		if !a.DeploymentStatus.IsHealthy() || a.ClientStatus != structs.AllocClientStatusRunning {
			t.Errorf("alloc %s: %s, deployment status %+v", a.ID, a.ClientStatus, a.DeploymentStatus)
		}
	}

	// Stop the job so that the tasks end before the client shuts down.
	if _, err := srv.Jobs().Deregister(ctx, structs.DefaultNamespace, "web", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tasks to stop", func() bool {
		allocs, _ := st.AllocsByDeployment(nil, d)
		for _, a := range allocs {
			if !a.ClientTerminalStatus() {
				return false
			}
		}
		return true
	})
}

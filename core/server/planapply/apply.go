package planapply

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/server/planqueue"
	"github.com/drover-org/drover/core/structs"
)

// Snapshot is what applying a plan reads: the decision's State plus the
// jobs of preempted allocs, which get an eval each.
type Snapshot interface {
	State
	JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error)
}

// Queue hands the applier the next plan; *planqueue.Queue serves it.
type Queue interface {
	// Dequeue blocks until a plan is queued and returns it, or returns an
	// error when ctx ends or the queue is disabled.
	Dequeue(ctx context.Context) (*planqueue.Pending, error)
}

// Config is the applier's view of the server. Every field but Logger and
// Observe is required.
type Config struct {
	// Snapshot returns a snapshot of state at index minIndex or later,
	// waiting within ctx for the FSM to get there.
	Snapshot func(ctx context.Context, minIndex uint64) (Snapshot, error)
	// Commit writes an ApplyPlanResults entry through Raft and returns
	// its index once applied.
	Commit func(req *structs.ApplyPlanResultsRequest) (uint64, error)
	// NewEval returns a pending eval of job triggered by trigger (the
	// server's constructor: ID, priority, type, create time).
	NewEval func(job *structs.Job, trigger string) *structs.Evaluation
	// Now is the clock that stamps the entry's UpdatedAt.
	Now func() time.Time
	// Logger logs each rejected node (debug); nil logs nothing.
	Logger hclog.Logger
	// Observe is told each plan's apply time and rejected nodes
	// (metrics); nil observes nothing.
	Observe func(d time.Duration, rejectedNodes int)
}

// Applier checks and commits plans. It holds no state of its own: the
// plan queue orders the plans and Run applies them one at a time.
type Applier struct {
	cfg Config
}

// New returns an applier of cfg.
func New(cfg Config) *Applier {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Observe == nil {
		cfg.Observe = func(time.Duration, int) {}
	}
	return &Applier{cfg: cfg}
}

// Run is the leader's single plan-applying loop: it applies each plan the
// queue hands it and responds to its submitter, until ctx ends or the
// queue is disabled. The caller owns the goroutine.
func (a *Applier) Run(ctx context.Context, q Queue) {
	for {
		pending, err := q.Dequeue(ctx)
		if err != nil {
			return
		}
		start := time.Now()
		result, err := a.Apply(ctx, pending.Plan)
		rejected := 0
		if result != nil {
			rejected = len(result.RejectedNodes)
		}
		a.cfg.Observe(time.Since(start), rejected)
		pending.Respond(result, err)
	}
}

// Apply decides what of plan fits the state at the plan's snapshot index
// or later and commits that through Raft. A result that commits nothing
// (everything rejected, or nothing asked) is returned without a write;
// otherwise AllocIndex is the commit's index, and a partial commit's
// RefreshIndex is raised to it.
func (a *Applier) Apply(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, error) {
	snap, err := a.cfg.Snapshot(ctx, plan.SnapshotIndex)
	if err != nil {
		return nil, err
	}
	// A purged job's deregister eval plans only stops, which need no job;
	// placements do, as the allocs they create carry it.
	if plan.Job == nil && len(plan.NodeAllocation) > 0 {
		return nil, fmt.Errorf("plan for eval %s has no job", plan.EvalID)
	}
	result, reasons := Evaluate(snap, plan)
	for node, why := range reasons {
		a.cfg.Logger.Debug("plan rejected on node", "eval_id", plan.EvalID, "node_id", node, "reason", why)
	}
	req, commit := commitRequest(plan, result, a.cfg.Now())
	if !commit {
		return result, nil
	}
	for _, id := range preemptedJobs(result) {
		job, err := snap.JobByID(nil, id.Namespace, id.ID)
		if err != nil {
			return nil, err
		}
		if job == nil || job.Stop {
			continue
		}
		ev := a.cfg.NewEval(job, structs.EvalTriggerPreemption)
		ev.JobModifyIndex = job.JobModifyIndex
		req.PreemptionEvals = append(req.PreemptionEvals, ev)
	}
	index, err := a.cfg.Commit(req)
	if err != nil {
		return nil, err
	}
	result.AllocIndex = index
	if result.RefreshIndex != 0 && index > result.RefreshIndex {
		result.RefreshIndex = index
	}
	return result, nil
}

// commitRequest is the Raft entry of a decided plan, without its
// preemption evals, and whether there is anything to commit. The
// deployment part commits with whatever of the plan commits, unless an
// all-at-once plan was refused. Placements share one copy of the
// placement metrics: the first new alloc's metrics go in the entry once
// and every new alloc carrying that same value is stored without them.
func commitRequest(plan *structs.Plan, result *structs.PlanResult, now time.Time) (*structs.ApplyPlanResultsRequest, bool) {
	deploy := (plan.Deployment != nil || len(plan.DeploymentUpdates) > 0) && !(plan.AllAtOnce && len(result.RejectedNodes) > 0)
	if result.IsNoOp() && !deploy {
		return nil, false
	}
	req := &structs.ApplyPlanResultsRequest{
		Job: plan.Job, EvalID: plan.EvalID, UpdatedAt: now.UnixNano(),
		FollowupEvals: result.FollowupEvals, AllocFollowups: result.AllocFollowups,
	}
	if deploy {
		req.Deployment, req.DeploymentUpdates = plan.Deployment, plan.DeploymentUpdates
	}
	for _, allocs := range result.NodeUpdate {
		req.AllocsStopped = append(req.AllocsStopped, allocs...)
	}
	for _, allocs := range result.NodeAllocation {
		for _, a := range allocs {
			if a.Metrics != nil && a.CreateIndex == 0 {
				if req.PlacementMetric == nil {
					req.PlacementMetric = a.Metrics
				}
				if a.Metrics == req.PlacementMetric {
					c := *a
					c.Metrics = nil
					a = &c
				}
			}
			req.AllocsUpdated = append(req.AllocsUpdated, a)
		}
	}
	for _, allocs := range result.NodePreemptions {
		req.AllocsPreempted = append(req.AllocsPreempted, allocs...)
	}
	return req, true
}

// preemptedJobs lists, once each, the jobs whose allocs result preempts.
func preemptedJobs(result *structs.PlanResult) []structs.NamespacedID {
	seen := map[structs.NamespacedID]bool{}
	var out []structs.NamespacedID
	for _, allocs := range result.NodePreemptions {
		for _, a := range allocs {
			id := structs.NamespacedID{ID: a.JobID, Namespace: a.Namespace}
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

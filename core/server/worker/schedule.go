package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/server/evalbroker"
	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// worker takes evals from the broker and runs them through the scheduler
// plugin that serves the eval's type.
type worker struct {
	p      *Pool
	id     int
	logger hclog.Logger
	// state is the worker's status for Pool.Info (a spare's is its own,
	// unlisted).
	state *workerState
	// types are the job types the worker takes (nil: every type).
	types map[string]bool
}

func (p *Pool) newWorker(id int) *worker {
	return &worker{p: p, id: id, logger: p.logger.With("worker_id", id), state: &workerState{}}
}

// run takes and processes evals until ctx ends or until until is closed
// (nil: never; a spare's or a removed worker's), after which it finishes
// the eval it holds.
func (w *worker) run(ctx context.Context, until <-chan struct{}) {
	backoff := time.NewTimer(0)
	defer backoff.Stop()
	deq := ctx
	if until != nil {
		var cancel context.CancelFunc
		deq, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-until:
				cancel()
			case <-deq.Done():
			}
		}()
	}
	for {
		if deq.Err() != nil {
			return
		}
		// Every type is taken, served or not: an eval of a type no plugin
		// serves right now is held (handed back with a growing delay,
		// holdDelay) rather than left in the broker unseen, so it is
		// scheduled soon after a plugin declares its type again.
		gate := w.p.gate
		admit := gate.admits
		if w.types != nil {
			admit = func(t string) bool { return w.types[t] && gate.admits(t) }
		}
		w.state.workload.Store(WorkloadWaitingToDequeue)
		ev, token, err := w.p.cfg.Broker.DequeueFunc(deq, admit)
		if err != nil {
			if deq.Err() != nil {
				return
			}
			// Not the leader (broker disabled) or shutting down: wait a
			// little before asking again.
			backoff.Reset(100 * time.Millisecond)
			select {
			case <-ctx.Done():
				return
			case <-backoff.C:
			}
			continue
		}
		if !gate.enter(ev.Type) {
			// Another worker took the degraded type's one slot since the
			// broker asked; the eval was not tried, so it costs no delivery.
			if rerr := w.p.cfg.Broker.Requeue(ev.ID, token, 0); rerr != nil {
				w.logger.Debug("requeue failed", "eval_id", ev.ID, "error", rerr)
			}
			continue
		}
		w.state.workload.Store(WorkloadScheduling)
		w.process(ctx, ev, token)
		gate.leave(ev.Type)
	}
}

func (w *worker) process(ctx context.Context, ev *structs.Evaluation, token string) {
	start := time.Now()
	log := w.logger.With("eval_id", ev.ID, "job_id", ev.JobID, "type", ev.Type, "triggered_by", ev.TriggeredBy)
	err := w.schedule(ctx, ev, token, log)
	var unserved *notServed
	if errors.As(err, &unserved) {
		w.hold(ev, token, unserved, log)
		return
	}
	var later *retryLater
	if errors.As(err, &later) {
		log.Debug("scheduler plugin unavailable; eval handed back without spending a delivery", "error", later.err)
		if rerr := w.p.cfg.Broker.Requeue(ev.ID, token, w.unavailableRetryDelay()); rerr != nil {
			log.Debug("requeue failed", "error", rerr)
		}
		return
	}
	if err != nil {
		log.Warn("eval processing failed; nacking for redelivery", "error", err)
		w.p.reasons.set(ev.ID, err.Error())
		if nerr := w.p.cfg.Broker.Nack(ev.ID, token); nerr != nil {
			log.Debug("nack failed", "error", nerr)
		}
		return
	}
	w.p.reasons.take(ev.ID)
	if n := w.p.held.take(ev.ID); n > 0 {
		log.Info("job type served again; the held eval was scheduled", "times_held", n)
	}
	if aerr := w.p.cfg.Broker.Ack(ev.ID, token); aerr != nil {
		log.Debug("ack failed", "error", aerr)
	}
	log.Debug("eval processed", "duration", time.Since(start))
}

// schedule runs the attempt loop of one eval: build the request, call the
// plugin, submit the plan, retry on partial commits, then record the eval.
func (w *worker) schedule(ctx context.Context, ev *structs.Evaluation, token string, log hclog.Logger) error {
	cfg := &w.p.cfg
	snap, err := cfg.Snapshot(ctx, ev.ModifyIndex)
	if err != nil {
		return err
	}
	sched, maxAttempts, err := cfg.Schedulers.Lookup(ev.Type)
	if err != nil {
		if errors.Is(err, structs.ErrUnavailable) {
			// The plugin is restarting: nothing was tried, so the eval
			// keeps its deliveries for when the plugin is back.
			return &retryLater{err: err}
		}
		return w.notServed(ev)
	}
	if maxAttempts <= 0 {
		maxAttempts = 1
	}
	attempts := 0
	var queued map[string]int
	var limited placementCap
	// ev is ours to replace (not to modify): once a plan has created a
	// deployment, the eval finishes naming it, as Nomad's scheduler
	// records it, so `nomad job run` follows the deployment it started.
	withDeployment := func(id string) {
		if id != "" && ev.DeploymentID != id {
			ev = ev.Copy()
			ev.DeploymentID = id
		}
	}
	for try := 1; ; try++ {
		job, err := snap.JobByID(nil, ev.Namespace, ev.JobID)
		if err != nil {
			return fmt.Errorf("read job %q: %w", ev.JobID, err)
		}
		req, err := schedio.BuildRequest(snap, cfg.NodeCache, ev, job, try, cfg.Now())
		if err != nil {
			return err
		}
		req.MaxPlacements = int32(cfg.MaxAllocsPerEval)
		resp, err := w.callScheduler(ctx, sched, ev, token, req, log)
		if err != nil {
			return err
		}
		if resp.Status != "" {
			return w.finish(ev, resp.Status, resp.StatusDescription, nil, nil, nil, 0)
		}
		limited = w.capPlacements(req, resp)
		if limited.dropped > 0 {
			log.Warn("plan placed more than the allocation limits allow; the rest stays queued",
				"kept", limited.placed, "dropped", limited.dropped, "limit", limited.limit, "by_job_limit", limited.byJob)
		}
		queued = make(map[string]int, len(resp.QueuedAllocations))
		for tg, n := range resp.QueuedAllocations {
			queued[tg] = int(n)
		}
		plan, newAllocs, err := schedio.ConvertPlan(snap, ev, token, job, resp.Plan, cfg.Now())
		if err != nil {
			return err
		}
		if err := schedio.ConvertFollowups(snap, ev, job, resp, plan, cfg.Now()); err != nil {
			return err
		}
		if plan.IsNoOp() && len(plan.NodePreemptions) == 0 {
			return w.finishScheduled(ev, resp, queued, plan.Annotations, snap.LatestIndex(), limited)
		}
		if err := cfg.Broker.PauseNackTimeout(ev.ID, token); err != nil {
			return fmt.Errorf("eval is no longer ours: %w", err)
		}
		result, err := w.submitPlan(ctx, plan)
		if rerr := cfg.Broker.ResumeNackTimeout(ev.ID, token); rerr != nil && err == nil {
			// The plan is committed, but the eval was redelivered: the
			// other delivery records the outcome.
			return fmt.Errorf("eval is no longer ours: %w", rerr)
		}
		if err != nil {
			return fmt.Errorf("submit plan: %w", err)
		}
		if plan.Deployment != nil && !(plan.AllAtOnce && len(result.RejectedNodes) > 0) {
			withDeployment(plan.Deployment.ID) // committed with the plan (core/server/planapply.go)
		}
		// Only what the plugin reported queued is counted down: a plugin
		// that leaves QueuedAllocations out must neither go negative nor
		// write to its nil map.
		for _, allocs := range result.NodeAllocation {
			for _, a := range allocs {
				if newAllocs[a.ID] && queued[a.TaskGroup] > 0 {
					queued[a.TaskGroup]--
				}
			}
		}
		for tg := range queued {
			resp.QueuedAllocations[tg] = int32(queued[tg])
		}
		full, expected, actual := result.FullCommit(plan)
		if full {
			return w.finishScheduled(ev, resp, queued, plan.Annotations, snap.LatestIndex(), limited)
		}
		log.Debug("plan partially committed", "expected", expected, "actual", actual, "refresh_index", result.RefreshIndex)
		if result.IsNoOp() {
			attempts++
		} else {
			attempts = 0
		}
		if attempts >= maxAttempts {
			return w.finish(ev, structs.EvalStatusFailed, fmt.Sprintf("maximum attempts reached (%d)", maxAttempts), resp, queued, plan.Annotations, snap.LatestIndex())
		}
		refresh := result.RefreshIndex
		if result.AllocIndex > refresh {
			refresh = result.AllocIndex
		}
		if snap, err = cfg.Snapshot(ctx, refresh); err != nil {
			return err
		}
	}
}

// callScheduler makes one plugin call, bounded by Config.CallTimeout so
// that a hung plugin (stopped, deadlocked) costs one attempt, not a worker.
// The broker's nack timer is paused meanwhile: the call has its own bound,
// and a slow but live plugin must not see its eval redelivered to a second
// worker while it still works on it.
func (w *worker) callScheduler(ctx context.Context, sched scheduler.Scheduler, ev *structs.Evaluation, token string,
	req *pb.ScheduleRequest, log hclog.Logger) (*pb.ScheduleResponse, error) {
	p, cfg := w.p, &w.p.cfg
	timeout := cfg.CallTimeout
	if err := cfg.Broker.PauseNackTimeout(ev.ID, token); err != nil {
		return nil, fmt.Errorf("eval is no longer ours: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	stopWatch := w.watchSlowCall(ctx, ev, log)
	resp, err := sched.Schedule(cctx, req)
	stopWatch()
	cfg.Metrics.SchedulerCall(schedulerPluginName(sched), ev.Type, time.Since(start), err != nil)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	if rerr := cfg.Broker.ResumeNackTimeout(ev.ID, token); rerr != nil && err == nil {
		return nil, fmt.Errorf("eval is no longer ours: %w", rerr)
	}
	if errors.Is(err, structs.ErrUnavailable) && ctx.Err() == nil {
		if moved := w.rerouted(ev, sched, err); moved != nil {
			return nil, moved
		}
	}
	if errors.Is(err, structs.ErrUnavailable) && p.gate.setDegraded(ev.Type, true) {
		// The call waited for a plugin that did not come back (or died
		// under it): as with a timeout, one worker probes it.
		log.Warn("scheduler plugin unavailable during the call; one worker at a time serves the job type until a call succeeds", "error", err)
	}
	switch {
	case timedOut:
		if p.gate.setDegraded(ev.Type, true) {
			log.Warn("scheduler plugin call timed out; one worker at a time serves the job type until a call returns in time",
				"timeout", timeout)
		}
		return nil, structs.NewError(structs.ErrUnavailable, "scheduler plugin call for job type %q timed out after %s", ev.Type, timeout)
	case err != nil:
		return nil, fmt.Errorf("scheduler plugin: %w", err)
	case resp == nil:
		return nil, fmt.Errorf("scheduler plugin for job type %q returned no response", ev.Type)
	}
	if p.gate.setDegraded(ev.Type, false) {
		log.Info("scheduler plugin answers in time again; all workers serve the job type")
	}
	return resp, nil
}

// maxSpareWorkers bounds the spares standing in for workers held by slow
// plugin calls. A degraded type holds at most one call at a time, so the
// calls held are at most the workers plus the types; the bound only guards
// against a bug.
const maxSpareWorkers = 32

// watchSlowCall watches the plugin call the worker is about to make: once
// it has run Config.SlowCall (a hung or stopped plugin, long before the
// call's own timeout), the eval's type is degraded (no other worker takes
// an eval of it) and a spare worker takes this one's place until the call
// returns, so one type's plugin never holds up the evals of other types.
// The returned func ends the watch; it returns once the watch is over, so
// the spare is started only while this worker is still running.
//
// ctx is the worker's run context, which the spare runs under.
func (w *worker) watchSlowCall(ctx context.Context, ev *structs.Evaluation, log hclog.Logger) (stop func()) {
	p, cfg := w.p, &w.p.cfg
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTimer(cfg.SlowCall)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.gate.setDegraded(ev.Type, true) {
			log.Warn("scheduler plugin call unanswered; one worker at a time serves the job type until a call returns in time",
				"after", cfg.SlowCall)
		}
		if p.spares.Add(1) > maxSpareWorkers {
			p.spares.Add(-1)
			log.Warn("no spare worker left to stand in for a worker held by a slow plugin call", "spares", maxSpareWorkers)
			return
		}
		log.Info("a spare worker stands in while the plugin call is unanswered")
		spare := p.newWorker(-1)
		spare.types = w.types
		p.wg.Add(1) // this worker still runs, so the count is not zero
		go func() {
			defer p.wg.Done()
			defer p.spares.Add(-1)
			spare.run(ctx, done)
		}()
	}()
	return func() {
		close(done)
		<-watched
	}
}

// retryLater is what schedule returns when the eval could not be tried at
// all; the worker requeues it without counting a delivery.
type retryLater struct{ err error }

func (r *retryLater) Error() string { return r.err.Error() }
func (r *retryLater) Unwrap() error { return r.err }

// unavailableRetryDelay is how long an eval waits after its plugin was
// found down: the broker's first nack delay, but never a busy loop.
func (w *worker) unavailableRetryDelay() time.Duration {
	d := w.p.cfg.InitialNackDelay
	switch {
	case d == 0:
		return evalbroker.DefaultInitialNackDelay
	case d < 10*time.Millisecond:
		return 10 * time.Millisecond
	}
	return d
}

// finishScheduled records a successful eval with its blocked evals. When
// the allocation limits held placements back, an eval stopped by the
// per-eval limit gets a follow-up eval that places the next batch, and one
// stopped by the per-job limit says so: its job asks for more than the
// server allows, and the rest stays queued.
func (w *worker) finishScheduled(ev *structs.Evaluation, resp *pb.ScheduleResponse, queued map[string]int, ann *structs.PlanAnnotations, snapIndex uint64, limited placementCap) error {
	left := 0
	for _, n := range queued {
		left += n
	}
	if left == 0 || limited.placed < limited.limit && limited.dropped == 0 {
		return w.finish(ev, structs.EvalStatusComplete, "", resp, queued, ann, snapIndex)
	}
	if limited.byJob {
		desc := fmt.Sprintf("placed up to the server limit max_allocs_per_job = %d; %d allocations left queued",
			w.p.cfg.MaxAllocsPerJob, left)
		return w.finish(ev, structs.EvalStatusComplete, desc, resp, queued, ann, snapIndex)
	}
	return w.finishWithFollowUp(ev, resp, queued, ann, snapIndex, fmt.Sprintf(
		"created to place allocations beyond the server limit max_allocs_per_eval = %d", w.p.cfg.MaxAllocsPerEval))
}

// finish records the eval's outcome and its blocked evals. snapIndex is the
// index of the snapshot the last attempt scheduled from: a blocked eval
// carries it so that the blocked-eval tracker releases it at once only for
// an unblock that came after that snapshot. Without it, any node that ever
// changed would count as a missed unblock, and the eval would loop.
func (w *worker) finish(ev *structs.Evaluation, status, desc string, resp *pb.ScheduleResponse, queued map[string]int, ann *structs.PlanAnnotations, snapIndex uint64) error {
	return w.finishEvals(ev, status, desc, resp, queued, ann, snapIndex, "")
}

// finishWithFollowUp completes the eval and, in the same Raft entry,
// creates a pending eval of its job that continues where it stopped.
func (w *worker) finishWithFollowUp(ev *structs.Evaluation, resp *pb.ScheduleResponse, queued map[string]int, ann *structs.PlanAnnotations, snapIndex uint64, followUpDesc string) error {
	return w.finishEvals(ev, structs.EvalStatusComplete, "", resp, queued, ann, snapIndex, followUpDesc)
}

func (w *worker) finishEvals(ev *structs.Evaluation, status, desc string, resp *pb.ScheduleResponse, queued map[string]int, ann *structs.PlanAnnotations, snapIndex uint64, followUpDesc string) error {
	cfg := &w.p.cfg
	up := ev.Copy()
	up.Status, up.StatusDescription = status, desc
	up.QueuedAllocations = queued
	if ev.AnnotatePlan {
		up.PlanAnnotations = ann
	}
	evals := []*structs.Evaluation{up}
	if resp != nil {
		up.FailedTGAllocs = schedio.MetricsFromPB(resp.FailedTgAllocs)
		if err := schedio.ExplainFailures(cfg.State(), ev.Namespace, ev.JobID, nil, up.FailedTGAllocs); err != nil {
			cfg.Logger.Warn("reading nodes to explain placement failures", "job_id", ev.JobID, "namespace", ev.Namespace, "error", err)
		}
		for _, b := range resp.BlockedEvals {
			be := &structs.Evaluation{
				ID: uuid.NewString(), Namespace: ev.Namespace, Priority: ev.Priority, Type: ev.Type,
				TriggeredBy: structs.EvalTriggerQueuedAllocs, JobID: ev.JobID, JobModifyIndex: ev.JobModifyIndex,
				NodeID: b.NodeId, Status: structs.EvalStatusBlocked, PreviousEval: ev.ID,
				StatusDescription: "created to place remaining allocations", FailedTGAllocs: up.FailedTGAllocs,
				ClassEligibility: b.ClassEligibility, EscapedComputedClass: b.EscapedComputedClass,
				QueuedAllocations: queued, CreateTime: cfg.Now().UnixNano(), ModifyTime: cfg.Now().UnixNano(),
				SnapshotIndex: snapIndex,
			}
			if up.BlockedEval == "" {
				up.BlockedEval = be.ID
			}
			evals = append(evals, be)
		}
	}
	if followUpDesc != "" {
		now := cfg.Now().UnixNano()
		next := &structs.Evaluation{
			ID: uuid.NewString(), Namespace: ev.Namespace, Priority: ev.Priority, Type: ev.Type,
			TriggeredBy: structs.EvalTriggerQueuedAllocs, JobID: ev.JobID, JobModifyIndex: ev.JobModifyIndex,
			Status: structs.EvalStatusPending, PreviousEval: ev.ID, StatusDescription: followUpDesc,
			CreateTime: now, ModifyTime: now,
		}
		up.NextEval = next.ID
		evals = append(evals, next)
	}
	up.ModifyTime = cfg.Now().UnixNano()
	_, err := cfg.Apply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals})
	return err
}

// submitPlan hands the plan to the leader's plan applier and waits.
func (w *worker) submitPlan(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, error) {
	return w.p.cfg.SubmitPlan(ctx, plan)
}

// schedulerPluginName names the plugin behind a routed scheduler (the
// plugin host's handles say), "builtin" for in-process ones.
func schedulerPluginName(sched any) string {
	if n, ok := sched.(interface{ PluginName() string }); ok {
		return n.PluginName()
	}
	return "builtin"
}

package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// worker takes evals from the broker and runs them through the scheduler
// plugin that serves the eval's type.
type worker struct {
	s      *Server
	id     int
	logger hclog.Logger
}

func newWorker(s *Server, id int) *worker {
	return &worker{s: s, id: id, logger: s.logger.Named("worker").With("worker_id", id)}
}

func (w *worker) run(ctx context.Context) {
	backoff := time.NewTimer(0)
	defer backoff.Stop()
	for {
		if ctx.Err() != nil {
			return
		}
		served := map[string]bool{}
		for _, t := range w.s.cfg.Schedulers.ServedTypes() {
			served[t] = true
		}
		gate := w.s.gate
		ev, token, err := w.s.broker.DequeueFunc(ctx, func(t string) bool { return served[t] && gate.admits(t) })
		if err != nil {
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
			if rerr := w.s.broker.Requeue(ev.ID, token, 0); rerr != nil {
				w.logger.Debug("requeue failed", "eval_id", ev.ID, "error", rerr)
			}
			continue
		}
		w.process(ctx, ev, token)
		gate.leave(ev.Type)
	}
}

func (w *worker) process(ctx context.Context, ev *structs.Evaluation, token string) {
	start := time.Now()
	log := w.logger.With("eval_id", ev.ID, "job_id", ev.JobID, "type", ev.Type, "triggered_by", ev.TriggeredBy)
	err := w.schedule(ctx, ev, token, log)
	if err != nil {
		log.Warn("eval processing failed; nacking for redelivery", "error", err)
		if nerr := w.s.broker.Nack(ev.ID, token); nerr != nil {
			log.Debug("nack failed", "error", nerr)
		}
		return
	}
	if aerr := w.s.broker.Ack(ev.ID, token); aerr != nil {
		log.Debug("ack failed", "error", aerr)
	}
	log.Debug("eval processed", "duration", time.Since(start))
}

// schedule runs the attempt loop of one eval: build the request, call the
// plugin, submit the plan, retry on partial commits, then record the eval.
func (w *worker) schedule(ctx context.Context, ev *structs.Evaluation, token string, log hclog.Logger) error {
	s := w.s
	snap, err := s.snapshotMinIndex(ctx, ev.ModifyIndex)
	if err != nil {
		return err
	}
	sched, maxAttempts, err := s.cfg.Schedulers.Lookup(ev.Type)
	if err != nil {
		if errors.Is(err, structs.ErrUnavailable) {
			return err
		}
		return w.finish(ev, structs.EvalStatusFailed, fmt.Sprintf("no scheduler plugin serves job type %q", ev.Type), nil, nil, nil, 0)
	}
	if maxAttempts <= 0 {
		maxAttempts = 1
	}
	attempts := 0
	var queued map[string]int
	for try := 1; ; try++ {
		req, err := s.buildRequest(snap, ev, try)
		if err != nil {
			return err
		}
		resp, err := w.callScheduler(ctx, sched, ev, token, req, log)
		if err != nil {
			return err
		}
		if resp.Status != "" {
			return w.finish(ev, resp.Status, resp.StatusDescription, nil, nil, nil, 0)
		}
		queued = make(map[string]int, len(resp.QueuedAllocations))
		for tg, n := range resp.QueuedAllocations {
			queued[tg] = int(n)
		}
		plan, newAllocs := s.convertPlan(snap, ev, token, req.Job, resp.Plan)
		if plan.IsNoOp() && len(plan.NodePreemptions) == 0 {
			return w.finishScheduled(ev, resp, queued, plan.Annotations, snap.LatestIndex())
		}
		_ = s.broker.PauseNackTimeout(ev.ID, token)
		result, err := s.submitPlan(ctx, plan)
		_ = s.broker.ResumeNackTimeout(ev.ID, token)
		if err != nil {
			return fmt.Errorf("submit plan: %w", err)
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
			return w.finishScheduled(ev, resp, queued, plan.Annotations, snap.LatestIndex())
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
		if snap, err = s.snapshotMinIndex(ctx, refresh); err != nil {
			return err
		}
	}
}

// DefaultSchedulerCallTimeout bounds a scheduler plugin call when the
// config does not. A 10,000-node sysbatch eval takes well under a second.
const DefaultSchedulerCallTimeout = time.Minute

// callScheduler makes one plugin call, bounded by SchedulerCallTimeout so
// that a hung plugin (stopped, deadlocked) costs one attempt, not a worker.
// The broker's nack timer is paused meanwhile: the call has its own bound,
// and a slow but live plugin must not see its eval redelivered to a second
// worker while it still works on it.
func (w *worker) callScheduler(ctx context.Context, sched scheduler.Scheduler, ev *structs.Evaluation, token string,
	req *pb.ScheduleRequest, log hclog.Logger) (*pb.ScheduleResponse, error) {
	s := w.s
	timeout := s.cfg.SchedulerCallTimeout
	if err := s.broker.PauseNackTimeout(ev.ID, token); err != nil {
		return nil, fmt.Errorf("eval is no longer ours: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	resp, err := sched.Schedule(cctx, req)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded)
	cancel()
	if rerr := s.broker.ResumeNackTimeout(ev.ID, token); rerr != nil && err == nil {
		return nil, fmt.Errorf("eval is no longer ours: %w", rerr)
	}
	switch {
	case timedOut:
		if s.gate.setDegraded(ev.Type, true) {
			log.Warn("scheduler plugin call timed out; one worker at a time serves the job type until a call returns in time",
				"timeout", timeout)
		}
		return nil, structs.NewError(structs.ErrUnavailable, "scheduler plugin call for job type %q timed out after %s", ev.Type, timeout)
	case err != nil:
		return nil, fmt.Errorf("scheduler plugin: %w", err)
	case resp == nil:
		return nil, fmt.Errorf("scheduler plugin for job type %q returned no response", ev.Type)
	}
	if s.gate.setDegraded(ev.Type, false) {
		log.Info("scheduler plugin answers in time again; all workers serve the job type")
	}
	return resp, nil
}

// finishScheduled records a successful eval with its blocked evals.
func (w *worker) finishScheduled(ev *structs.Evaluation, resp *pb.ScheduleResponse, queued map[string]int, ann *structs.PlanAnnotations, snapIndex uint64) error {
	return w.finish(ev, structs.EvalStatusComplete, "", resp, queued, ann, snapIndex)
}

// finish records the eval's outcome and its blocked evals. snapIndex is the
// index of the snapshot the last attempt scheduled from: a blocked eval
// carries it so that the blocked-eval tracker releases it at once only for
// an unblock that came after that snapshot. Without it, any node that ever
// changed would count as a missed unblock, and the eval would loop.
func (w *worker) finish(ev *structs.Evaluation, status, desc string, resp *pb.ScheduleResponse, queued map[string]int, ann *structs.PlanAnnotations, snapIndex uint64) error {
	s := w.s
	up := ev.Copy()
	up.Status, up.StatusDescription = status, desc
	up.QueuedAllocations = queued
	if ev.AnnotatePlan {
		up.PlanAnnotations = ann
	}
	evals := []*structs.Evaluation{up}
	if resp != nil {
		up.FailedTGAllocs = metricsFromPB(resp.FailedTgAllocs)
		for _, b := range resp.BlockedEvals {
			be := &structs.Evaluation{
				ID: uuid.NewString(), Namespace: ev.Namespace, Priority: ev.Priority, Type: ev.Type,
				TriggeredBy: structs.EvalTriggerQueuedAllocs, JobID: ev.JobID, JobModifyIndex: ev.JobModifyIndex,
				NodeID: b.NodeId, Status: structs.EvalStatusBlocked, PreviousEval: ev.ID,
				StatusDescription: "created to place remaining allocations", FailedTGAllocs: up.FailedTGAllocs,
				ClassEligibility: b.ClassEligibility, EscapedComputedClass: b.EscapedComputedClass,
				QueuedAllocations: queued, CreateTime: s.cfg.Now().UnixNano(), ModifyTime: s.cfg.Now().UnixNano(),
				SnapshotIndex: snapIndex,
			}
			if up.BlockedEval == "" {
				up.BlockedEval = be.ID
			}
			evals = append(evals, be)
		}
	}
	up.ModifyTime = s.cfg.Now().UnixNano()
	_, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals})
	return err
}

// submitPlan hands the plan to the leader's plan applier and waits.
func (s *Server) submitPlan(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, error) {
	fut, err := s.planQueue.Enqueue(plan)
	if err != nil {
		return nil, err
	}
	return fut.Wait(ctx)
}

// convertPlan turns a plugin's plan into the core's plan. It returns the
// set of alloc IDs that are new (not in-place updates).
func (s *Server) convertPlan(snap *state.StateSnapshot, ev *structs.Evaluation, token string, pjob *pb.Job, p *pb.Plan) (*structs.Plan, map[string]bool) {
	job, _ := snap.JobByID(nil, ev.Namespace, ev.JobID)
	plan := &structs.Plan{
		EvalID: ev.ID, EvalToken: token, Priority: ev.Priority, Job: job,
		NodeUpdate: map[string][]*structs.Allocation{}, NodeAllocation: map[string][]*structs.Allocation{},
		NodePreemptions: map[string][]*structs.Allocation{}, SnapshotIndex: snap.LatestIndex(),
	}
	if job != nil {
		plan.AllAtOnce = job.AllAtOnce
	}
	newAllocs := map[string]bool{}
	if p == nil {
		return plan, newAllocs
	}
	now := s.cfg.Now().UnixNano()
	shared := metricFromPB(p.PlacementMetric)
	for _, st := range p.NodeUpdate {
		a, _ := snap.AllocByID(nil, st.AllocId)
		if a == nil {
			continue
		}
		stop := &structs.Allocation{
			ID: a.ID, Namespace: a.Namespace, EvalID: ev.ID, Name: a.Name, NodeID: a.NodeID, JobID: a.JobID,
			TaskGroup: a.TaskGroup, DesiredStatus: structs.AllocDesiredStatusStop,
			DesiredDescription: st.DesiredDescription, ClientStatus: st.ClientStatus, FollowupEvalID: st.FollowupEvalId,
			ModifyTime: now,
		}
		plan.NodeUpdate[a.NodeID] = append(plan.NodeUpdate[a.NodeID], stop)
	}
	for _, pa := range p.NodeAllocation {
		var a *structs.Allocation
		if pa.InPlace {
			old, _ := snap.AllocByID(nil, pa.Id)
			if old == nil {
				continue
			}
			a = old.Copy()
			a.Job = nil
			a.EvalID = ev.ID
			if len(pa.TaskResources) > 0 {
				a.AllocatedResources = allocatedFromPB(pa)
			}
		} else {
			a = &structs.Allocation{
				ID: pa.Id, Namespace: ev.Namespace, EvalID: ev.ID, Name: pa.Name, NodeID: pa.NodeId,
				NodeName: pa.NodeName, JobID: ev.JobID, TaskGroup: pa.TaskGroup,
				AllocatedResources: allocatedFromPB(pa), Metrics: shared,
				DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
				PreviousAllocation: pa.PreviousAllocation, PreemptedAllocations: pa.PreemptedAllocations,
				CreateTime: now,
			}
			if pa.Metrics != nil {
				a.Metrics = metricFromPB(pa.Metrics)
			}
			newAllocs[a.ID] = true
		}
		if pa.ClientStatus != "" {
			a.ClientStatus = pa.ClientStatus
		}
		a.ModifyTime = now
		plan.NodeAllocation[a.NodeID] = append(plan.NodeAllocation[a.NodeID], a)
	}
	for _, pr := range p.NodePreemptions {
		plan.NodePreemptions[pr.NodeId] = append(plan.NodePreemptions[pr.NodeId], &structs.Allocation{
			ID: pr.AllocId, JobID: pr.JobId, Namespace: pr.Namespace, NodeID: pr.NodeId,
			DesiredStatus: structs.AllocDesiredStatusEvict, PreemptedByAllocation: pr.PreemptedByAllocation,
			DesiredDescription: "Preempted by alloc ID " + pr.PreemptedByAllocation, ModifyTime: now,
		})
	}
	for k, v := range plan.NodeUpdate {
		if len(v) == 0 {
			delete(plan.NodeUpdate, k)
		}
	}
	if len(p.DesiredTgUpdates) > 0 {
		plan.Annotations = &structs.PlanAnnotations{DesiredTGUpdates: map[string]*structs.DesiredUpdates{}}
		for tg, d := range p.DesiredTgUpdates {
			plan.Annotations.DesiredTGUpdates[tg] = &structs.DesiredUpdates{
				Ignore: d.Ignore, Place: d.Place, Migrate: d.Migrate, Stop: d.Stop, InPlaceUpdate: d.InPlaceUpdate,
				DestructiveUpdate: d.DestructiveUpdate, Canary: d.Canary, Preemptions: d.Preemptions,
				Disconnect: d.Disconnect, Reconnect: d.Reconnect, RescheduleNow: d.RescheduleNow, RescheduleLater: d.RescheduleLater,
			}
		}
	}
	return plan, newAllocs
}

func allocatedFromPB(pa *pb.PlacedAlloc) *structs.AllocatedResources {
	ar := &structs.AllocatedResources{
		Tasks:  make(map[string]*structs.AllocatedTaskResources, len(pa.TaskResources)),
		Shared: structs.AllocatedSharedResources{DiskMB: pa.SharedDiskMb},
	}
	for name, r := range pa.TaskResources {
		ar.Tasks[name] = &structs.AllocatedTaskResources{
			Cpu:    structs.AllocatedCpuResources{CpuShares: r.Cpu},
			Memory: structs.AllocatedMemoryResources{MemoryMB: r.MemoryMb, MemoryMaxMB: r.MemoryMaxMb},
		}
	}
	return ar
}

func metricsFromPB(m map[string]*pb.AllocMetric) map[string]*structs.AllocMetric {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*structs.AllocMetric, len(m))
	for k, v := range m {
		out[k] = metricFromPB(v)
	}
	return out
}

func intMap(m map[string]int32) map[string]int {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

func metricFromPB(m *pb.AllocMetric) *structs.AllocMetric {
	if m == nil {
		return nil
	}
	return &structs.AllocMetric{
		NodesEvaluated: int(m.NodesEvaluated), NodesFiltered: int(m.NodesFiltered), NodesInPool: int(m.NodesInPool),
		NodePool: m.NodePool, NodesAvailable: intMap(m.NodesAvailable), ClassFiltered: intMap(m.ClassFiltered),
		ConstraintFiltered: intMap(m.ConstraintFiltered), NodesExhausted: int(m.NodesExhausted),
		ClassExhausted: intMap(m.ClassExhausted), DimensionExhausted: intMap(m.DimensionExhausted),
		CoalescedFailures: int(m.CoalescedFailures), AllocationTime: time.Duration(m.AllocationTimeNs),
		Scores: m.Scores,
	}
}

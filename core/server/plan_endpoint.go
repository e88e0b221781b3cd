package server

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Plan runs the job's scheduler against current state without writing
// anything and reports what it would do.
func (ep Jobs) Plan(ctx context.Context, in *structs.Job, diff bool) (*structs.JobPlanResponse, error) {
	s := ep.srv
	if r, ok, err := forward[JobPlanArgs, structs.JobPlanResponse](ctx, s, "Job.Plan", &JobPlanArgs{Job: in, Diff: diff}); ok {
		return r, err
	}
	if in == nil {
		return nil, structs.NewError(structs.ErrInvalid, "Job: missing job")
	}
	job, err := ep.prepare(in)
	if err != nil {
		return nil, err
	}
	if err := ep.checkDrivers(job); err != nil {
		return nil, err
	}
	if err := ep.checkAllocLimit(job); err != nil {
		return nil, err
	}
	snap, err := s.State().Snapshot()
	if err != nil {
		return nil, err
	}
	existing, err := snap.JobByID(nil, job.Namespace, job.ID)
	if err != nil {
		return nil, err
	}
	resp := &structs.JobPlanResponse{Index: snap.LatestIndex()}
	changed := existing == nil || existing.SpecChanged(job)
	if existing != nil {
		resp.JobModifyIndex = existing.JobModifyIndex
		job.CreateIndex, job.JobModifyIndex, job.Version = existing.CreateIndex, existing.JobModifyIndex, existing.Version
		if changed {
			// A changed spec is a new version: give it an index no alloc
			// runs, so the scheduler sees the change.
			job.JobModifyIndex = snap.LatestIndex() + 1
			job.Version++
		}
	} else {
		job.JobModifyIndex = snap.LatestIndex() + 1
	}
	if diff {
		// Diff against the stored version: the plan's job carries that
		// version's bookkeeping, which the diff skips anyway.
		resp.Diff = structs.DiffJobs(existing, job, true)
	}
	if job.IsPeriodic() {
		if n, err := job.Periodic.Next(s.cfg.Now()); err == nil && !n.IsZero() {
			resp.NextPeriodicLaunch = n.UTC()
		}
	}
	if job.IsParent() {
		return resp, nil
	}
	sched, _, err := s.cfg.Schedulers.Lookup(job.Type)
	if err != nil {
		return nil, err
	}
	ev := &structs.Evaluation{
		ID: uuid.NewString(), Namespace: job.Namespace, Priority: job.Priority, Type: job.Type,
		TriggeredBy: structs.EvalTriggerJobRegister, JobID: job.ID, JobModifyIndex: job.JobModifyIndex,
		Status: structs.EvalStatusPending, AnnotatePlan: true,
	}
	req, err := schedio.BuildRequest(snap, s.nodeCache, ev, job, 1, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	out, err := sched.Schedule(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("scheduler plugin: %w", err)
	}
	if out.Status != "" && out.Status != structs.EvalStatusComplete {
		resp.Warnings = out.StatusDescription
	}
	plan, _, err := schedio.ConvertPlan(snap, ev, "", job, out.Plan, s.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("scheduler plugin: %v", err) // the plugin's fault, not the caller's
	}
	resp.Annotations = plan.Annotations
	if resp.Diff != nil && plan.Annotations != nil {
		resp.Diff.Annotate(plan.Annotations.DesiredTGUpdates)
	}
	resp.FailedTGAllocs = schedio.MetricsFromPB(out.FailedTgAllocs)
	if err := schedio.ExplainFailures(s.State(), job.Namespace, job.ID, job, resp.FailedTGAllocs); err != nil {
		s.logger.Warn("reading nodes to explain placement failures", "job_id", job.ID, "namespace", job.Namespace, "error", err)
	}
	resp.CreatedEvals = plannedEvals(ev, out, resp.FailedTGAllocs, s.cfg.Now())
	return resp, nil
}

// plannedEvals are the evals a register of the planned job would create
// besides its own (Nomad's CreatedEvals): a blocked eval for each of the
// scheduler's blocked placements and its follow-up evals. Nothing is
// written: they are what the plan would do, with IDs of their own.
func plannedEvals(ev *structs.Evaluation, out *pb.ScheduleResponse, failed map[string]*structs.AllocMetric, now time.Time) []*structs.Evaluation {
	var evals []*structs.Evaluation
	nowNs := now.UnixNano()
	for _, b := range out.GetBlockedEvals() {
		evals = append(evals, &structs.Evaluation{
			ID: uuid.NewString(), Namespace: ev.Namespace, Priority: ev.Priority, Type: ev.Type,
			TriggeredBy: structs.EvalTriggerQueuedAllocs, JobID: ev.JobID, JobModifyIndex: ev.JobModifyIndex,
			NodeID: b.GetNodeId(), Status: structs.EvalStatusBlocked, PreviousEval: ev.ID,
			StatusDescription: "created to place remaining allocations", FailedTGAllocs: failed,
			ClassEligibility: b.GetClassEligibility(), EscapedComputedClass: b.GetEscapedComputedClass(),
			CreateTime: nowNs, ModifyTime: nowNs,
		})
	}
	for _, f := range out.GetFollowupEvals() {
		evals = append(evals, &structs.Evaluation{
			ID: f.GetId(), Namespace: ev.Namespace, Priority: ev.Priority, Type: ev.Type,
			TriggeredBy: structs.EvalTriggerRetryFailedAlloc, JobID: ev.JobID, JobModifyIndex: ev.JobModifyIndex,
			Status: structs.EvalStatusPending, PreviousEval: ev.ID, WaitUntil: time.Unix(0, f.GetWaitUntilNs()).UTC(),
			StatusDescription: "created for delayed rescheduling", CreateTime: nowNs, ModifyTime: nowNs,
		})
	}
	return evals
}

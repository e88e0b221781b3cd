package server

import (
	"context"
	"encoding/json"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Scale sets one group's count (Nomad's Job.Scale): a new version of
// the job that differs only in that count, checked as a registration is
// (the type's max_group_count, the allocation limits), with a job-scaling
// eval and a scaling event, in one Raft entry. A request without a count
// records only its message or error as an event; a count outside the
// group's scaling block (min, max) is refused. Scaling a periodic or
// parameterized parent changes the count its next children get, with no
// eval. A job whose type places
// per node (JobTypeBehavior.PerNode) has no count to scale and is refused,
// as is a stopped job (Nomad would change the spec of a job that runs
// nothing; drover asks for a run or a revert first).
func (ep Jobs) Scale(ctx context.Context, ns, jobID string, req *structs.ScalingRequest) (*structs.JobRegisterResponse, error) {
	s := ep.srv
	if r, ok, err := forward[JobScaleArgs, structs.JobRegisterResponse](ctx, s, "Job.Scale", &JobScaleArgs{Namespace: ns, JobID: jobID, Request: req}); ok {
		return r, err
	}
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	if req == nil {
		return nil, structs.NewError(structs.ErrInvalid, "scale: missing request")
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	meta, err := jsonMeta(req.Meta)
	if err != nil {
		return nil, err
	}
	job, err := s.State().JobByID(nil, ns, jobID)
	if err != nil {
		return nil, err
	}
	if job == nil {
		return nil, structs.NewError(structs.ErrNotFound, "job %q not found in namespace %q", jobID, ns)
	}
	group := req.Target[structs.ScalingTargetGroup]
	tg := job.LookupTaskGroup(group)
	if tg == nil {
		return nil, structs.ScaleTargetError(jobID, group)
	}
	if req.JobModifyIndex != 0 && req.JobModifyIndex != job.JobModifyIndex {
		return nil, structs.NewError(structs.ErrConflict, "JobModifyIndex: job %q is at job modify index %d, not %d", jobID, job.JobModifyIndex, req.JobModifyIndex)
	}
	entry := &structs.JobScaleRequest{
		Namespace: ns, JobID: jobID, Group: group, JobModifyIndex: job.JobModifyIndex,
		Event: &structs.ScalingEvent{
			Count: req.Count, PreviousCount: int64(tg.Count),
			Message: req.Message, Error: req.Error, Meta: meta,
		},
	}
	resp := &structs.JobRegisterResponse{JobModifyIndex: job.JobModifyIndex}
	if req.Count != nil {
		if job.TypeBehavior != nil && job.TypeBehavior.PerNode {
			return nil, perNodeScaleError(job)
		}
		if job.Stop {
			return nil, structs.NewError(structs.ErrInvalid, "job %q is stopped: run it again or revert it to a version that runs before scaling it", jobID)
		}
		// A group's scaling block bounds every count it is scaled to.
		if err := tg.CheckScaleCount(*req.Count); err != nil {
			return nil, err
		}
		next, err := ep.scaledJob(job, group, *req.Count)
		if err != nil {
			return nil, err
		}
		if next != nil {
			entry.Job = next
		}
		// A periodic or parameterized parent places nothing itself: its
		// new count is for the children it launches next, and no eval
		// runs (as a registration of a parent makes none).
		if !job.IsParent() {
			entry.Eval = s.newEval(job, structs.EvalTriggerJobScaling)
			id := entry.Eval.ID
			entry.Event.EvalID = &id
		}
	}
	index, err := s.raftApply(structs.JobScaleRequestType, entry)
	if err != nil {
		return nil, err
	}
	resp.Index = index
	if entry.Job != nil {
		resp.JobModifyIndex = index
	}
	if entry.Eval != nil {
		resp.EvalID, resp.EvalCreateIndex = entry.Eval.ID, index
	}
	s.logger.Info("job scaled", "namespace", ns, "job_id", jobID, "group", group,
		"count", countField(req.Count), "previous_count", tg.Count, "changed", entry.Job != nil, "eval_id", resp.EvalID)
	return resp, nil
}

// scaledJob is the job with group's count set, prepared and checked as a
// registration (prepareJob, the allocation limit); nil when the count is
// already that (the eval runs, no new version is written).
func (ep Jobs) scaledJob(job *structs.Job, group string, count int64) (*structs.Job, error) {
	s := ep.srv
	if count > int64(maxInt) {
		return nil, structs.NewError(structs.ErrInvalid, "Count: %d is out of range", count)
	}
	next := job.Copy()
	next.LookupTaskGroup(group).Count = int(count)
	prepared, err := ep.prepare(next)
	if err != nil {
		return nil, err
	}
	if prepared.TypeBehavior != nil && prepared.TypeBehavior.PerNode {
		return nil, perNodeScaleError(job)
	}
	if err := ep.checkAllocLimit(prepared); err != nil {
		return nil, err
	}
	if !job.SpecChanged(prepared) {
		return nil, nil
	}
	prepared.SubmitTime = s.cfg.Now().UnixNano()
	return prepared, nil
}

func perNodeScaleError(job *structs.Job) error {
	return structs.NewError(structs.ErrInvalid, "job %q: %s jobs can't be scaled: the job type places each group on every eligible node (per_node), so a group's count is not a number of allocations", job.ID, job.Type)
}

const maxInt = int(^uint(0) >> 1)

func countField(c *int64) any {
	if c == nil {
		return "none"
	}
	return *c
}

// jsonMeta returns meta as JSON decodes it (numbers as float64): the Raft
// log (MessagePack) and the snapshots (JSON) then read back the same
// values, whichever path a server took.
func jsonMeta(meta map[string]any) (map[string]any, error) {
	if len(meta) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, structs.NewError(structs.ErrInvalid, "Meta: not encodable: %v", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, structs.NewError(structs.ErrInvalid, "Meta: not encodable: %v", err)
	}
	return out, nil
}

// Revert registers a kept version of a job again, as a new version
// (Nomad's Job.Revert), with a job-register eval. The version must be
// kept and not the current one; with enforcePrior, the current version
// must be that one. The reverted spec is prepared and checked as any
// registration, against the job's current JobModifyIndex, so a change that
// lands in between is a conflict rather than overwritten.
func (ep Jobs) Revert(ctx context.Context, ns, jobID string, version uint64, enforcePrior *uint64) (*structs.JobRegisterResponse, error) {
	s := ep.srv
	if r, ok, err := forward[JobRevertArgs, structs.JobRegisterResponse](ctx, s, "Job.Revert", &JobRevertArgs{Namespace: ns, JobID: jobID, Version: version, EnforcePriorVersion: enforcePrior}); ok {
		return r, err
	}
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	cur, err := s.State().JobByID(nil, ns, jobID)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, structs.NewError(structs.ErrNotFound, "job %q not found in namespace %q", jobID, ns)
	}
	if enforcePrior != nil && *enforcePrior != cur.Version {
		return nil, structs.NewError(structs.ErrInvalid, "EnforcePriorVersion: current job has version %d; enforcing version %d", cur.Version, *enforcePrior)
	}
	if version == cur.Version {
		return nil, structs.NewError(structs.ErrInvalid, "JobVersion: can't revert to the current version %d", version)
	}
	old, err := s.State().JobByIDAndVersion(nil, ns, jobID, version)
	if err != nil {
		return nil, err
	}
	if old == nil {
		return nil, structs.NewError(structs.ErrNotFound, "JobVersion: job %q has no version %d (the kept versions are the latest %d)", jobID, version, state.JobTrackedVersions)
	}
	rev := old.Copy()
	rev.Version, rev.CreateIndex, rev.ModifyIndex, rev.JobModifyIndex = 0, 0, 0, 0
	rev.Status, rev.StatusDescription, rev.Stable = "", "", false
	resp, err := ep.Register(ctx, rev, true, cur.JobModifyIndex)
	if err != nil {
		return nil, err
	}
	s.logger.Info("job reverted", "namespace", ns, "job_id", jobID, "from_version", cur.Version, "to_version", version, "eval_id", resp.EvalID)
	return resp, nil
}

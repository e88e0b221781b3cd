package fsm

import (
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Each applier writes its entry at the entry's Raft index and returns nil or
// the state store's error. A node change and the evals it causes are one
// state transaction. Other entries that write several things (a job and its
// eval) do it in several state transactions at the same index, in the order
// a reader expects to find them: the job first, then the eval that refers
// to it.

// at is the time an entry's writes are stamped with: the leader's stamp
// (structs.Stamped), or, for an entry written before stamps existed, the
// first of the entry's own times (unix nanoseconds) that is set. With none,
// the zero time: the writes keep the times the objects carry. Never the
// wall clock, which differs on every server and on every replay.
func at(now int64, fallbacks ...int64) time.Time {
	if now != 0 {
		return time.Unix(0, now).UTC()
	}
	for _, n := range fallbacks {
		if n != 0 {
			return time.Unix(0, n).UTC()
		}
	}
	return time.Time{}
}

// nodeStamp is at for node changes: an unstamped entry falls back to its
// node event's time, then to the status time it carries (unix seconds).
func nodeStamp(now int64, ev *structs.NodeEvent, updatedAt int64) time.Time {
	var evTime int64
	if ev != nil && !ev.Timestamp.IsZero() {
		evTime = ev.Timestamp.UnixNano()
	}
	return at(now, evTime, updatedAt*int64(time.Second))
}

func (f *FSM) applyNodeRegister(index uint64, buf []byte) any {
	req := decode[structs.NodeRegisterRequest](structs.NodeRegisterRequestType, index, buf)
	if req.Node == nil {
		return structs.NewError(structs.ErrInvalid, "node register: missing node")
	}
	st := f.State().At(at(req.Now, req.Node.StatusUpdatedAt*int64(time.Second)))
	if err := st.UpsertNode(index, req.Node, req.Evals...); err != nil {
		return err
	}
	f.nodeChanged(req.Node.ID, index)
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) applyNodeDeregister(index uint64, buf []byte) any {
	req := decode[structs.NodeDeregisterRequest](structs.NodeDeregisterRequestType, index, buf)
	// Deleting stores no time, so the entry carries none.
	return f.State().DeleteNode(index, req.NodeIDs)
}

func (f *FSM) applyNodeUpdateStatus(index uint64, buf []byte) any {
	req := decode[structs.NodeUpdateStatusRequest](structs.NodeUpdateStatusRequestType, index, buf)
	st := f.State().At(nodeStamp(req.Now, req.NodeEvent, req.UpdatedAt))
	if err := st.UpdateNodeStatus(index, req.NodeID, req.Status, req.UpdatedAt, req.NodeEvent, req.Evals...); err != nil {
		return err
	}
	f.nodeChanged(req.NodeID, index)
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) applyNodeUpdateDrain(index uint64, buf []byte) any {
	req := decode[structs.NodeUpdateDrainRequest](structs.NodeUpdateDrainRequestType, index, buf)
	st := f.State().At(nodeStamp(req.Now, req.NodeEvent, req.UpdatedAt))
	err := st.UpdateNodeDrainWithMeta(index, req.NodeID, req.DrainStrategy, req.MarkEligible, req.UpdatedAt, req.NodeEvent, req.Meta, req.Evals...)
	if err != nil {
		return err
	}
	f.nodeChanged(req.NodeID, index)
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) applyNodeUpdateEligibility(index uint64, buf []byte) any {
	req := decode[structs.NodeUpdateEligibilityRequest](structs.NodeUpdateEligibilityRequestType, index, buf)
	st := f.State().At(nodeStamp(req.Now, req.NodeEvent, req.UpdatedAt))
	if err := st.UpdateNodeEligibility(index, req.NodeID, req.Eligibility, req.UpdatedAt, req.NodeEvent, req.Evals...); err != nil {
		return err
	}
	f.nodeChanged(req.NodeID, index)
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) nodeChanged(id string, index uint64) {
	if node, err := f.State().NodeByID(nil, id); err == nil && node != nil {
		f.hooks.NodeChanged(node, index)
	}
}

// applyJobRegister writes the job (when the spec changed; nil otherwise)
// and its eval. A periodic parent gets a launch record on first
// registration so that the dispatcher knows where its schedule starts; a
// periodic child moves its parent's record to the child's launch time.
func (f *FSM) applyJobRegister(index uint64, buf []byte) any {
	req := decode[structs.JobRegisterRequest](structs.JobRegisterRequestType, index, buf)
	var submitted, evalTime int64
	if req.Job != nil {
		submitted = req.Job.SubmitTime
	}
	if req.Eval != nil {
		evalTime = req.Eval.ModifyTime
	}
	now := at(req.Now, submitted, evalTime)
	st := f.State().At(now)
	ns, id := req.Namespace, req.JobID
	if req.Job == nil && id == "" && req.Eval != nil {
		ns, id = req.Eval.Namespace, req.Eval.JobID
	}
	if job := req.Job; job != nil {
		job.Canonicalize()
		ns, id = job.Namespace, job.ID
		if dup, err := f.dispatchedBefore(job); err != nil {
			return err
		} else if dup != "" {
			f.logger.Debug("skipping dispatch already made with the same idempotency token",
				"job_id", job.ID, "existing", dup, "namespace", ns)
			return nil
		}
		if err := st.UpsertJob(index, job); err != nil {
			return err
		}
		if err := f.recordLaunch(st, index, job, now); err != nil {
			return err
		}
	}
	cur, err := st.JobByID(nil, ns, id)
	if err != nil {
		return err
	}
	if req.Job != nil && cur != nil {
		f.hooks.JobUpserted(cur)
	}
	if req.Eval != nil {
		if cur != nil {
			req.Eval.JobModifyIndex = cur.JobModifyIndex
		}
		return f.upsertEvals(st, index, []*structs.Evaluation{req.Eval})
	}
	return nil
}

// dispatchedBefore returns the ID of an existing child of the same parent
// that was dispatched with the job's idempotency token, or "". The endpoint
// checks this too; the FSM checks again because two dispatches with the
// same token may both pass the endpoint before either commits.
func (f *FSM) dispatchedBefore(job *structs.Job) (string, error) {
	if !job.Dispatched || job.DispatchIdempotencyToken == "" || job.ParentID == "" {
		return "", nil
	}
	children, err := f.State().JobsByParent(nil, job.Namespace, job.ParentID)
	if err != nil {
		return "", err
	}
	for _, c := range children {
		if c.ID != job.ID && c.DispatchIdempotencyToken == job.DispatchIdempotencyToken {
			return c.ID, nil
		}
	}
	return "", nil
}

// recordLaunch stamps a new periodic parent's launch record with the
// entry's time: the wall clock would differ on every server.
func (f *FSM) recordLaunch(st *state.StateStore, index uint64, job *structs.Job, now time.Time) error {
	switch {
	case job.IsPeriodic():
		prev, err := st.PeriodicLaunchByID(nil, job.Namespace, job.ID)
		if err != nil || prev != nil {
			return err
		}
		return st.UpsertPeriodicLaunch(index, &structs.PeriodicLaunch{ID: job.ID, Namespace: job.Namespace, Launch: now})
	case job.ParentID != "" && structs.IsPeriodicChild(job.ParentID, job.ID):
		suffix := strings.TrimPrefix(job.ID, job.ParentID+structs.PeriodicLaunchSuffix)
		sec, err := strconv.ParseInt(suffix, 10, 64)
		if err != nil {
			f.logger.Warn("periodic child ID without a launch time", "job_id", job.ID, "namespace", job.Namespace)
			return nil
		}
		launch := time.Unix(sec, 0).UTC()
		prev, err := st.PeriodicLaunchByID(nil, job.Namespace, job.ParentID)
		if err != nil {
			return err
		}
		if prev != nil && !launch.After(prev.Launch) {
			return nil
		}
		return st.UpsertPeriodicLaunch(index, &structs.PeriodicLaunch{ID: job.ParentID, Namespace: job.Namespace, Launch: launch})
	}
	return nil
}

// applyJobDeregister purges the job (deleting it with its versions, summary
// and launch record) or stops it (a new version with Stop set), then writes
// the eval. Purging a job that does not exist is not an error; stopping one
// is.
func (f *FSM) applyJobDeregister(index uint64, buf []byte) any {
	req := decode[structs.JobDeregisterRequest](structs.JobDeregisterRequestType, index, buf)
	var evalTime int64
	if req.Eval != nil {
		evalTime = req.Eval.ModifyTime
	}
	st := f.State().At(at(req.Now, evalTime))
	job, err := st.JobByID(nil, req.Namespace, req.JobID)
	if err != nil {
		return err
	}
	switch {
	case req.Purge && job != nil:
		if err := st.DeleteJob(index, req.Namespace, req.JobID); err != nil {
			return err
		}
		f.hooks.JobDeleted(req.Namespace, req.JobID)
	case req.Purge:
	case job == nil:
		return structs.NewError(structs.ErrNotFound, "job %q in namespace %q doesn't exist to be deregistered", req.JobID, req.Namespace)
	default:
		if !job.Stop {
			stopped := job.Copy()
			stopped.Stop = true
			if err := st.UpsertJob(index, stopped); err != nil {
				return err
			}
		}
		cur, err := st.JobByID(nil, req.Namespace, req.JobID)
		if err != nil {
			return err
		}
		f.hooks.JobUpserted(cur)
		if req.Eval != nil {
			req.Eval.JobModifyIndex = cur.JobModifyIndex
		}
	}
	if req.Eval != nil {
		return f.upsertEvals(st, index, []*structs.Evaluation{req.Eval})
	}
	return nil
}

// applyJobBatchDeregister purges many jobs (job GC); jobs already gone are
// skipped.
func (f *FSM) applyJobBatchDeregister(index uint64, buf []byte) any {
	req := decode[structs.JobBatchDeregisterRequest](structs.JobBatchDeregisterRequestType, index, buf)
	// Without a stamp the evals keep the times they carry.
	st := f.State().At(at(req.Now))
	for _, j := range req.Jobs {
		job, err := st.JobByID(nil, j.Namespace, j.ID)
		if err != nil {
			return err
		}
		if job == nil {
			continue
		}
		if err := st.DeleteJob(index, j.Namespace, j.ID); err != nil {
			return err
		}
		f.hooks.JobDeleted(j.Namespace, j.ID)
	}
	return f.upsertEvals(st, index, req.Evals)
}

func (f *FSM) applyEvalUpdate(index uint64, buf []byte) any {
	req := decode[structs.EvalUpdateRequest](structs.EvalUpdateRequestType, index, buf)
	st := f.State().At(at(req.Now))
	if len(req.Evals) == 0 {
		// Still a write at this index, so that LatestIndex moves.
		return st.UpsertEvals(index, nil)
	}
	return f.upsertEvals(st, index, req.Evals)
}

func (f *FSM) applyEvalDelete(index uint64, buf []byte) any {
	req := decode[structs.EvalDeleteRequest](structs.EvalDeleteRequestType, index, buf)
	return f.State().DeleteEval(index, req.Evals, req.Allocs)
}

// applyAllocClientUpdate records client alloc updates and the evals the
// server created for them, then reports the stored allocs so that capacity
// freed on a node unblocks evals waiting for it.
func (f *FSM) applyAllocClientUpdate(index uint64, buf []byte) any {
	req := decode[structs.AllocUpdateRequest](structs.AllocClientUpdateRequestType, index, buf)
	var allocTime int64
	for _, u := range req.Alloc {
		if u != nil && u.ModifyTime != 0 {
			allocTime = u.ModifyTime
			break
		}
	}
	st := f.State().At(at(req.Now, allocTime))
	if err := st.UpdateAllocsFromClient(index, req.Alloc); err != nil {
		return err
	}
	stored := make([]*structs.Allocation, 0, len(req.Alloc))
	for _, u := range req.Alloc {
		if u == nil {
			continue
		}
		a, err := st.AllocByID(nil, u.ID)
		if err != nil {
			return err
		}
		if a != nil {
			stored = append(stored, a)
		}
	}
	if len(stored) > 0 {
		f.hooks.AllocsClientUpdated(stored, index)
	}
	return f.upsertEvals(st, index, req.Evals)
}

func (f *FSM) applyPlanResults(index uint64, buf []byte) any {
	req := decode[structs.ApplyPlanResultsRequest](structs.ApplyPlanResultsRequestType, index, buf)
	if err := f.State().At(at(req.UpdatedAt)).UpsertPlanResults(index, req); err != nil {
		return err
	}
	if len(req.PreemptionEvals) > 0 {
		f.hooks.EvalsCommitted(req.PreemptionEvals)
	}
	return nil
}

func (f *FSM) applyAllocDesiredTransition(index uint64, buf []byte) any {
	req := decode[structs.AllocUpdateDesiredTransitionRequest](structs.AllocUpdateDesiredTransitionRequestType, index, buf)
	var evalTime int64
	if len(req.Evals) > 0 && req.Evals[0] != nil {
		evalTime = req.Evals[0].ModifyTime
	}
	if err := f.State().At(at(req.Now, evalTime)).UpdateAllocsDesiredTransitions(index, req.Allocs, req.Evals); err != nil {
		return err
	}
	if len(req.Evals) > 0 {
		f.hooks.EvalsCommitted(req.Evals)
	}
	return nil
}

func (f *FSM) applySchedulerConfig(index uint64, buf []byte) any {
	req := decode[structs.SchedulerSetConfigRequest](structs.SchedulerConfigRequestType, index, buf)
	return f.State().SchedulerSetConfig(index, &req.Config)
}

// upsertEvals writes evals through st (which carries the entry's time) and
// hands them to the hooks. The state store stamps the very objects it
// stores, so the hooks see their indexes.
func (f *FSM) upsertEvals(st *state.StateStore, index uint64, evals []*structs.Evaluation) any {
	if len(evals) == 0 {
		return nil
	}
	if err := st.UpsertEvals(index, evals); err != nil {
		return err
	}
	f.hooks.EvalsCommitted(evals)
	return nil
}

// evalsCommitted hands evals an entry wrote with other changes (a node
// change writes its evals in its own transaction) to the hooks.
func (f *FSM) evalsCommitted(evals []*structs.Evaluation) {
	if len(evals) > 0 {
		f.hooks.EvalsCommitted(evals)
	}
}

package fsm

import (
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// applyJobRegister writes the job (when the spec changed; nil otherwise),
// its launch record and its eval in one transaction. A periodic parent gets
// a launch record on first registration so that the dispatcher knows where
// its schedule starts; a periodic child moves its parent's record to the
// child's launch time. A job or eval in a namespace that does not exist
// is refused (structs.NamespaceMissingError) and nothing is written.
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
	ns, id := req.Namespace, req.JobID
	if req.Job == nil && id == "" && req.Eval != nil {
		ns, id = req.Eval.Namespace, req.Eval.JobID
	}
	if job := req.Job; job != nil {
		job.Canonicalize()
		ns, id = job.Namespace, job.ID
		// The FSM is the only writer, so this read outside the
		// transaction sees what the transaction would.
		if dup, err := f.dispatchedBefore(job); err != nil {
			return err
		} else if dup != "" {
			f.logger.Debug("skipping dispatch already made with the same idempotency token",
				"job_id", job.ID, "existing", dup, "namespace", ns)
			return nil
		}
	}
	err := f.State().At(now).WriteTxn(index, func(tx *state.Txn) error {
		// The endpoint checks the namespace too; the check here, in the
		// transaction, is the one a concurrent namespace delete cannot
		// slip past: either the delete saw no job, or this sees no
		// namespace and writes nothing.
		// Entries from before the check (RequireNamespace unset) replay
		// as they applied then.
		if ns == "" {
			ns = structs.DefaultNamespace
		}
		if req.RequireNamespace {
			if ok, err := tx.NamespaceExists(ns); err != nil {
				return err
			} else if !ok {
				return structs.NamespaceMissingError(id, ns)
			}
		}
		if job := req.Job; job != nil && req.RequireNodePool {
			if ok, err := tx.NodePoolExists(job.NodePool); err != nil {
				return err
			} else if !ok {
				return structs.NodePoolMissingError(id, job.NodePool)
			}
		}
		if job := req.Job; job != nil {
			if err := tx.UpsertJob(job); err != nil {
				return err
			}
			if err := f.recordLaunch(tx, job, now); err != nil {
				return err
			}
			if err := storeSubmission(tx, req.Submission, ns, id); err != nil {
				return err
			}
		}
		if req.Eval == nil {
			return nil
		}
		cur, err := tx.JobByID(ns, id)
		if err != nil {
			return err
		}
		if cur != nil {
			req.Eval.JobModifyIndex = cur.JobModifyIndex
		}
		return tx.UpsertEvals([]*structs.Evaluation{req.Eval})
	})
	if err != nil {
		return err
	}
	if req.Job != nil {
		f.jobUpserted(index, ns, id)
	}
	if req.Eval != nil {
		f.evalsCommitted([]*structs.Evaluation{req.Eval})
	}
	return nil
}

// jobUpserted hands the committed job to the hooks: its status is derived
// at commit, so it is read back rather than taken from the transaction.
func (f *FSM) jobUpserted(index uint64, ns, id string) {
	cur, err := f.State().JobByID(nil, ns, id)
	if err != nil {
		// The entry is applied; only the periodic dispatcher misses it.
		f.logger.Error("reading back a committed job", "index", index, "job_id", id, "namespace", ns, "error", err)
		return
	}
	if cur != nil {
		f.hooks.JobUpserted(cur)
	}
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
func (f *FSM) recordLaunch(tx *state.Txn, job *structs.Job, now time.Time) error {
	switch {
	case job.IsPeriodic():
		prev, err := tx.PeriodicLaunchByID(job.Namespace, job.ID)
		if err != nil || prev != nil {
			return err
		}
		return tx.UpsertPeriodicLaunch(&structs.PeriodicLaunch{ID: job.ID, Namespace: job.Namespace, Launch: now})
	case job.ParentID != "" && structs.IsPeriodicChild(job.ParentID, job.ID):
		suffix := strings.TrimPrefix(job.ID, job.ParentID+structs.PeriodicLaunchSuffix)
		sec, err := strconv.ParseInt(suffix, 10, 64)
		if err != nil {
			f.logger.Warn("periodic child ID without a launch time", "job_id", job.ID, "namespace", job.Namespace)
			return nil
		}
		launch := time.Unix(sec, 0).UTC()
		prev, err := tx.PeriodicLaunchByID(job.Namespace, job.ParentID)
		if err != nil {
			return err
		}
		if prev != nil && !launch.After(prev.Launch) {
			return nil
		}
		return tx.UpsertPeriodicLaunch(&structs.PeriodicLaunch{ID: job.ParentID, Namespace: job.Namespace, Launch: launch})
	}
	return nil
}

// applyJobDeregister purges the job (deleting it with its versions, summary
// and launch record) or stops it (a new version with Stop set), and writes
// the eval, in one transaction. Purging a job that does not exist is not an
// error; stopping one is.
func (f *FSM) applyJobDeregister(index uint64, buf []byte) any {
	req := decode[structs.JobDeregisterRequest](structs.JobDeregisterRequestType, index, buf)
	var evalTime int64
	if req.Eval != nil {
		evalTime = req.Eval.ModifyTime
	}
	var deleted, stopped bool
	err := f.State().At(at(req.Now, evalTime)).WriteTxn(index, func(tx *state.Txn) error {
		job, err := tx.JobByID(req.Namespace, req.JobID)
		if err != nil {
			return err
		}
		switch {
		case req.Purge && job != nil:
			if err := tx.DeleteJob(req.Namespace, req.JobID); err != nil {
				return err
			}
			if err := tx.DeleteJobSubmissions(req.Namespace, req.JobID); err != nil {
				return err
			}
			deleted = true
		case req.Purge:
		case job == nil:
			return structs.NewError(structs.ErrNotFound, "job %q in namespace %q doesn't exist to be deregistered", req.JobID, req.Namespace)
		default:
			if !job.Stop {
				c := job.Copy()
				c.Stop = true
				if err := tx.UpsertJob(c); err != nil {
					return err
				}
			}
			cur, err := tx.JobByID(req.Namespace, req.JobID)
			if err != nil {
				return err
			}
			if req.Eval != nil {
				req.Eval.JobModifyIndex = cur.JobModifyIndex
			}
			stopped = true
		}
		if req.Eval != nil {
			return tx.UpsertEvals([]*structs.Evaluation{req.Eval})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if deleted {
		f.hooks.JobDeleted(req.Namespace, req.JobID)
	}
	if stopped {
		f.jobUpserted(index, req.Namespace, req.JobID)
	}
	if req.Eval != nil {
		f.evalsCommitted([]*structs.Evaluation{req.Eval})
	}
	return nil
}

// applyJobBatchDeregister purges many jobs (job GC) and writes their evals
// in one transaction; jobs already gone are skipped.
func (f *FSM) applyJobBatchDeregister(index uint64, buf []byte) any {
	req := decode[structs.JobBatchDeregisterRequest](structs.JobBatchDeregisterRequestType, index, buf)
	var deleted []structs.NamespacedID
	// Without a stamp the evals keep the times they carry.
	err := f.State().At(at(req.Now)).WriteTxn(index, func(tx *state.Txn) error {
		for _, j := range req.Jobs {
			job, err := tx.JobByID(j.Namespace, j.ID)
			if err != nil {
				return err
			}
			if job == nil {
				continue
			}
			if err := tx.DeleteJob(j.Namespace, j.ID); err != nil {
				return err
			}
			if err := tx.DeleteJobSubmissions(j.Namespace, j.ID); err != nil {
				return err
			}
			deleted = append(deleted, j)
		}
		if len(req.Evals) == 0 {
			return nil
		}
		return tx.UpsertEvals(req.Evals)
	})
	if err != nil {
		return err
	}
	for _, j := range deleted {
		f.hooks.JobDeleted(j.Namespace, j.ID)
	}
	f.evalsCommitted(req.Evals)
	return nil
}

// applyAllocClientUpdate records client alloc updates and the evals the
// server created for them in one transaction, then reports the stored
// allocs so that capacity freed on a node unblocks evals waiting for it.
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
	err := st.WriteTxn(index, func(tx *state.Txn) error {
		if err := tx.UpdateAllocsFromClient(req.Alloc); err != nil {
			return err
		}
		if len(req.Evals) == 0 {
			return nil
		}
		return tx.UpsertEvals(req.Evals)
	})
	if err != nil {
		return err
	}
	stored := make([]*structs.Allocation, 0, len(req.Alloc))
	for _, u := range req.Alloc {
		if u == nil {
			continue
		}
		a, err := st.AllocByID(nil, u.ID)
		if err != nil {
			// Applied; only the unblocking of evals on this capacity
			// waits for the next change of the node.
			f.logger.Error("reading back a committed alloc", "index", index, "alloc_id", u.ID, "error", err)
			continue
		}
		if a != nil {
			stored = append(stored, a)
		}
	}
	if len(stored) > 0 {
		f.hooks.AllocsClientUpdated(stored, index)
	}
	f.evalsCommitted(req.Evals)
	return nil
}

// applyJobScale writes a scaling action: the job's new version (when the
// count changed), its eval and the scaling event, in one transaction, and
// only while the job is the version the leader scaled. A job purged or
// changed since is refused (ErrNotFound, ErrConflict) and nothing is
// written: a scale never resurrects a job nor overwrites a newer version.
func (f *FSM) applyJobScale(index uint64, buf []byte) any {
	req := decode[structs.JobScaleRequest](structs.JobScaleRequestType, index, buf)
	var evalTime int64
	if req.Eval != nil {
		evalTime = req.Eval.ModifyTime
	}
	ns := req.Namespace
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	if req.Job != nil {
		req.Job.Canonicalize()
		if req.Job.Namespace != ns || req.Job.ID != req.JobID {
			return structs.NewError(structs.ErrInvalid, "job scale: job %q in namespace %q is not the scaled job %q in %q", req.Job.ID, req.Job.Namespace, req.JobID, ns)
		}
	}
	err := f.State().At(at(req.Now, evalTime)).WriteTxn(index, func(tx *state.Txn) error {
		cur, err := tx.JobByID(ns, req.JobID)
		if err != nil {
			return err
		}
		if cur == nil {
			return structs.NewError(structs.ErrNotFound, "job %q in namespace %q not found", req.JobID, ns)
		}
		if cur.JobModifyIndex != req.JobModifyIndex {
			return structs.NewError(structs.ErrConflict, "job %q changed while it was being scaled (job modify index %d, scaled %d); try again", req.JobID, cur.JobModifyIndex, req.JobModifyIndex)
		}
		if req.Job != nil {
			if err := tx.UpsertJob(req.Job); err != nil {
				return err
			}
			if cur, err = tx.JobByID(ns, req.JobID); err != nil {
				return err
			}
		}
		if req.Eval != nil {
			req.Eval.JobModifyIndex = cur.JobModifyIndex
			if err := tx.UpsertEvals([]*structs.Evaluation{req.Eval}); err != nil {
				return err
			}
		}
		if req.Event == nil {
			return nil
		}
		return tx.AddScalingEvent(ns, req.JobID, req.Group, req.Event)
	})
	if err != nil {
		return err
	}
	if req.Job != nil {
		f.jobUpserted(index, ns, req.JobID)
	}
	if req.Eval != nil {
		f.evalsCommitted([]*structs.Evaluation{req.Eval})
	}
	return nil
}

// storeSubmission keeps a register's source with the version it wrote.
func storeSubmission(tx *state.Txn, sub *structs.JobSubmission, ns, id string) error {
	if sub == nil {
		return nil
	}
	cur, err := tx.JobByID(ns, id)
	if err != nil || cur == nil {
		return err
	}
	c := sub.Copy()
	c.Namespace, c.JobID, c.Version, c.JobModifyIndex = ns, id, cur.Version, cur.JobModifyIndex
	return tx.UpsertJobSubmission(c)
}

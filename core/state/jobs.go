package state

import (
	"github.com/drover-org/drover/core/structs"
)

// JobTrackedVersions is how many versions of a job job_versions keeps; older
// ones are dropped as new ones are written.
const JobTrackedVersions = 6

// UpsertJob writes a job at index. A new job starts at Version 0 with
// CreateIndex = index; an existing one keeps its CreateIndex and gets the
// next Version. ModifyIndex and JobModifyIndex become index, SubmitTime is
// stamped when zero and Status is derived (§2.10). The version is kept in
// job_versions and the job's summary gains any new group.
func (s *StateStore) UpsertJob(index uint64, job *structs.Job) error {
	return s.write(index, func(t *writeTxn) error { return t.upsertJob(job) })
}

// DeleteJob removes a job, its versions, its summary, its scaling events
// and its periodic launch. It fails with structs.ErrNotFound when the job does not exist.
func (s *StateStore) DeleteJob(index uint64, ns, id string) error {
	return s.write(index, func(t *writeTxn) error { return t.deleteJob(ns, id) })
}

func (t *writeTxn) upsertJob(job *structs.Job) error {
	if job == nil || job.ID == "" {
		return structs.NewError(structs.ErrInvalid, "job: missing job ID")
	}
	existing, err := t.job(job.Namespace, job.ID)
	if err != nil {
		return err
	}
	if existing != nil {
		job.CreateIndex = existing.CreateIndex
		job.Version = existing.Version + 1
		// The status is derived again at the end of the write; starting
		// from the stored one keeps the parent's children counts right.
		job.Status = existing.Status
	} else {
		job.CreateIndex = t.index
		job.Version = 0
		job.Status = ""
	}
	job.ModifyIndex = t.index
	job.JobModifyIndex = t.index
	if job.SubmitTime == 0 {
		job.SubmitTime = t.nanos()
	}
	if err := t.insert(TableJobs, job); err != nil {
		return err
	}
	if err := t.upsertJobVersion(job); err != nil {
		return err
	}

	sum, err := t.summary(job.Namespace, job.ID)
	if err != nil {
		return err
	}
	if sum == nil || sum.CreateIndex != job.CreateIndex {
		// A new job, or a new job under a purged one's ID: counts restart.
		sum = &structs.JobSummary{
			JobID:       job.ID,
			Namespace:   job.Namespace,
			Summary:     map[string]structs.TaskGroupSummary{},
			CreateIndex: job.CreateIndex,
		}
		t.setSummary(sum)
	}
	for _, tg := range job.TaskGroups {
		if _, ok := sum.Summary[tg.Name]; !ok {
			sum.Summary[tg.Name] = structs.TaskGroupSummary{}
		}
	}
	if job.IsParent() && sum.Children == nil {
		sum.Children = &structs.JobChildrenSummary{}
	}
	t.touchJob(job.Namespace, job.ID, false)
	return nil
}

// upsertJobVersion stores job as its version and drops the versions beyond
// JobTrackedVersions, oldest first.
func (t *writeTxn) upsertJobVersion(job *structs.Job) error {
	if err := t.insert(TableJobVersions, job); err != nil {
		return err
	}
	iter, err := t.txn.Get(TableJobVersions, "job", job.Namespace, job.ID)
	if err != nil {
		return err
	}
	var all []*structs.Job // ascending by Version: the index orders by primary key
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		all = append(all, raw.(*structs.Job))
	}
	for i := 0; i < len(all)-JobTrackedVersions; i++ {
		if err := t.delete(TableJobVersions, all[i]); err != nil {
			return err
		}
	}
	return nil
}

func (t *writeTxn) deleteJob(ns, id string) error {
	job, err := t.job(ns, id)
	if err != nil {
		return err
	}
	if job == nil {
		return structs.NewError(structs.ErrNotFound, "job %q in namespace %q not found", id, ns)
	}
	if err := t.delete(TableJobs, job); err != nil {
		return err
	}
	if _, err := t.txn.DeleteAll(TableJobVersions, "job", ns, id); err != nil {
		return err
	}
	t.tables[TableJobVersions] = struct{}{}
	if err := t.deleteSummary(ns, id); err != nil {
		return err
	}
	t.tables[TableJobSummary] = struct{}{}
	if err := t.deleteScalingEvents(ns, id); err != nil {
		return err
	}
	launch, err := t.first(TablePeriodicLaunch, "id", ns, id)
	if err != nil {
		return err
	}
	if launch != nil {
		if err := t.delete(TablePeriodicLaunch, launch); err != nil {
			return err
		}
	}
	if job.ParentID != "" {
		if err := t.childStatusChanged(ns, job.ParentID, job.Status, ""); err != nil {
			return err
		}
	}
	delete(t.touched, nsKey{ns, id})
	return nil
}

// settleJobStatus derives the job's status again and stores the job when it
// changed, so that the job turns dead in the same write that makes its last
// allocation terminal (§11).
func (t *writeTxn) settleJobStatus(k nsKey, deleted bool) error {
	job, err := t.job(k.ns, k.id)
	if err != nil || job == nil {
		return err
	}
	if t.reapedOnly[k] && job.Status == structs.JobStatusDead {
		// A dead job had no live alloc and no pending eval before this
		// write, which only took terminal ones away: deriveJobStatus
		// would say dead again (deleted is set), after reading every
		// one left.
		return nil
	}
	status, err := t.deriveJobStatus(job, deleted)
	if err != nil {
		return err
	}
	if status == job.Status {
		return nil
	}
	c := *job
	c.Status = status
	c.ModifyIndex = t.index
	if err := t.insert(TableJobs, &c); err != nil {
		return err
	}
	// Keep the current version's record the same object as the job.
	if err := t.insert(TableJobVersions, &c); err != nil {
		return err
	}
	if job.ParentID != "" {
		return t.childStatusChanged(k.ns, job.ParentID, job.Status, status)
	}
	return nil
}

// deriveJobStatus implements §2.10. Jobs whose type declares
// RunningUntilStopped (system) and periodic or parameterized parents run
// until stopped. Other jobs are running while any
// allocation is live, pending while any evaluation is, and dead once they
// had either (or had one reaped) or were stopped; a brand-new job is
// pending.
func (t *writeTxn) deriveJobStatus(job *structs.Job, deleted bool) (string, error) {
	if (job.TypeBehavior != nil && job.TypeBehavior.RunningUntilStopped) || job.IsParent() {
		if job.Stop {
			return structs.JobStatusDead, nil
		}
		return structs.JobStatusRunning, nil
	}
	allocs, err := t.txn.Get(TableAllocs, "job", job.Namespace, job.ID)
	if err != nil {
		return "", err
	}
	hasAlloc := false
	for raw := allocs.Next(); raw != nil; raw = allocs.Next() {
		hasAlloc = true
		if !raw.(*structs.Allocation).TerminalStatus() {
			return structs.JobStatusRunning, nil
		}
	}
	evals, err := t.txn.Get(TableEvals, "job", job.Namespace, job.ID)
	if err != nil {
		return "", err
	}
	hasEval := false
	for raw := evals.Next(); raw != nil; raw = evals.Next() {
		hasEval = true
		if !raw.(*structs.Evaluation).TerminalStatus() {
			return structs.JobStatusPending, nil
		}
	}
	if job.Stop || hasAlloc || hasEval || deleted {
		return structs.JobStatusDead, nil
	}
	return structs.JobStatusPending, nil
}

// childStatusChanged moves a child job from one status to another in its
// parent's children counts; "" means the child did not (or no longer does)
// exist.
func (t *writeTxn) childStatusChanged(ns, parentID, from, to string) error {
	sum, err := t.summary(ns, parentID)
	if err != nil || sum == nil {
		return err
	}
	if sum.Children == nil {
		sum.Children = &structs.JobChildrenSummary{}
	}
	bump := func(status string, d int64) {
		var p *int64
		switch status {
		case structs.JobStatusPending:
			p = &sum.Children.Pending
		case structs.JobStatusRunning:
			p = &sum.Children.Running
		case structs.JobStatusDead:
			p = &sum.Children.Dead
		default:
			return
		}
		if *p += d; *p < 0 {
			*p = 0
		}
	}
	bump(from, -1)
	bump(to, 1)
	return nil
}

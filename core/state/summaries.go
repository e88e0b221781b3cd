package state

import (
	"fmt"

	"github.com/drover-org/drover/core/structs"
)

// ReconcileJobSummaries rebuilds every job's summary from the state (PUT
// /v1/system/reconcile/summaries): each group's counts from the job's
// allocations of its current instance, a parent's children counts from
// its children's statuses. A group's queued count is the scheduler's and
// is kept. Summaries that already match are left as they are.
func (s *StateStore) ReconcileJobSummaries(index uint64, req *structs.ReconcileJobSummariesRequest) (*structs.ReconcileJobSummariesResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	out := &structs.ReconcileJobSummariesResponse{}
	err := s.write(index, func(t *writeTxn) error {
		it, err := t.txn.LowerBound(TableJobs, "id", req.AfterNamespace, req.AfterID)
		if err != nil {
			return fmt.Errorf("state: read %s: %w", TableJobs, err)
		}
		var jobs []*structs.Job
		more := false
		for raw := it.Next(); raw != nil; raw = it.Next() {
			j := raw.(*structs.Job)
			if j.Namespace == req.AfterNamespace && j.ID == req.AfterID {
				continue // the last one of the previous entry
			}
			if req.Limit > 0 && len(jobs) == req.Limit {
				more = true
				break
			}
			jobs = append(jobs, j)
		}
		out.Done = !more
		for _, j := range jobs {
			if err := t.reconcileSummary(j); err != nil {
				return err
			}
		}
		out.Reconciled = len(jobs)
		if n := len(jobs); n > 0 {
			out.NextNamespace, out.NextID = jobs[n-1].Namespace, jobs[n-1].ID
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *writeTxn) reconcileSummary(j *structs.Job) error {
	old, err := t.summary(j.Namespace, j.ID)
	if err != nil {
		return err
	}
	sum := &structs.JobSummary{JobID: j.ID, Namespace: j.Namespace, CreateIndex: j.CreateIndex,
		Summary: make(map[string]structs.TaskGroupSummary, len(j.TaskGroups))}
	for _, tg := range j.TaskGroups {
		g := structs.TaskGroupSummary{}
		if old != nil && old.CreateIndex == j.CreateIndex {
			g.Queued = old.Summary[tg.Name].Queued
		}
		sum.Summary[tg.Name] = g
	}
	it, err := t.txn.Get(TableAllocs, "job", j.Namespace, j.ID)
	if err != nil {
		return fmt.Errorf("state: read %s: %w", TableAllocs, err)
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		a := raw.(*structs.Allocation)
		if a.Job == nil || a.Job.CreateIndex != j.CreateIndex {
			continue // an earlier job under the same ID
		}
		g := sum.Summary[a.TaskGroup]
		addStatus(&g, a.ClientStatus, 1)
		sum.Summary[a.TaskGroup] = g
	}
	if j.IsParent() {
		sum.Children = &structs.JobChildrenSummary{}
		kids, err := t.txn.Get(TableJobs, "parent", j.Namespace, j.ID)
		if err != nil {
			return fmt.Errorf("state: read %s: %w", TableJobs, err)
		}
		for raw := kids.Next(); raw != nil; raw = kids.Next() {
			switch raw.(*structs.Job).Status {
			case structs.JobStatusPending:
				sum.Children.Pending++
			case structs.JobStatusRunning:
				sum.Children.Running++
			case structs.JobStatusDead:
				sum.Children.Dead++
			}
		}
	}
	if old != nil {
		sum.ModifyIndex = old.ModifyIndex
		if old.CreateIndex == sum.CreateIndex && sameCounts(old, sum) {
			return nil
		}
	}
	t.setSummary(sum)
	return nil
}

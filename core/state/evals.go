package state

import (
	"fmt"

	"github.com/drover-org/drover/core/structs"
)

// UpsertEvals writes evaluations at index. A new eval gets CreateIndex =
// index and a CreateTime; an existing one keeps both. ModifyIndex and
// ModifyTime are stamped on every write.
//
// Side effects, all in the same write: the job summary's Queued counts take
// the eval's QueuedAllocations; a complete eval without placement failures
// cancels the job's other blocked evals (they were waiting to place what the
// complete eval has now placed); and the status of every affected job is
// derived again.
func (s *StateStore) UpsertEvals(index uint64, evals []*structs.Evaluation) error {
	return s.write(index, func(t *writeTxn) error { return t.upsertEvals(evals) })
}

// DeleteEval reaps evaluations and allocations (garbage collection). IDs
// that do not exist are skipped. Jobs that lose evals or allocs are derived
// again and become dead rather than pending.
func (s *StateStore) DeleteEval(index uint64, evalIDs, allocIDs []string) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableEvals] = struct{}{}
		t.tables[TableAllocs] = struct{}{}
		for _, id := range evalIDs {
			raw, err := t.first(TableEvals, "id", id)
			if err != nil {
				return err
			}
			if raw == nil {
				continue
			}
			e := raw.(*structs.Evaluation)
			if err := t.delete(TableEvals, e); err != nil {
				return err
			}
			t.touchJob(e.Namespace, e.JobID, true)
		}
		for _, id := range allocIDs {
			a, err := t.alloc(id)
			if err != nil {
				return err
			}
			if a == nil {
				continue
			}
			// A claim of a reaped allocation is the watcher's to free.
			if err := t.touchClaimedVolumes(a); err != nil {
				return err
			}
			if err := t.delete(TableAllocs, a); err != nil {
				return err
			}
			if err := t.deleteServicesBy("alloc", a.ID); err != nil {
				return err
			}
			t.touchJob(a.Namespace, a.JobID, true)
		}
		return nil
	})
}

func (t *writeTxn) upsertEvals(evals []*structs.Evaluation) error {
	t.tables[TableEvals] = struct{}{}
	inBatch := make(map[string]bool, len(evals))
	for _, e := range evals {
		if e == nil || e.ID == "" {
			return structs.NewError(structs.ErrInvalid, "evaluation: missing ID")
		}
		inBatch[e.ID] = true
	}
	for _, e := range evals {
		raw, err := t.first(TableEvals, "id", e.ID)
		if err != nil {
			return err
		}
		if raw != nil {
			existing := raw.(*structs.Evaluation)
			e.CreateIndex = existing.CreateIndex
			e.CreateTime = existing.CreateTime
		} else {
			e.CreateIndex = t.index
			if e.CreateTime == 0 {
				e.CreateTime = t.nanos()
			}
		}
		e.ModifyIndex = t.index
		e.ModifyTime = t.stampNanos(e.ModifyTime)

		if err := t.applyQueued(e); err != nil {
			return err
		}
		if e.Status == structs.EvalStatusComplete && len(e.FailedTGAllocs) == 0 {
			if err := t.cancelBlocked(e, inBatch); err != nil {
				return err
			}
		}
		if err := t.insert(TableEvals, e); err != nil {
			return err
		}
		t.touchJob(e.Namespace, e.JobID, false)
	}
	return nil
}

// applyQueued copies the eval's per-group queued counts into the job
// summary: the scheduler reports what it could not place yet.
func (t *writeTxn) applyQueued(e *structs.Evaluation) error {
	if len(e.QueuedAllocations) == 0 || e.JobID == "" {
		return nil
	}
	sum, err := t.summary(e.Namespace, e.JobID)
	if err != nil || sum == nil {
		return err
	}
	for tg, n := range e.QueuedAllocations {
		if g, ok := sum.Summary[tg]; ok {
			g.Queued = n
			sum.Summary[tg] = g
		}
	}
	return nil
}

// cancelBlocked cancels the job's blocked evals other than those in the
// current batch, because done (a complete eval that placed everything) made
// them moot. The blocked-evals tracker drops them on the same signal.
func (t *writeTxn) cancelBlocked(done *structs.Evaluation, inBatch map[string]bool) error {
	if done.JobID == "" {
		return nil
	}
	iter, err := t.txn.Get(TableEvals, "job", done.Namespace, done.JobID)
	if err != nil {
		return err
	}
	var blocked []*structs.Evaluation
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		e := raw.(*structs.Evaluation)
		if e.Status == structs.EvalStatusBlocked && !inBatch[e.ID] {
			blocked = append(blocked, e)
		}
	}
	for _, e := range blocked {
		c := *e
		c.Status = structs.EvalStatusCancelled
		c.StatusDescription = fmt.Sprintf("evaluation %q successful", done.ID)
		c.ModifyIndex = t.index
		// The eval that made them moot was stamped just before.
		c.ModifyTime = done.ModifyTime
		if err := t.insert(TableEvals, &c); err != nil {
			return err
		}
	}
	return nil
}

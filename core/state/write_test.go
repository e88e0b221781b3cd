package state

import (
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// WriteTxn commits all its writes together, its reads see its own writes, and
// the deferred work (statuses, summaries, indexes) covers all of it. An
// error anywhere in it writes nothing.
func TestWriteIsOneTransaction(t *testing.T) {
	s := testStore(t)
	job := mockJob(structs.JobTypeService)
	ev := mockEval(job, structs.EvalStatusPending)
	must(t, s.WriteTxn(10, func(tx *Txn) error {
		if err := tx.UpsertJob(job); err != nil {
			return err
		}
		got, err := tx.JobByID(job.Namespace, job.ID)
		if err != nil || got == nil || got.JobModifyIndex != 10 {
			t.Errorf("a read inside the write = %v, %v; want the job just written", got, err)
		}
		return tx.UpsertEvals([]*structs.Evaluation{ev})
	}))
	if st := jobStatus(t, s, job); st != structs.JobStatusPending {
		t.Errorf("job status %q, want pending", st)
	}
	if e, _ := s.EvalByID(nil, ev.ID); e == nil || e.CreateIndex != 10 {
		t.Errorf("eval = %+v, want created at 10", e)
	}
	if s.Index(TableJobs) != 10 || s.Index(TableEvals) != 10 {
		t.Errorf("indexes jobs %d evals %d, want 10", s.Index(TableJobs), s.Index(TableEvals))
	}

	other := mockJob("batch")
	err := s.WriteTxn(11, func(tx *Txn) error {
		if err := tx.UpsertJob(other); err != nil {
			return err
		}
		if err := tx.UpsertPeriodicLaunch(&structs.PeriodicLaunch{ID: other.ID, Namespace: other.Namespace}); err != nil {
			return err
		}
		return tx.UpsertEvals([]*structs.Evaluation{{}})
	})
	if !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("write with an eval without ID: %v, want ErrInvalid", err)
	}
	if j, _ := s.JobByID(nil, other.Namespace, other.ID); j != nil {
		t.Error("the job of a failed write was stored")
	}
	if l, _ := s.PeriodicLaunchByID(nil, other.Namespace, other.ID); l != nil {
		t.Error("the launch of a failed write was stored")
	}
	if s.LatestIndex() != 10 {
		t.Errorf("latest index %d after a failed write, want 10", s.LatestIndex())
	}
}

package state

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// A summary that drifted from the allocations is rebuilt from them; one
// that matches is not written again; a parent's children are recounted.
func TestReconcileJobSummaries(t *testing.T) {
	s := testStore(t)
	j := storedJob(t, s, 10, mockJob("service"))
	a1, a2 := mockAlloc(j, "n1"), mockAlloc(j, "n2")
	a1.ClientStatus, a2.ClientStatus = structs.AllocClientStatusRunning, structs.AllocClientStatusComplete
	must(t, s.UpsertAllocs(11, []*structs.Allocation{a1, a2}))
	parent := storedJob(t, s, 12, mockPeriodic())
	child := storedJob(t, s, 13, mockChild(parent, 100))
	ok := storedJob(t, s, 14, mockJob("service"))

	// Corrupt two summaries behind the store's back.
	txn := s.db.Txn(true)
	for _, id := range []string{j.ID, parent.ID} {
		raw, err := txn.First(TableJobSummary, "id", structs.DefaultNamespace, id)
		if err != nil || raw == nil {
			t.Fatalf("summary of %s: %v", id, err)
		}
		bad := copySummary(raw.(*structs.JobSummary))
		bad.Summary["web"] = structs.TaskGroupSummary{Queued: 1, Running: 7, Failed: 3}
		if bad.Children != nil {
			bad.Children = &structs.JobChildrenSummary{Dead: 9}
		}
		must(t, txn.Insert(TableJobSummary, bad))
	}
	txn.Commit()
	okBefore, err := s.JobSummaryByID(nil, ok.Namespace, ok.ID)
	must(t, err)

	must(t, s.ReconcileJobSummaries(20))
	sum, err := s.JobSummaryByID(nil, j.Namespace, j.ID)
	must(t, err)
	if g := sum.Summary["web"]; g != (structs.TaskGroupSummary{Queued: 1, Running: 1, Complete: 1}) || sum.ModifyIndex != 20 {
		t.Errorf("rebuilt summary %+v at %d, want queued 1 (kept), running 1, complete 1 at 20", g, sum.ModifyIndex)
	}
	ps, err := s.JobSummaryByID(nil, parent.Namespace, parent.ID)
	must(t, err)
	c, err := s.JobByID(nil, child.Namespace, child.ID)
	must(t, err)
	want := structs.JobChildrenSummary{}
	switch c.Status {
	case structs.JobStatusPending:
		want.Pending = 1
	case structs.JobStatusRunning:
		want.Running = 1
	case structs.JobStatusDead:
		want.Dead = 1
	}
	if ps.Children == nil || *ps.Children != want {
		t.Errorf("parent's children %+v, want %+v (child %s)", ps.Children, want, c.Status)
	}
	okAfter, err := s.JobSummaryByID(nil, ok.Namespace, ok.ID)
	must(t, err)
	if okAfter.ModifyIndex != okBefore.ModifyIndex {
		t.Errorf("a matching summary was written again: %d → %d", okBefore.ModifyIndex, okAfter.ModifyIndex)
	}
}

package state

import (
	"errors"
	"fmt"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// A summary that drifted from the allocations is rebuilt from them; one
// that matches is not written again; a parent's children are recounted.
// TestReconcileJobSummaries: the same four jobs reconciled in one entry
// (Limit 0, as entries written before paging) or in pages of any size give
// the same summaries, in as many entries as the pages need.
func TestReconcileJobSummaries(t *testing.T) {
	for _, tc := range []struct{ limit, entries int }{{0, 1}, {1, 4}, {2, 2}, {3, 2}, {4, 1}, {5, 1}} {
		t.Run(fmt.Sprintf("limit %d", tc.limit), func(t *testing.T) {
			if n := reconcileSummariesCase(t, tc.limit); n != tc.entries {
				t.Errorf("took %d entries, want %d", n, tc.entries)
			}
		})
	}
}

// reconcileSummariesCase reconciles corrupted summaries with pages of
// limit jobs, checks the result and returns the number of entries taken.
func reconcileSummariesCase(t *testing.T, limit int) int {
	t.Helper()
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

	entries, reconciled := 0, 0
	req := &structs.ReconcileJobSummariesRequest{Limit: limit}
	for index := uint64(20); ; index++ {
		out, err := s.ReconcileJobSummaries(index, req)
		must(t, err)
		entries++
		reconciled += out.Reconciled
		if out.Done {
			break
		}
		if entries > 10 {
			t.Fatalf("not done after %d entries: %+v", entries, out)
		}
		req = &structs.ReconcileJobSummariesRequest{AfterNamespace: out.NextNamespace, AfterID: out.NextID, Limit: limit}
	}
	if reconciled != 4 {
		t.Errorf("reconciled %d jobs in all, want each of the 4 once", reconciled)
	}
	sum, err := s.JobSummaryByID(nil, j.Namespace, j.ID)
	must(t, err)
	if g := sum.Summary["web"]; g != (structs.TaskGroupSummary{Queued: 1, Running: 1, Complete: 1}) || sum.ModifyIndex < 20 {
		t.Errorf("rebuilt summary %+v at %d, want queued 1 (kept), running 1, complete 1 at 20 or later", g, sum.ModifyIndex)
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
	return entries
}

// TestReconcileJobSummariesBounds: a limit out of range is refused before
// anything is written.
func TestReconcileJobSummariesBounds(t *testing.T) {
	s := testStore(t)
	for _, limit := range []int{-1, structs.MaxReconcileJobs + 1} {
		_, err := s.ReconcileJobSummaries(5, &structs.ReconcileJobSummariesRequest{Limit: limit})
		if !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("limit %d: err = %v, want an ErrInvalid", limit, err)
		}
	}
	if s.LatestIndex() == 5 {
		t.Error("a refused request moved the store's index")
	}
}

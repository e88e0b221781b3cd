package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// A system alloc that fails on its client (restarts exhausted) is replaced
// on the same node, chained through PreviousAllocation, and when that one
// fails too its replacement waits; a sysbatch alloc that fails is left
// alone.
func TestFailedAllocReplacement(t *testing.T) {
	for _, tc := range []struct {
		jobType  string
		replaced bool
	}{
		{"system", true},
		{"sysbatch", false},
	} {
		t.Run(tc.jobType, func(t *testing.T) {
			s := testServer(t, nil)
			ctx := context.Background()
			node := testNode("a")
			if _, err := s.Nodes().Register(ctx, node); err != nil {
				t.Fatal(err)
			}
			resp, err := s.Jobs().Register(ctx, testJob("j", tc.jobType), false, 0)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "first placement", func() bool { return evalStatus(t, s, resp.EvalID) == structs.EvalStatusComplete })
			allocs, _ := s.State().AllocsByJob(nil, "default", "j", true)
			if len(allocs) != 1 {
				t.Fatalf("allocs = %d", len(allocs))
			}
			failed := allocs[0].Copy()
			failed.ClientStatus = structs.AllocClientStatusFailed
			if err := s.Nodes().UpdateAllocs(ctx, node.ID, node.SecretID, []*structs.Allocation{failed}); err != nil {
				t.Fatal(err)
			}
			if !tc.replaced {
				evals, _ := s.State().EvalsByJob(nil, "default", "j")
				if len(evals) != 1 {
					t.Fatalf("a failed sysbatch alloc caused %d evals, want none beyond the first", len(evals)-1)
				}
				return
			}
			var next *structs.Allocation
			waitFor(t, 10*time.Second, "replacement alloc", func() bool {
				all, _ := s.State().AllocsByJob(nil, "default", "j", true)
				for _, a := range all {
					if a.ID != failed.ID && a.DesiredStatus == structs.AllocDesiredStatusRun {
						next = a
						return true
					}
				}
				return false
			})
			if next.NodeID != node.ID || next.PreviousAllocation != failed.ID || next.Name != failed.Name {
				t.Fatalf("replacement %+v does not chain to %s on node %s", next, failed.ID, node.ID)
			}
			// The plan commits before the worker marks its eval complete (a
			// later write), so the replacement can be seen first.
			waitFor(t, 10*time.Second, "a completed failed-follow-up eval", func() bool {
				evals, _ := s.State().EvalsByJob(nil, "default", "j")
				for _, e := range evals {
					if e.TriggeredBy == structs.EvalTriggerFailedFollowUp && e.Status == structs.EvalStatusComplete {
						return true
					}
				}
				return false
			})

			// It fails too: the next follow-up is held back.
			again := next.Copy()
			again.ClientStatus = structs.AllocClientStatusFailed
			before := time.Now()
			if err := s.Nodes().UpdateAllocs(ctx, node.ID, node.SecretID, []*structs.Allocation{again}); err != nil {
				t.Fatal(err)
			}
			evals, _ := s.State().EvalsByJob(nil, "default", "j")
			var delayed *structs.Evaluation
			for _, e := range evals {
				if e.TriggeredBy == structs.EvalTriggerFailedFollowUp && !e.WaitUntil.IsZero() {
					delayed = e
				}
			}
			if delayed == nil || delayed.WaitUntil.Before(before.Add(allocEndBaseDelay-time.Second)) {
				t.Fatalf("the second failure's follow-up is not delayed by %s: %+v", allocEndBaseDelay, delayed)
			}
			if delayed.Status != structs.EvalStatusPending {
				t.Errorf("delayed follow-up ran already: %s", delayed.Status)
			}
		})
	}
}

// Allocs that keep ending on a node are replaced ever more slowly.
func TestAllocEndDelay(t *testing.T) {
	for _, tc := range []struct {
		ends int
		want time.Duration
	}{
		{1, 0}, {2, 10 * time.Second}, {3, 20 * time.Second}, {4, 40 * time.Second},
		{7, 320 * time.Second}, {8, 10 * time.Minute}, {100, 10 * time.Minute},
	} {
		if got := allocEndDelay(tc.ends); got != tc.want {
			t.Errorf("allocEndDelay(%d) = %s, want %s", tc.ends, got, tc.want)
		}
	}
}

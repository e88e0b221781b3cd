package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// A system alloc that fails on its client (restarts exhausted) is replaced
// on the same node, chained through PreviousAllocation; a sysbatch alloc
// that fails is left alone.
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
			if _, err := s.RegisterNode(ctx, node); err != nil {
				t.Fatal(err)
			}
			resp, err := s.RegisterJob(ctx, testJob("j", tc.jobType), false, 0)
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
			if err := s.UpdateAllocs(ctx, node.ID, node.SecretID, []*structs.Allocation{failed}); err != nil {
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
		})
	}
}

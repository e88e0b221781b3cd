package server

import (
	"context"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// After `job stop -purge`, a new job under the same ID is a new job: its
// allocs name no previous allocation from the purged one, and a sysbatch
// job runs again rather than counting the purged job's finished allocs as
// its own.
func TestRerunAfterPurgeHasNoPreviousAlloc(t *testing.T) {
	for _, typ := range []string{"system", "sysbatch"} {
		t.Run(typ, func(t *testing.T) {
			s := testServer(t, nil)
			ctx := context.Background()
			n := testNode("a")
			registerNodes(t, s, n)
			old := runJobOn(t, s, testJob("j", typ), n, structs.AllocClientStatusComplete)
			dereg, err := s.Jobs().Deregister(ctx, "", "j", true)
			if err != nil {
				t.Fatal(err)
			}
			waitEvalTerminal(t, s, dereg.EvalID)
			if j, _ := s.State().JobByID(nil, structs.DefaultNamespace, "j"); j != nil {
				t.Fatal("purged job still stored")
			}

			before := map[string]bool{}
			for _, a := range allocsOn(t, s, "j", n.ID) {
				before[a.ID] = true
			}
			resp := registerJob(t, s, testJob("j", typ))
			if ev := waitEvalTerminal(t, s, resp.EvalID); ev.Status != structs.EvalStatusComplete {
				t.Fatalf("eval: %s %s", ev.Status, ev.StatusDescription)
			}
			var fresh []*structs.Allocation
			for _, a := range allocsOn(t, s, "j", n.ID) {
				if !before[a.ID] {
					fresh = append(fresh, a)
				}
			}
			if len(fresh) != 1 {
				t.Fatalf("the new job has %d allocs on the node; want 1", len(fresh))
			}
			if fresh[0].PreviousAllocation != "" {
				t.Fatalf("the new job's alloc names the purged job's %q as its previous allocation (first was %s)", fresh[0].PreviousAllocation, old.ID)
			}
		})
	}
}

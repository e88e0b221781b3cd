package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// ReconcileJobSummaries rebuilds the summaries through Raft: a job's
// counts come back from its allocations.
func TestReconcileJobSummaries(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	node := testNode("a")
	if _, err := s.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	resp, err := s.Jobs().Register(ctx, testJob("j", "sysbatch"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "placement", func() bool { return evalStatus(t, s, resp.EvalID) == structs.EvalStatusComplete })
	before, _ := s.State().JobSummaryByID(nil, "default", "j")
	if err := s.ReconcileJobSummaries(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := s.State().JobSummaryByID(nil, "default", "j")
	var placed int
	for _, g := range after.Summary {
		placed += g.Starting + g.Running + g.Complete + g.Failed + g.Lost + g.Unknown
	}
	if placed != 1 || !sameSummaryCounts(before, after) {
		t.Fatalf("summary after the rebuild %+v (before %+v), want the one placed alloc counted as before", after.Summary, before.Summary)
	}
}

func sameSummaryCounts(a, b *structs.JobSummary) bool {
	if len(a.Summary) != len(b.Summary) {
		return false
	}
	for k, v := range a.Summary {
		if b.Summary[k] != v {
			return false
		}
	}
	return true
}

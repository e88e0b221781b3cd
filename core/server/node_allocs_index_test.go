package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// A node's allocs answer with the highest modify index of its own allocs:
// a write to another node's allocs does not end its blocking query (the
// query waits again), a write to its own does.
func TestNodeAllocsIndexIsTheNodesOwn(t *testing.T) {
	s, nodes, allocs := servicesServer(t, nil)
	ctx := context.Background()
	a, b := nodes[0], nodes[1]

	got, idx, err := s.Nodes().Allocs(ctx, a.ID, a.SecretID, 0, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("first answer: %d allocs, %v", len(got), err)
	}
	if idx != got[0].ModifyIndex {
		t.Fatalf("index %d, want the node's alloc's modify index %d", idx, got[0].ModifyIndex)
	}

	// Another node's alloc changes: the allocs table moves on, a's index not.
	other := allocs[1].Copy()
	other.ClientStatus = structs.AllocClientStatusComplete
	if _, err := s.raftApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: other.Job, AllocsUpdated: []*structs.Allocation{other}}); err != nil {
		t.Fatal(err)
	}
	if table := s.State().Index("allocs"); table <= idx {
		t.Fatalf("allocs table index %d did not move past %d", table, idx)
	}
	start := time.Now()
	_, again, err := s.Nodes().Allocs(ctx, a.ID, a.SecretID, idx, 300*time.Millisecond)
	if err != nil || again != idx {
		t.Fatalf("after b's write: index %d (%v), want a's unchanged %d", again, err, idx)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("the query answered after %s, before its wait ended, with nothing new", waited)
	}

	// b's own query sees b's write.
	if _, bIdx, err := s.Nodes().Allocs(ctx, b.ID, b.SecretID, idx, time.Minute); err != nil || bIdx <= idx {
		t.Fatalf("b's index %d (%v), want past %d", bIdx, err, idx)
	}

	// a's own alloc changes: a waiting query answers with it.
	type answer struct {
		allocs []*structs.Allocation
		idx    uint64
		err    error
	}
	ch := make(chan answer, 1)
	go func() {
		got, i, err := s.Nodes().Allocs(ctx, a.ID, a.SecretID, idx, time.Minute)
		ch <- answer{got, i, err}
	}()
	mine := allocs[0].Copy()
	mine.DesiredStatus = structs.AllocDesiredStatusStop
	if _, err := s.raftApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: mine.Job, AllocsUpdated: []*structs.Allocation{mine}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil || r.idx <= idx || len(r.allocs) != 1 || r.allocs[0].DesiredStatus != structs.AllocDesiredStatusStop {
			t.Fatalf("answer after a's write: index %d (want past %d), %d allocs, %v", r.idx, idx, len(r.allocs), r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a's query did not answer its own alloc's change within 30s")
	}
}

// A node without allocs answers with the allocs table's index, never 0.
func TestNodeAllocsIndexWithoutAllocs(t *testing.T) {
	if got := nodeAllocsIndex(nil, 0); got != 1 {
		t.Fatalf("empty table: %d, want 1", got)
	}
	if got := nodeAllocsIndex(nil, 42); got != 42 {
		t.Fatalf("no allocs: %d, want the table's 42", got)
	}
	allocs := []*structs.Allocation{{ModifyIndex: 7}, {ModifyIndex: 12}, {ModifyIndex: 9}}
	if got := nodeAllocsIndex(allocs, 42); got != 12 {
		t.Fatalf("allocs: %d, want their highest modify index 12", got)
	}
}

package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Stopping an alloc of a system job on a ready node replaces it there, as
// Nomad does: the node is not tainted, and the job still wants it.
func TestStopSystemAllocReplacesItOnItsNode(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	n := testNode("a")
	registerNodes(t, s, n)
	old := runJobOn(t, s, testJob("sys", "system"), n, structs.AllocClientStatusRunning)
	resp, err := s.Nodes().StopAlloc(ctx, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ev := waitEvalTerminal(t, s, resp.EvalID); ev.Status != structs.EvalStatusComplete {
		t.Fatalf("alloc-stop eval: %s %s", ev.Status, ev.StatusDescription)
	}
	stopped, _ := s.State().AllocByID(nil, old.ID)
	if stopped.DesiredStatus != structs.AllocDesiredStatusStop {
		t.Fatalf("stopped alloc desired %q", stopped.DesiredStatus)
	}
	if stopped.DesiredDescription == "alloc not needed as node is tainted" {
		t.Errorf("stop of an alloc on a ready node says the node is tainted")
	}
	var next *structs.Allocation
	waitFor(t, 10*time.Second, "a replacement on the node", func() bool {
		for _, a := range allocsOn(t, s, "sys", n.ID) {
			if a.ID != old.ID && a.DesiredStatus == structs.AllocDesiredStatusRun {
				next = a
				return true
			}
		}
		return false
	})
	if next.Name != old.Name || next.PreviousAllocation != old.ID {
		t.Fatalf("replacement %s named %q previous %q; want %q chained to %s", next.ID, next.Name, next.PreviousAllocation, old.Name, old.ID)
	}
}

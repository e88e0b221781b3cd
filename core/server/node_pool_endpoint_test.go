package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// A job naming a node pool that does not exist is refused at register and
// plan with ErrInvalid (HTTP 400) naming the pool; nothing reaches Raft.
func TestJobRegisterRefusesMissingNodePool(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	inMissing := func(id string) *structs.Job {
		j := testJob(id, "service")
		j.NodePool = "nope"
		return j
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"register", func() error { _, err := s.Jobs().Register(ctx, inMissing("web"), false, 0); return err }},
		{"plan", func() error { _, err := s.Jobs().Plan(ctx, inMissing("web"), true); return err }},
	} {
		before := s.State().LatestIndex()
		err := tc.call()
		if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), `NodePool "nope" does not exist`) {
			t.Fatalf("%s: error %v, want ErrInvalid naming the pool", tc.name, err)
		}
		if code := structs.HTTPStatus(err); code != http.StatusBadRequest {
			t.Errorf("%s: HTTP status %d, want 400", tc.name, code)
		}
		if after := s.State().LatestIndex(); after != before {
			t.Errorf("%s: a refused call was proposed: index %d -> %d", tc.name, before, after)
		}
	}
	if jobs, err := s.State().Jobs(nil); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after refusals: %d, %v", len(jobs), err)
	}
	if _, err := s.NodePools().Upsert(ctx, []*structs.NodePool{{Name: "nope"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Jobs().Register(ctx, inMissing("web"), false, 0); err != nil {
		t.Fatalf("register after creating the pool: %v", err)
	}
	if _, err := s.Jobs().Register(ctx, testJob("anywhere", "service"), false, 0); err != nil {
		t.Fatalf("register in the default pool: %v", err)
	}
}

// A node registering into a pool that does not exist creates it; a node
// with an invalid pool name, or in the "all" pool, is refused.
func TestRegisterNodeCreatesNodePool(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	n := testNode("edge-1")
	n.NodePool = "edge"
	registerNodes(t, s, n)
	p, err := s.State().NodePoolByName(nil, "edge")
	if err != nil || p == nil || p.CreateIndex == 0 {
		t.Fatalf("pool edge after node registration: %+v, %v", p, err)
	}
	// Re-registering keeps the pool as it is.
	registerNodes(t, s, n)
	if again, _ := s.State().NodePoolByName(nil, "edge"); again.ModifyIndex != p.ModifyIndex {
		t.Fatalf("re-registration rewrote the pool: %d -> %d", p.ModifyIndex, again.ModifyIndex)
	}
	for _, pool := range []string{"bad pool", "semi;colon", structs.NodePoolAll} {
		bad := testNode("bad")
		bad.NodePool = pool
		before := s.State().LatestIndex()
		if _, err := s.Nodes().Register(ctx, bad); !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("pool %q: error %v, want ErrInvalid", pool, err)
		}
		if after := s.State().LatestIndex(); after != before {
			t.Fatalf("pool %q: refused registration was proposed", pool)
		}
	}
	// The pool now holds a node: it cannot be deleted.
	if _, err := s.NodePools().Delete(ctx, "edge"); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "has nodes") {
		t.Fatalf("delete edge: %v", err)
	}
	if _, err := s.NodePools().Delete(ctx, structs.NodePoolDefault); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("delete default: %v", err)
	}
	if _, err := s.NodePools().Upsert(ctx, []*structs.NodePool{{Name: structs.NodePoolAll}}); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("upsert all: %v", err)
	}
}

// A placement that fails because the job's pool, or its datacenters in
// that pool, hold no eligible node says so in the eval's FailedTGAllocs.
func TestPlacementFailureNamesPoolAndDatacenter(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	registerNodes(t, s, testNode("n1")) // default pool, dc1
	if _, err := s.NodePools().Upsert(ctx, []*structs.NodePool{{Name: "gpu"}}); err != nil {
		t.Fatal(err)
	}

	inGPU := testJob("train", "service")
	inGPU.NodePool = "gpu"
	ev := waitEvalTerminal(t, s, registerJob(t, s, inGPU).EvalID)
	m := ev.FailedTGAllocs["g"]
	if m == nil || m.NodesEvaluated != 0 || m.NodePool != "gpu" || m.NodesInPool != 0 {
		t.Fatalf("job in an empty pool: FailedTGAllocs %+v", ev.FailedTGAllocs)
	}

	inDC2 := testJob("far", "service")
	inDC2.Datacenters = []string{"dc2"}
	ev = waitEvalTerminal(t, s, registerJob(t, s, inDC2).EvalID)
	m = ev.FailedTGAllocs["g"]
	if m == nil || m.NodePool != structs.NodePoolDefault || m.NodesInPool != 1 {
		t.Fatalf("job in an empty datacenter: FailedTGAllocs %+v", ev.FailedTGAllocs)
	}
	if avail, ok := m.NodesAvailable["dc2"]; !ok || avail != 0 {
		t.Fatalf("job in an empty datacenter: NodesAvailable %v, want dc2: 0", m.NodesAvailable)
	}

	// The plan endpoint explains the same way.
	plan, err := s.Jobs().Plan(ctx, inGPU, false)
	if err != nil {
		t.Fatal(err)
	}
	if pm := plan.FailedTGAllocs["g"]; pm == nil || pm.NodePool != "gpu" || pm.NodesInPool != 0 || pm.NodesEvaluated != 0 {
		t.Fatalf("plan FailedTGAllocs %+v", plan.FailedTGAllocs)
	}
}

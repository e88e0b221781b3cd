package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// planStore seeds a state store directly, the way the FSM would, so the
// plan applier's checks can be exercised without Raft.
type planStore struct {
	t   *testing.T
	st  *state.StateStore
	idx uint64
	job *structs.Job
}

func newPlanStore(t *testing.T) *planStore {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	p := &planStore{t: t, st: st, idx: 100}
	job := testJob("web", "sysbatch")
	job.Canonicalize()
	p.idx++
	if err := st.UpsertJob(p.idx, job); err != nil {
		t.Fatal(err)
	}
	p.job, _ = st.JobByID(nil, job.Namespace, job.ID)
	return p
}

// node stores a ready, eligible node (4000 MHz, 8192 MB) after mut.
func (p *planStore) node(mut func(*structs.Node)) *structs.Node {
	p.t.Helper()
	n := testNode("n-" + uuid.NewString()[:4])
	n.Status = structs.NodeStatusReady
	n.SchedulingEligibility = structs.NodeSchedulingEligible
	if mut != nil {
		mut(n)
	}
	p.idx++
	if err := p.st.UpsertNode(p.idx, n); err != nil {
		p.t.Fatal(err)
	}
	return n
}

// alloc stores a running alloc of the fixture job on node.
func (p *planStore) alloc(node *structs.Node, cpu, mem int64, mut func(*structs.Allocation)) *structs.Allocation {
	p.t.Helper()
	a := newPlanAlloc(p.job, node.ID, cpu, mem)
	a.Job = p.job
	a.ClientStatus = structs.AllocClientStatusRunning
	if mut != nil {
		mut(a)
	}
	p.idx++
	if err := p.st.UpsertAllocs(p.idx, []*structs.Allocation{a}); err != nil {
		p.t.Fatal(err)
	}
	return a
}

func (p *planStore) snapshot() *state.StateSnapshot {
	p.t.Helper()
	snap, err := p.st.Snapshot()
	if err != nil {
		p.t.Fatal(err)
	}
	return snap
}

// newPlanAlloc is a not-yet-stored placement as a plan carries it.
func newPlanAlloc(job *structs.Job, nodeID string, cpu, mem int64) *structs.Allocation {
	return &structs.Allocation{
		ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, TaskGroup: "g", NodeID: nodeID,
		Name: job.ID + ".g[0]", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
		AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
			"t": {Cpu: structs.AllocatedCpuResources{CpuShares: cpu}, Memory: structs.AllocatedMemoryResources{MemoryMB: mem}},
		}},
	}
}

// resized is an in-place update of a with new resources.
func resized(a *structs.Allocation, cpu, mem int64) *structs.Allocation {
	c := a.Copy()
	c.Job = nil
	c.AllocatedResources = newPlanAlloc(&structs.Job{}, a.NodeID, cpu, mem).AllocatedResources
	return c
}

func stopOf(a *structs.Allocation, clientStatus string) *structs.Allocation {
	return &structs.Allocation{ID: a.ID, NodeID: a.NodeID, JobID: a.JobID, Namespace: a.Namespace,
		DesiredStatus: structs.AllocDesiredStatusStop, ClientStatus: clientStatus}
}

func newPlan(job *structs.Job) *structs.Plan {
	return &structs.Plan{
		EvalID: uuid.NewString(), Job: job, Priority: job.Priority,
		NodeUpdate: map[string][]*structs.Allocation{}, NodeAllocation: map[string][]*structs.Allocation{},
		NodePreemptions: map[string][]*structs.Allocation{},
	}
}

func TestEvaluateNodePlan(t *testing.T) {
	cases := []struct {
		name   string
		build  func(p *planStore, plan *structs.Plan) string // returns the node ID to check
		fit    bool
		reason string
	}{
		{
			name: "node missing",
			build: func(p *planStore, plan *structs.Plan) string {
				id := uuid.NewString()
				plan.NodeAllocation[id] = []*structs.Allocation{newPlanAlloc(p.job, id, 100, 64)}
				return id
			},
			reason: "node does not exist",
		},
		{
			name: "stops only on a missing node always fit",
			build: func(p *planStore, plan *structs.Plan) string {
				id := uuid.NewString()
				plan.NodeUpdate[id] = []*structs.Allocation{{ID: uuid.NewString(), NodeID: id}}
				return id
			},
			fit: true,
		},
		{
			name: "stops only on a down node fit",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.Status = structs.NodeStatusDown })
				a := p.alloc(n, 100, 64, nil)
				plan.NodeUpdate[n.ID] = []*structs.Allocation{stopOf(a, structs.AllocClientStatusLost)}
				return n.ID
			},
			fit: true,
		},
		{
			name: "down node accepts lost updates",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.Status = structs.NodeStatusDown })
				a := p.alloc(n, 100, 64, nil)
				u := resized(a, 100, 64)
				u.ClientStatus = structs.AllocClientStatusLost
				plan.NodeAllocation[n.ID] = []*structs.Allocation{u}
				return n.ID
			},
			fit: true,
		},
		{
			name: "down node rejects placements",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.Status = structs.NodeStatusDown })
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 100, 64)}
				return n.ID
			},
			reason: "node is down",
		},
		{
			name: "disconnected node accepts unknown updates",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.Status = structs.NodeStatusDisconnected })
				a := p.alloc(n, 100, 64, nil)
				u := resized(a, 100, 64)
				u.ClientStatus = structs.AllocClientStatusUnknown
				plan.NodeAllocation[n.ID] = []*structs.Allocation{u}
				return n.ID
			},
			fit: true,
		},
		{
			name: "disconnected node rejects a running update mixed with unknown ones",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.Status = structs.NodeStatusDisconnected })
				a, b := p.alloc(n, 100, 64, nil), p.alloc(n, 100, 64, nil)
				ua := resized(a, 100, 64)
				ua.ClientStatus = structs.AllocClientStatusUnknown
				ub := resized(b, 200, 64)
				plan.NodeAllocation[n.ID] = []*structs.Allocation{ua, ub}
				return n.ID
			},
			reason: "node is disconnected",
		},
		{
			name: "initializing node is not ready",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.Status = structs.NodeStatusInit })
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 100, 64)}
				return n.ID
			},
			reason: "node is not ready for placements",
		},
		{
			name: "ineligible node rejects a new alloc",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible })
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 100, 64)}
				return n.ID
			},
			reason: "node is not eligible",
		},
		{
			name: "draining node rejects a new alloc",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) {
					n.DrainStrategy = &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}
				})
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 100, 64)}
				return n.ID
			},
			reason: "node is not eligible",
		},
		{
			name: "ineligible node accepts in-place updates of its allocs",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible })
				a := p.alloc(n, 1000, 1024, nil)
				plan.NodeAllocation[n.ID] = []*structs.Allocation{resized(a, 2000, 1024)}
				return n.ID
			},
			fit: true,
		},
		{
			name: "ineligible node rejects an update of a terminal alloc",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible })
				a := p.alloc(n, 100, 64, func(a *structs.Allocation) { a.ClientStatus = structs.AllocClientStatusComplete })
				plan.NodeAllocation[n.ID] = []*structs.Allocation{resized(a, 100, 64)}
				return n.ID
			},
			reason: "node is not eligible",
		},
		{
			name: "cpu exhausted",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(nil)
				p.alloc(n, 3000, 64, nil)
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 1001, 64)}
				return n.ID
			},
			reason: "cpu exhausted",
		},
		{
			name: "memory exhausted",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(nil)
				p.alloc(n, 100, 8000, nil)
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 100, 193)}
				return n.ID
			},
			reason: "memory exhausted",
		},
		{
			name: "reserved resources count against capacity",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(func(n *structs.Node) {
					n.ReservedResources = &structs.NodeReservedResources{Cpu: structs.NodeReservedCpuResources{CpuShares: 3500}}
				})
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 501, 64)}
				return n.ID
			},
			reason: "cpu exhausted",
		},
		{
			name: "exactly full fits",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(nil)
				p.alloc(n, 3000, 8000, nil)
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 1000, 192)}
				return n.ID
			},
			fit: true,
		},
		{
			name: "terminal allocs free their resources",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(nil)
				p.alloc(n, 3000, 64, func(a *structs.Allocation) { a.ClientStatus = structs.AllocClientStatusComplete })
				p.alloc(n, 3000, 64, func(a *structs.Allocation) { a.DesiredStatus = structs.AllocDesiredStatusStop })
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 3000, 64)}
				return n.ID
			},
			fit: true,
		},
		{
			name: "a stop in the same plan frees room",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(nil)
				a := p.alloc(n, 3000, 64, nil)
				plan.NodeUpdate[n.ID] = []*structs.Allocation{stopOf(a, "")}
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 3000, 64)}
				return n.ID
			},
			fit: true,
		},
		{
			name: "a preemption in the same plan frees room",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(nil)
				a := p.alloc(n, 3000, 64, nil)
				plan.NodePreemptions[n.ID] = []*structs.Allocation{{ID: a.ID, NodeID: n.ID}}
				plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 3000, 64)}
				return n.ID
			},
			fit: true,
		},
		{
			name: "an in-place update is not counted twice",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(nil)
				a := p.alloc(n, 3000, 64, nil)
				plan.NodeAllocation[n.ID] = []*structs.Allocation{resized(a, 3500, 64)}
				return n.ID
			},
			fit: true,
		},
		{
			name: "an in-place update that grows past capacity",
			build: func(p *planStore, plan *structs.Plan) string {
				n := p.node(nil)
				a := p.alloc(n, 3000, 64, nil)
				p.alloc(n, 500, 64, nil)
				plan.NodeAllocation[n.ID] = []*structs.Allocation{resized(a, 3600, 64)}
				return n.ID
			},
			reason: "cpu exhausted",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanStore(t)
			plan := newPlan(p.job)
			nodeID := tc.build(p, plan)
			fit, reason := evaluateNodePlan(p.snapshot(), plan, nodeID)
			if fit != tc.fit || reason != tc.reason {
				t.Fatalf("evaluateNodePlan = (%v, %q), want (%v, %q)", fit, reason, tc.fit, tc.reason)
			}
		})
	}
}

func TestEvaluatePlanPartialCommit(t *testing.T) {
	p := newPlanStore(t)
	good, full := p.node(nil), p.node(nil)
	p.alloc(full, 3500, 64, nil)
	other := p.alloc(good, 100, 64, nil)
	plan := newPlan(p.job)
	place := newPlanAlloc(p.job, good.ID, 1000, 64)
	plan.NodeAllocation[good.ID] = []*structs.Allocation{place}
	plan.NodeUpdate[good.ID] = []*structs.Allocation{stopOf(other, "")}
	plan.NodeAllocation[full.ID] = []*structs.Allocation{newPlanAlloc(p.job, full.ID, 1000, 64)}

	snap := p.snapshot()
	res := evaluatePlan(snap, plan)
	if !slices.Equal(res.RejectedNodes, []string{full.ID}) {
		t.Fatalf("rejected = %v, want [%s]", res.RejectedNodes, full.ID)
	}
	if got := res.NodeAllocation[good.ID]; len(got) != 1 || got[0].ID != place.ID {
		t.Fatalf("good node allocations = %v", got)
	}
	if len(res.NodeUpdate[good.ID]) != 1 {
		t.Fatalf("good node stops = %v", res.NodeUpdate[good.ID])
	}
	if _, ok := res.NodeAllocation[full.ID]; ok {
		t.Fatal("the rejected node's placement was kept")
	}
	want := snap.Index("allocs")
	if n := snap.Index("nodes"); n > want {
		want = n
	}
	if res.RefreshIndex != want || want == 0 {
		t.Fatalf("RefreshIndex = %d, want %d", res.RefreshIndex, want)
	}
	if full, _, _ := res.FullCommit(plan); full {
		t.Fatal("a partial result reports a full commit")
	}
}

func TestEvaluatePlanAllAtOnce(t *testing.T) {
	p := newPlanStore(t)
	good, full := p.node(nil), p.node(nil)
	p.alloc(full, 4000, 64, nil)
	keep := p.alloc(good, 100, 64, nil)
	plan := newPlan(p.job)
	plan.AllAtOnce = true
	plan.NodeAllocation[good.ID] = []*structs.Allocation{newPlanAlloc(p.job, good.ID, 100, 64)}
	plan.NodeUpdate[good.ID] = []*structs.Allocation{stopOf(keep, "")}
	plan.NodeAllocation[full.ID] = []*structs.Allocation{newPlanAlloc(p.job, full.ID, 100, 64)}
	plan.NodePreemptions[good.ID] = []*structs.Allocation{{ID: keep.ID, NodeID: good.ID}}

	res := evaluatePlan(p.snapshot(), plan)
	if !res.IsNoOp() {
		t.Fatalf("all-at-once plan with a bad node committed something: %+v", res)
	}
	if res.RefreshIndex == 0 || !slices.Contains(res.RejectedNodes, full.ID) {
		t.Fatalf("refresh=%d rejected=%v", res.RefreshIndex, res.RejectedNodes)
	}
}

func TestEvaluatePlanDropsTerminalPreemptions(t *testing.T) {
	p := newPlanStore(t)
	n := p.node(nil)
	live := p.alloc(n, 1000, 64, nil)
	done := p.alloc(n, 1000, 64, func(a *structs.Allocation) { a.ClientStatus = structs.AllocClientStatusFailed })
	stopped := p.alloc(n, 1000, 64, func(a *structs.Allocation) { a.DesiredStatus = structs.AllocDesiredStatusStop })
	plan := newPlan(p.job)
	plan.NodeAllocation[n.ID] = []*structs.Allocation{newPlanAlloc(p.job, n.ID, 2000, 64)}
	plan.NodePreemptions[n.ID] = []*structs.Allocation{
		{ID: live.ID, NodeID: n.ID}, {ID: done.ID, NodeID: n.ID}, {ID: stopped.ID, NodeID: n.ID},
		{ID: uuid.NewString(), NodeID: n.ID}, // already reaped
	}
	res := evaluatePlan(p.snapshot(), plan)
	got := res.NodePreemptions[n.ID]
	if len(got) != 1 || got[0].ID != live.ID {
		t.Fatalf("preemptions kept = %v, want only %s", got, live.ID)
	}
	if res.RefreshIndex != 0 || len(res.RejectedNodes) != 0 {
		t.Fatalf("full fit reported partial: %+v", res)
	}
}

// seedServer commits nodes, the job (without an eval, so no scheduler
// runs) and allocs through Raft, as the endpoints' FSM entries would.
func seedServer(t *testing.T, s *Server, job *structs.Job, nodes []*structs.Node, allocs []*structs.Allocation) *structs.Job {
	t.Helper()
	for _, n := range nodes {
		if _, err := s.raftApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.raftApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Namespace: job.Namespace, JobID: job.ID}); err != nil {
		t.Fatal(err)
	}
	stored, _ := s.State().JobByID(nil, job.Namespace, job.ID)
	if len(allocs) > 0 {
		if _, err := s.raftApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: stored, AllocsUpdated: allocs}); err != nil {
			t.Fatal(err)
		}
	}
	return stored
}

func TestApplyPlan(t *testing.T) {
	s := testServer(t, nil)
	job := testJob("applied", "sysbatch")
	job.Canonicalize()
	good, full := testNode("good"), testNode("full")
	for _, n := range []*structs.Node{good, full} {
		n.Status, n.SchedulingEligibility = structs.NodeStatusReady, structs.NodeSchedulingEligible
	}
	hog := newPlanAlloc(job, full.ID, 4000, 64)
	hog.ClientStatus = structs.AllocClientStatusRunning
	victim := newPlanAlloc(job, good.ID, 100, 64)
	victim.ClientStatus = structs.AllocClientStatusRunning
	stored := seedServer(t, s, job, []*structs.Node{good, full}, []*structs.Allocation{hog, victim})

	plan := newPlan(stored)
	plan.SnapshotIndex = s.State().LatestIndex()
	place := newPlanAlloc(stored, good.ID, 500, 64)
	plan.NodeAllocation[good.ID] = []*structs.Allocation{place}
	plan.NodeUpdate[good.ID] = []*structs.Allocation{stopOf(victim, "")}
	plan.NodeAllocation[full.ID] = []*structs.Allocation{newPlanAlloc(stored, full.ID, 500, 64)}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.applyPlan(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	if res.AllocIndex == 0 || res.RefreshIndex != res.AllocIndex {
		t.Fatalf("AllocIndex=%d RefreshIndex=%d: a partial commit refreshes at its own commit", res.AllocIndex, res.RefreshIndex)
	}
	if !slices.Equal(res.RejectedNodes, []string{full.ID}) {
		t.Fatalf("rejected %v", res.RejectedNodes)
	}
	got, _ := s.State().AllocByID(nil, place.ID)
	if got == nil || got.Job == nil || got.Job.ID != stored.ID || got.CreateIndex != res.AllocIndex {
		t.Fatalf("placed alloc not committed with its job: %+v", got)
	}
	if v, _ := s.State().AllocByID(nil, victim.ID); v.DesiredStatus != structs.AllocDesiredStatusStop {
		t.Fatalf("stopped alloc desired status = %q", v.DesiredStatus)
	}
	onFull, _ := s.State().AllocsByNode(nil, full.ID)
	if len(onFull) != 1 {
		t.Fatalf("rejected node got allocs: %d", len(onFull))
	}

	// A plan that commits nothing is answered without a Raft write.
	before := s.State().LatestIndex()
	noop := newPlan(stored)
	noop.NodeAllocation[full.ID] = []*structs.Allocation{newPlanAlloc(stored, full.ID, 500, 64)}
	res, err = s.applyPlan(ctx, noop)
	if err != nil {
		t.Fatal(err)
	}
	if res.AllocIndex != 0 || res.RefreshIndex == 0 || s.State().LatestIndex() != before {
		t.Fatalf("no-op result %+v; index %d -> %d", res, before, s.State().LatestIndex())
	}

	// A plan without a job (the job was purged) may stop allocs but not
	// place any.
	nojob := newPlan(stored)
	nojob.Job = nil
	nojob.NodeAllocation[good.ID] = []*structs.Allocation{newPlanAlloc(stored, good.ID, 100, 64)}
	if _, err := s.applyPlan(ctx, nojob); err == nil || !strings.Contains(err.Error(), "has no job") {
		t.Fatalf("placing plan without job: %v", err)
	}
	stopOnly := newPlan(stored)
	stopOnly.Job = nil
	stopOnly.NodeUpdate[good.ID] = []*structs.Allocation{stopOf(place, "")}
	res, err = s.applyPlan(ctx, stopOnly)
	if err != nil || res.AllocIndex == 0 {
		t.Fatalf("stop-only plan without job: %+v %v", res, err)
	}
	if p, _ := s.State().AllocByID(nil, place.ID); p.DesiredStatus != structs.AllocDesiredStatusStop || p.Job == nil {
		t.Fatalf("stopped alloc = %q, job kept: %v", p.DesiredStatus, p.Job != nil)
	}
}

func TestApplyPlanPreemptionCreatesEvals(t *testing.T) {
	s := testServer(t, nil)
	low := testJob("low", "sysbatch")
	low.Priority = 20
	low.Canonicalize()
	n := testNode("n")
	n.Status, n.SchedulingEligibility = structs.NodeStatusReady, structs.NodeSchedulingEligible
	victim := newPlanAlloc(low, n.ID, 3500, 64)
	victim.ClientStatus = structs.AllocClientStatusRunning
	seedServer(t, s, low, []*structs.Node{n}, []*structs.Allocation{victim})

	high := testJob("high", "sysbatch")
	high.Priority = 90
	high.Canonicalize()
	storedHigh := seedServer(t, s, high, nil, nil)

	plan := newPlan(storedHigh)
	place := newPlanAlloc(storedHigh, n.ID, 3000, 64)
	plan.NodeAllocation[n.ID] = []*structs.Allocation{place}
	plan.NodePreemptions[n.ID] = []*structs.Allocation{{ID: victim.ID, NodeID: n.ID, JobID: low.ID, Namespace: low.Namespace,
		PreemptedByAllocation: place.ID}}
	res, err := s.applyPlan(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NodePreemptions[n.ID]) != 1 {
		t.Fatalf("preemption dropped: %+v", res)
	}
	v, _ := s.State().AllocByID(nil, victim.ID)
	if v.DesiredStatus != structs.AllocDesiredStatusEvict || v.DesiredDescription != "Preempted by alloc ID "+place.ID {
		t.Fatalf("victim = %q %q", v.DesiredStatus, v.DesiredDescription)
	}
	evals, _ := s.State().EvalsByJob(nil, low.Namespace, low.ID)
	var found bool
	for _, e := range evals {
		if e.TriggeredBy == structs.EvalTriggerPreemption {
			found = true
		}
	}
	if !found {
		t.Fatalf("no preemption eval for the preempted job: %d evals", len(evals))
	}
}

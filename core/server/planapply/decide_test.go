package planapply

import (
	"slices"
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
			fit, reason := evaluateNode(p.snapshot(), plan, nodeID)
			if fit != tc.fit || reason != tc.reason {
				t.Fatalf("evaluateNode = (%v, %q), want (%v, %q)", fit, reason, tc.fit, tc.reason)
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
	res, reasons := Evaluate(snap, plan)
	if !slices.Equal(res.RejectedNodes, []string{full.ID}) {
		t.Fatalf("rejected = %v, want [%s]", res.RejectedNodes, full.ID)
	}
	if len(reasons) != 1 || reasons[full.ID] != "cpu exhausted" {
		t.Fatalf("reasons = %v, want the full node's cpu exhausted", reasons)
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

// evaluatePlan is Evaluate without the reasons.
func evaluatePlan(snap State, plan *structs.Plan) *structs.PlanResult {
	r, _ := Evaluate(snap, plan)
	return r
}

// seedJob stores another job (after mut) and returns it as stored.
func (p *planStore) seedJob(id string, mut func(*structs.Job)) *structs.Job {
	p.t.Helper()
	job := testJob(id, "sysbatch")
	job.Canonicalize()
	if mut != nil {
		mut(job)
	}
	p.idx++
	if err := p.st.UpsertJob(p.idx, job); err != nil {
		p.t.Fatal(err)
	}
	stored, _ := p.st.JobByID(nil, job.Namespace, job.ID)
	return stored
}

// allocOf stores a running alloc of job on node.
func (p *planStore) allocOf(job *structs.Job, node *structs.Node, cpu, mem int64) *structs.Allocation {
	p.t.Helper()
	a := newPlanAlloc(job, node.ID, cpu, mem)
	a.Job = job
	a.ClientStatus = structs.AllocClientStatusRunning
	p.idx++
	if err := p.st.UpsertAllocs(p.idx, []*structs.Allocation{a}); err != nil {
		p.t.Fatal(err)
	}
	return a
}

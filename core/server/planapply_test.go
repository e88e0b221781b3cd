package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

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
	res, err := s.plans.Apply(ctx, plan)
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
	res, err = s.plans.Apply(ctx, noop)
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
	if _, err := s.plans.Apply(ctx, nojob); err == nil || !strings.Contains(err.Error(), "has no job") {
		t.Fatalf("placing plan without job: %v", err)
	}
	stopOnly := newPlan(stored)
	stopOnly.Job = nil
	stopOnly.NodeUpdate[good.ID] = []*structs.Allocation{stopOf(place, "")}
	res, err = s.plans.Apply(ctx, stopOnly)
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
	res, err := s.plans.Apply(context.Background(), plan)
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

package nodesched

import (
	"fmt"
	"slices"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Builders for engine tests. Scenario-level behaviour is covered by the
// golden files of the two plugins; these tests pin single rules.

const testIndex = 20

func tNode(id string, mut ...func(*schedulerpb.Node)) *schedulerpb.Node {
	n := &schedulerpb.Node{
		Id: id, Name: "host-" + id, Datacenter: "dc1", NodePool: "default", ComputedClass: "c1",
		Status: "ready", Eligible: true, Attributes: map[string]string{"kernel.name": "linux"},
		Drivers:  []string{"exec"},
		Capacity: &schedulerpb.Resources{Cpu: 1000, MemoryMb: 1024, DiskMb: 10000},
		Used:     &schedulerpb.Resources{},
	}
	for _, m := range mut {
		m(n)
	}
	return n
}

func tJob(typ string, mut ...func(*schedulerpb.Job)) *schedulerpb.Job {
	j := &schedulerpb.Job{
		Id: "j", Name: "j", Namespace: "default", Type: typ, Priority: 50, Datacenters: []string{"dc1"},
		NodePool: "default", JobModifyIndex: testIndex,
		Constraints: []*schedulerpb.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}},
		TaskGroups: []*schedulerpb.TaskGroup{{
			Name: "g", Count: 1, EphemeralDiskMb: 100,
			Tasks: []*schedulerpb.Task{{Name: "t", Driver: "exec", ConfigJson: []byte(`{"v":1}`),
				Resources: &schedulerpb.Resources{Cpu: 400, MemoryMb: 256}}},
		}},
	}
	for _, m := range mut {
		m(j)
	}
	return j
}

// tOld is the job at an older index with a different task config, so that
// moving to the current job is destructive.
func tOld(j *schedulerpb.Job, destructive bool) *schedulerpb.Job {
	o := tJob(j.GetType())
	o.JobModifyIndex = 10
	if destructive {
		o.TaskGroups[0].Tasks[0].ConfigJson = []byte(`{"v":0}`)
	} else {
		o.Priority = 40
	}
	return o
}

func tAlloc(id, node string, mut ...func(*schedulerpb.Allocation)) *schedulerpb.Allocation {
	a := &schedulerpb.Allocation{
		Id: id, Name: "j.g[0]", NodeId: node, TaskGroup: "g", JobId: "j", Namespace: "default",
		JobModifyIndex: testIndex, DesiredStatus: "run", ClientStatus: "running",
		Resources: &schedulerpb.Resources{Cpu: 400, MemoryMb: 256, DiskMb: 100}, CreateIndex: 21,
	}
	for _, m := range mut {
		m(a)
	}
	return a
}

func tReq(job *schedulerpb.Job, nodes []*schedulerpb.Node, allocs ...*schedulerpb.Allocation) *schedulerpb.ScheduleRequest {
	typ := "sysbatch"
	if job != nil {
		typ = job.GetType()
	}
	return &schedulerpb.ScheduleRequest{
		Eval:    &schedulerpb.Evaluation{Id: "e1", Namespace: "default", Type: typ, TriggeredBy: TriggerJobRegister, JobId: "j"},
		Job:     job,
		Nodes:   nodes,
		Allocs:  allocs,
		Attempt: 1,
	}
}

func sysbatchEngine() *Engine {
	return New(Options{Sysbatch: true, PreemptionEnabled: SysbatchPreemption})
}
func systemEngine() *Engine { return New(Options{PreemptionEnabled: SystemPreemption}) }

func runEngine(t *testing.T, e *Engine, req *schedulerpb.ScheduleRequest) *Outcome {
	t.Helper()
	out, err := e.Run(req)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// placed renders placements as "node/name<-previous".
func placed(out *Outcome) []string {
	var s []string
	for _, p := range out.Response.GetPlan().GetNodeAllocation() {
		x := p.GetNodeId() + "/" + p.GetName()
		if p.GetInPlace() {
			x += " in-place"
		}
		if p.GetPreviousAllocation() != "" {
			x += "<-" + p.GetPreviousAllocation()
		}
		if p.GetClientStatus() != "" {
			x += " " + p.GetClientStatus()
		}
		s = append(s, x)
	}
	return s
}

// stopped renders stops as "alloc:description[:client status]".
func stopped(out *Outcome) []string {
	var s []string
	for _, u := range out.Response.GetPlan().GetNodeUpdate() {
		x := u.GetAllocId() + ":" + u.GetDesiredDescription()
		if u.GetClientStatus() != "" {
			x += ":" + u.GetClientStatus()
		}
		s = append(s, x)
	}
	return s
}

func blockedOn(out *Outcome) []string {
	var s []string
	for _, b := range out.Response.GetBlockedEvals() {
		s = append(s, b.GetNodeId())
	}
	return s
}

func expect(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func expectQueued(t *testing.T, out *Outcome, want map[string]int32) {
	t.Helper()
	got := out.Response.GetQueuedAllocations()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("queued = %v, want %v", got, want)
	}
}

package nodesched

import (
	"fmt"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// bigRequest is a fresh sysbatch job of one group on n ready nodes, with a
// job constraint and an attribute every node passes, the common shape.
func bigRequest(n int) *schedulerpb.ScheduleRequest {
	nodes := make([]*schedulerpb.Node, n)
	for i := range nodes {
		nodes[i] = &schedulerpb.Node{
			Id:            fmt.Sprintf("%08x-0000-4000-8000-000000000000", i),
			Name:          fmt.Sprintf("node-%d", i),
			Datacenter:    fmt.Sprintf("dc%d", i%3),
			NodePool:      "default",
			ComputedClass: fmt.Sprintf("v1:%d", i%7),
			Status:        "ready",
			Eligible:      true,
			Attributes:    map[string]string{"kernel.name": "linux", "os.version": "22.04"},
			Drivers:       []string{"exec", "raw_exec"},
			Capacity:      &schedulerpb.Resources{Cpu: 4000, MemoryMb: 8192, DiskMb: 100000},
			Used:          &schedulerpb.Resources{Cpu: 500, MemoryMb: 1024},
		}
	}
	return &schedulerpb.ScheduleRequest{
		Eval: &schedulerpb.Evaluation{Id: "bench-eval", Namespace: "default", Priority: 50,
			Type: "sysbatch", TriggeredBy: TriggerJobRegister, JobId: "bench", JobModifyIndex: 10},
		Job: &schedulerpb.Job{
			Id: "bench", Name: "bench", Namespace: "default", Type: "sysbatch", Priority: 50,
			Datacenters: []string{"dc*"}, NodePool: "default", JobModifyIndex: 10,
			Constraints: []*schedulerpb.Constraint{
				{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"},
				{LTarget: "${attr.os.version}", Operand: "version", RTarget: ">= 20.04"},
			},
			TaskGroups: []*schedulerpb.TaskGroup{{
				Name: "g", Count: 1, EphemeralDiskMb: 300,
				Tasks: []*schedulerpb.Task{{Name: "t", Driver: "exec",
					Resources: &schedulerpb.Resources{Cpu: 100, MemoryMb: 128}}},
			}},
		},
		Nodes:   nodes,
		Attempt: 1,
	}
}

func BenchmarkSysbatch10k(b *testing.B) {
	req := bigRequest(10_000)
	e := New(Options{Sysbatch: true, PreemptionEnabled: SysbatchPreemption})
	b.ReportAllocs()
	for b.Loop() {
		resp, err := e.Schedule(req)
		if err != nil {
			b.Fatal(err)
		}
		if got := len(resp.GetPlan().GetNodeAllocation()); got != 10_000 {
			b.Fatalf("placed %d, want 10000", got)
		}
	}
}

// BenchmarkSysbatch10kSteady re-evaluates the same job once every node
// already finished its allocation: the reconcile path, nothing to place.
func BenchmarkSysbatch10kSteady(b *testing.B) {
	req := bigRequest(10_000)
	for _, n := range req.GetNodes() {
		req.Allocs = append(req.Allocs, &schedulerpb.Allocation{
			Id: "a-" + n.GetId(), Name: "bench.g[0]", NodeId: n.GetId(), TaskGroup: "g", JobId: "bench",
			JobModifyIndex: 10, DesiredStatus: "run", ClientStatus: "complete", RanSuccessfully: true,
		})
	}
	e := New(Options{Sysbatch: true, PreemptionEnabled: SysbatchPreemption})
	b.ReportAllocs()
	for b.Loop() {
		resp, err := e.Schedule(req)
		if err != nil {
			b.Fatal(err)
		}
		if got := resp.GetPlan().GetDesiredTgUpdates()["g"].GetIgnore(); got != 10_000 {
			b.Fatalf("ignored %d, want 10000", got)
		}
	}
}

package service

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// benchRequest is a fresh service job of count allocs (100 MHz, 256 MB
// each) over nodes empty simulated nodes of 4000 MHz and 8192 MB.
func benchRequest(count, nodes int) *schedulerpb.ScheduleRequest {
	req := &schedulerpb.ScheduleRequest{
		Eval: &schedulerpb.Evaluation{Id: "0b5c1c3e-6b0d-4e52-9a57-bench0000001", Namespace: "default", Priority: 50,
			Type: JobType, TriggeredBy: "job-register", JobId: "bench", JobModifyIndex: 10, Status: "pending"},
		Job: &schedulerpb.Job{Id: "bench", Name: "bench", Namespace: "default", Type: JobType, Priority: 50,
			Datacenters: []string{"*"}, NodePool: "default", JobModifyIndex: 10,
			Constraints: []*schedulerpb.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}},
			TaskGroups: []*schedulerpb.TaskGroup{{Name: "web", Count: int32(count), Tasks: []*schedulerpb.Task{{
				Name: "main", Driver: "raw_exec", ConfigJson: []byte(`{"command":"sleep"}`),
				Resources: &schedulerpb.Resources{Cpu: 100, MemoryMb: 256},
			}}}}},
		Attempt: 1,
	}
	for i := range nodes {
		req.Nodes = append(req.Nodes, &schedulerpb.Node{
			Id: fmt.Sprintf("node-%05d", i), Name: fmt.Sprintf("sim-%05d", i), Datacenter: fmt.Sprintf("dc%d", i%3+1),
			NodePool: "default", ComputedClass: "v1:sim", Status: "ready", Eligible: true, Drivers: []string{"raw_exec"},
			Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": fmt.Sprintf("sim-%05d", i)},
			Capacity:   &schedulerpb.Resources{Cpu: 4000, MemoryMb: 8192, DiskMb: 100000},
			Used:       &schedulerpb.Resources{},
		})
	}
	return req
}

// BenchmarkServicePlace places a service job of count 10,000 over 1,000
// simulated nodes through the plugin protocol (the request and response
// marshalled over an in-memory gRPC connection, conformance.Connect) and
// reports placements per second and the bin-packing quality: the nodes
// used against the lower bound ceil(total ask / node capacity) in the
// scarcer dimension (memory: 10,000 x 256 MB over 8,192 MB nodes = 313).
func BenchmarkServicePlace(b *testing.B) {
	const count, nodes = 10000, 1000
	s := conformance.Connect(b, New())
	req := benchRequest(count, nodes)
	lower := (count*256 + 8191) / 8192
	var used int
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		resp, err := s.Schedule(b.Context(), req)
		elapsed += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		placed := resp.GetPlan().GetNodeAllocation()
		if len(placed) != count || len(resp.GetFailedTgAllocs()) != 0 {
			b.Fatalf("placed %d of %d; failed %v", len(placed), count, resp.GetFailedTgAllocs())
		}
		on := map[string]bool{}
		for _, p := range placed {
			on[p.GetNodeId()] = true
		}
		used = len(on)
	}
	b.ReportMetric(float64(count*b.N)/elapsed.Seconds(), "placements/s")
	b.ReportMetric(float64(used), "nodes-used")
	b.ReportMetric(float64(lower), "nodes-lower-bound")
}

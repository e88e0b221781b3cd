package service

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

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

// BenchmarkServiceRollingUpdate rolls a service job of 1,000 running
// allocations over 250 simulated nodes to a destructively changed version
// with update.max_parallel 50, through the plugin protocol. Between
// evaluations it plays the core and the clients: the plan is applied
// (stops marked, placements added as pending), then every client reports
// (stopped allocations complete, new ones running), and the next
// evaluation (rolling-update) runs. It reports the evaluations and the
// non-empty plans the rollout took, the time spent in the plugin per
// rollout, and fails if any evaluation replaced more than 50.
func BenchmarkServiceRollingUpdate(b *testing.B) {
	const count, nodes, maxParallel = 1000, 250, 50
	s := conformance.Connect(b, New())
	var evals, plans int
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		sim := newRollout(count, nodes, maxParallel)
		b.StartTimer()
		evals, plans = 0, 0
		for !sim.done() {
			if evals > 10*count/maxParallel {
				b.Fatalf("no end to the rollout after %d evals: %d of %d at the new version", evals, sim.current(), count)
			}
			req := sim.request(evals)
			start := time.Now()
			resp, err := s.Schedule(b.Context(), req)
			elapsed += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			evals++
			b.StopTimer()
			if n := len(resp.GetPlan().GetNodeUpdate()); n > maxParallel {
				b.Fatalf("eval %d stopped %d allocations; update.max_parallel is %d", evals, n, maxParallel)
			}
			if len(resp.GetPlan().GetNodeUpdate())+len(resp.GetPlan().GetNodeAllocation()) > 0 {
				plans++
			}
			if len(resp.GetFailedTgAllocs()) > 0 {
				b.Fatalf("eval %d failed placements: %v", evals, resp.GetFailedTgAllocs())
			}
			sim.apply(resp.GetPlan())
			sim.clientsReport()
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(evals), "evals/rollout")
	b.ReportMetric(float64(plans), "plans/rollout")
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "plugin-s/rollout")
}

// rollout is the simulated state of one rolling update: the nodes, the
// allocations, the old and the new job.
type rollout struct {
	oldJob, job *schedulerpb.Job
	nodes       []*schedulerpb.Node
	allocs      []*schedulerpb.Allocation
	index       uint64
}

func newRollout(count, nodes, maxParallel int) *rollout {
	base := benchRequest(count, nodes)
	r := &rollout{oldJob: base.GetJob(), nodes: base.GetNodes(), index: 100}
	r.job = proto.Clone(r.oldJob).(*schedulerpb.Job)
	r.job.JobModifyIndex, r.job.Version = 20, 1
	r.job.UpdateMaxParallel = int32(maxParallel)
	r.job.GetTaskGroups()[0].GetTasks()[0].ConfigJson = []byte(`{"command":"sleep","args":["2"]}`)
	for i := range count {
		r.index++
		r.allocs = append(r.allocs, &schedulerpb.Allocation{
			Id: fmt.Sprintf("old-%05d", i), Name: fmt.Sprintf("bench.web[%d]", i), NodeId: r.nodes[i%nodes].GetId(),
			TaskGroup: "web", JobId: "bench", Namespace: "default", JobModifyIndex: r.oldJob.GetJobModifyIndex(),
			DesiredStatus: "run", ClientStatus: "running", Resources: &schedulerpb.Resources{Cpu: 100, MemoryMb: 256},
			CreateIndex: r.index, ModifyIndex: r.index,
		})
	}
	return r
}

// request is the request of the evaluation after n others, with each
// node's usage as the live allocations leave it.
func (r *rollout) request(n int) *schedulerpb.ScheduleRequest {
	used := map[string]*schedulerpb.Resources{}
	for _, a := range r.allocs {
		if a.GetDesiredStatus() != "run" || a.GetClientStatus() == "complete" {
			continue
		}
		u := used[a.GetNodeId()]
		if u == nil {
			u = &schedulerpb.Resources{}
			used[a.GetNodeId()] = u
		}
		u.Cpu += a.GetResources().GetCpu()
		u.MemoryMb += a.GetResources().GetMemoryMb()
	}
	for _, nd := range r.nodes {
		nd.Used = used[nd.GetId()]
		if nd.Used == nil {
			nd.Used = &schedulerpb.Resources{}
		}
	}
	trigger := "job-register"
	if n > 0 {
		trigger = "rolling-update"
	}
	return &schedulerpb.ScheduleRequest{
		Eval: &schedulerpb.Evaluation{Id: fmt.Sprintf("0b5c1c3e-6b0d-4e52-9a57-%012d", n), Namespace: "default", Priority: 50,
			Type: JobType, TriggeredBy: trigger, JobId: "bench", JobModifyIndex: r.job.GetJobModifyIndex(), Status: "pending"},
		Job: r.job, Nodes: r.nodes, Allocs: r.allocs, JobVersions: []*schedulerpb.Job{r.oldJob}, Attempt: 1,
	}
}

// apply commits a plan as the core would: stops marked, in-place updates
// moved to the new version, placements added as pending.
func (r *rollout) apply(p *schedulerpb.Plan) {
	r.index++
	byID := make(map[string]*schedulerpb.Allocation, len(r.allocs))
	for _, a := range r.allocs {
		byID[a.GetId()] = a
	}
	for _, st := range p.GetNodeUpdate() {
		if a := byID[st.GetAllocId()]; a != nil {
			a.DesiredStatus, a.ModifyIndex = "stop", r.index
		}
	}
	for _, pa := range p.GetNodeAllocation() {
		if a := byID[pa.GetId()]; a != nil && pa.GetInPlace() {
			a.JobModifyIndex, a.ModifyIndex = r.job.GetJobModifyIndex(), r.index
			continue
		}
		r.allocs = append(r.allocs, &schedulerpb.Allocation{
			Id: pa.GetId(), Name: pa.GetName(), NodeId: pa.GetNodeId(), TaskGroup: pa.GetTaskGroup(), JobId: "bench",
			Namespace: "default", JobModifyIndex: r.job.GetJobModifyIndex(), JobVersion: r.job.GetVersion(),
			DesiredStatus: "run", ClientStatus: "pending", Resources: &schedulerpb.Resources{Cpu: 100, MemoryMb: 256},
			CreateIndex: r.index, ModifyIndex: r.index,
		})
	}
}

// clientsReport plays every client: stopped allocations end, pending ones
// run.
func (r *rollout) clientsReport() {
	for _, a := range r.allocs {
		switch {
		case a.GetDesiredStatus() == "stop" && a.GetClientStatus() == "running":
			a.ClientStatus = "complete"
		case a.GetDesiredStatus() == "run" && a.GetClientStatus() == "pending":
			a.ClientStatus = "running"
		}
	}
}

// current counts the allocations wanted and running at the new version.
func (r *rollout) current() int {
	n := 0
	for _, a := range r.allocs {
		if a.GetDesiredStatus() == "run" && a.GetClientStatus() == "running" && a.GetJobModifyIndex() == r.job.GetJobModifyIndex() {
			n++
		}
	}
	return n
}

// done reports that every wanted allocation runs the new version.
func (r *rollout) done() bool {
	wanted := 0
	for _, a := range r.allocs {
		if a.GetDesiredStatus() == "run" {
			wanted++
		}
	}
	return wanted == len(r.job.GetTaskGroups())*int(r.job.GetTaskGroups()[0].GetCount()) && r.current() == wanted
}

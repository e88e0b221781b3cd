package conformance_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// countSched is a minimal count-based scheduler (a "service" type without
// deployments), enough to show the kit holds a type that is not per node
// to its count: each group's count in total, spread over the nodes with
// room, lost and migrating allocations replaced elsewhere.
type countSched struct{}

func (countSched) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{Name: "count", Version: "test", JobTypes: []*schedulerpb.JobTypeInfo{
		{Name: "service", MaxAttempts: 3},
	}}, nil
}

func (countSched) Schedule(_ context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	job := req.GetJob()
	plan := &schedulerpb.Plan{}
	resp := &schedulerpb.ScheduleResponse{Plan: plan, QueuedAllocations: map[string]int32{}, FailedTgAllocs: map[string]*schedulerpb.AllocMetric{}}
	nodes := map[string]*schedulerpb.Node{}
	free := map[string][2]int64{}
	for _, n := range req.GetNodes() {
		nodes[n.GetId()] = n
		free[n.GetId()] = [2]int64{n.GetCapacity().GetCpu() - n.GetUsed().GetCpu(), n.GetCapacity().GetMemoryMb() - n.GetUsed().GetMemoryMb()}
	}
	versions := map[uint64]*schedulerpb.Job{}
	for _, v := range req.GetJobVersions() {
		versions[v.GetJobModifyIndex()] = v
	}
	group := func(j *schedulerpb.Job, name string) *schedulerpb.TaskGroup {
		for _, tg := range j.GetTaskGroups() {
			if tg.GetName() == name {
				return tg
			}
		}
		return nil
	}
	ports := feasible.NewPorts(req) // the sdk's port book, as a third-party plugin would use it
	stop := func(a *schedulerpb.Allocation, why, status string) {
		plan.NodeUpdate = append(plan.NodeUpdate, &schedulerpb.AllocStop{AllocId: a.GetId(), NodeId: a.GetNodeId(), DesiredDescription: why, ClientStatus: status})
		ports.Release(a.GetId())
		f := free[a.GetNodeId()]
		free[a.GetNodeId()] = [2]int64{f[0] + a.GetResources().GetCpu(), f[1] + a.GetResources().GetMemoryMb()}
	}
	kept := map[string]bool{} // names still running
	for _, a := range req.GetAllocs() {
		if a.GetDesiredStatus() != "run" || slices.Contains([]string{"complete", "failed", "lost"}, a.GetClientStatus()) {
			continue
		}
		tg := group(job, a.GetTaskGroup())
		n := nodes[a.GetNodeId()]
		switch {
		case job == nil || job.GetStop() || tg == nil:
			stop(a, "alloc not needed", "")
		case n == nil || n.GetStatus() == "down":
			stop(a, "alloc is lost since its node is down", "lost")
		case a.GetMigrate():
			stop(a, "alloc is being migrated", "")
		case a.GetJobModifyIndex() != job.GetJobModifyIndex():
			old := group(versions[a.GetJobModifyIndex()], tg.GetName())
			if old == nil || !proto.Equal(&schedulerpb.TaskGroup{Tasks: old.GetTasks()}, &schedulerpb.TaskGroup{Tasks: tg.GetTasks()}) {
				stop(a, "alloc is being updated due to job update", "")
				continue
			}
			plan.NodeAllocation = append(plan.NodeAllocation, &schedulerpb.PlacedAlloc{
				Id: a.GetId(), Name: a.GetName(), NodeId: a.GetNodeId(), NodeName: a.GetNodeName(),
				TaskGroup: tg.GetName(), TaskResources: taskResources(tg), InPlace: true, Ports: ports.Of(a.GetId()),
			})
			kept[a.GetName()] = true
		default:
			kept[a.GetName()] = true
		}
	}
	if job == nil || job.GetStop() {
		return resp, nil
	}
	ids := slices.Sorted(maps.Keys(nodes))
	placed, next := 0, 0
	for _, tg := range job.GetTaskGroups() {
		var cpu, mem int64
		for _, t := range tg.GetTasks() {
			cpu, mem = cpu+t.GetResources().GetCpu(), mem+t.GetResources().GetMemoryMb()
		}
		for i := range int(tg.GetCount()) {
			name := fmt.Sprintf("%s.%s[%d]", job.GetId(), tg.GetName(), i)
			if kept[name] {
				continue
			}
			if m := req.GetMaxPlacements(); m != 0 && placed >= int(max(m, 0)) {
				resp.QueuedAllocations[tg.GetName()]++
				continue
			}
			var node *schedulerpb.Node
			var held []*schedulerpb.AllocatedPort
			for k := range ids {
				n := nodes[ids[(next+k)%len(ids)]]
				f := free[n.GetId()]
				if n.GetStatus() == "ready" && n.GetEligible() && !n.GetDraining() && f[0] >= cpu && f[1] >= mem {
					p, dim := ports.Pick(n, feasible.GroupPorts(tg), name)
					if dim != "" {
						continue
					}
					node, held, next = n, p, (next+k+1)%len(ids)
					break
				}
			}
			if node == nil {
				resp.QueuedAllocations[tg.GetName()]++
				resp.FailedTgAllocs[tg.GetName()] = &schedulerpb.AllocMetric{NodesEvaluated: int32(len(ids))}
				continue
			}
			f := free[node.GetId()]
			free[node.GetId()] = [2]int64{f[0] - cpu, f[1] - mem}
			sum := sha256.Sum256([]byte(fmt.Sprint(req.GetEval().GetId(), req.GetAttempt(), name)))
			plan.NodeAllocation = append(plan.NodeAllocation, &schedulerpb.PlacedAlloc{
				Id: fmt.Sprintf("%x", sum[:16]), Name: name, NodeId: node.GetId(), NodeName: node.GetName(),
				TaskGroup: tg.GetName(), TaskResources: taskResources(tg), SharedDiskMb: tg.GetEphemeralDiskMb(), Ports: held,
			})
			ports.Hold(node, held)
			placed++
		}
	}
	if len(resp.FailedTgAllocs) > 0 {
		resp.BlockedEvals = []*schedulerpb.BlockedEval{{}}
	}
	return resp, nil
}

func taskResources(tg *schedulerpb.TaskGroup) map[string]*schedulerpb.Resources {
	out := map[string]*schedulerpb.Resources{}
	for _, t := range tg.GetTasks() {
		out[t.GetName()] = proto.Clone(t.GetResources()).(*schedulerpb.Resources)
	}
	return out
}

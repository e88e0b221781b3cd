package oneshot

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/schedulertest"
)

// Node IDs of schedulertest.Request: three ready nodes.
const (
	node1 = "00000000-0000-0000-0000-000000000001"
	node2 = "00000000-0000-0000-0000-000000000002"
	node3 = "00000000-0000-0000-0000-000000000003"
)

// alloc is an allocation of the request's job (group "group") at version
// jobIndex (the request's job is at 10).
func alloc(id string, index int, node, desired, client string, jobIndex uint64) *schedulerpb.Allocation {
	return &schedulerpb.Allocation{
		Id: id, Name: fmt.Sprintf("conformance.group[%d]", index), NodeId: node, TaskGroup: "group",
		JobId: "conformance", Namespace: "default", JobModifyIndex: jobIndex,
		DesiredStatus: desired, ClientStatus: client, RanSuccessfully: client == "complete",
		Resources: &schedulerpb.Resources{Cpu: 100, MemoryMb: 64},
	}
}

type stop struct{ desc, clientStatus string }

func TestSchedule(t *testing.T) {
	cases := []struct {
		name  string
		setup func(r *schedulerpb.ScheduleRequest)
		// place maps each allocation name placed to the allocation it
		// replaces ("" for none).
		place   map[string]string
		stops   map[string]stop
		queued  int32
		failed  bool // the group reports a placement failure and the eval blocks
		nodeSet int  // distinct nodes the placements use (0: not checked)
	}{{
		name:    "a new job places count allocations on distinct nodes",
		setup:   func(*schedulerpb.ScheduleRequest) {},
		place:   map[string]string{"conformance.group[0]": "", "conformance.group[1]": ""},
		queued:  2,
		nodeSet: 2,
	}, {
		name: "completed allocations are never placed again, not even for a new version",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Allocs = []*schedulerpb.Allocation{
				alloc("done-0", 0, node1, "run", "complete", 9),
				alloc("done-1", 1, node2, "run", "complete", 10),
			}
			r.Nodes[0].Status = "down" // a finished alloc on a down node is not lost
		},
	}, {
		name: "a failed allocation stays failed under its own version",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Allocs = []*schedulerpb.Allocation{
				alloc("failed-0", 0, node1, "run", "failed", 10),
				alloc("running-1", 1, node2, "run", "running", 10),
			}
		},
	}, {
		name: "a new version stops and replaces live and failed allocations of the old one",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Allocs = []*schedulerpb.Allocation{
				alloc("failed-0", 0, node1, "run", "failed", 9),
				alloc("running-1", 1, node2, "run", "running", 9),
			}
		},
		place:  map[string]string{"conformance.group[0]": "failed-0", "conformance.group[1]": "running-1"},
		stops:  map[string]stop{"running-1": {descUpdated, ""}},
		queued: 2,
	}, {
		name: "a stopped job has its live allocations stopped",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Job.Stop = true
			r.Allocs = []*schedulerpb.Allocation{
				alloc("running-0", 0, node1, "run", "running", 10),
				alloc("done-1", 1, node2, "run", "complete", 10),
			}
		},
		stops: map[string]stop{"running-0": {descJobStopped, ""}},
	}, {
		name: "a purged job has its live allocations stopped",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Job = nil
			r.Eval.TriggeredBy = "job-deregister"
			r.Allocs = []*schedulerpb.Allocation{alloc("pending-0", 0, node1, "run", "pending", 10)}
		},
		stops: map[string]stop{"pending-0": {descJobStopped, ""}},
	}, {
		name: "an allocation on a down node is lost and placed again",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Eval.TriggeredBy = "node-update"
			r.Nodes[0].Status = "down"
			r.Allocs = []*schedulerpb.Allocation{
				alloc("running-0", 0, node1, "run", "running", 10),
				alloc("running-1", 1, node2, "run", "running", 10),
			}
		},
		place:  map[string]string{"conformance.group[0]": "running-0"},
		stops:  map[string]stop{"running-0": {descLost, "lost"}},
		queued: 1,
	}, {
		name: "an allocation marked for migration is stopped and placed again",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Allocs = []*schedulerpb.Allocation{alloc("running-0", 0, node1, "run", "running", 10)}
			r.Allocs[0].Migrate = true
		},
		place:  map[string]string{"conformance.group[0]": "running-0", "conformance.group[1]": ""},
		stops:  map[string]stop{"running-0": {descMigrated, ""}},
		queued: 2,
	}, {
		name: "a lowered count stops the allocations past it",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Job.TaskGroups[0].Count = 1
			r.Allocs = []*schedulerpb.Allocation{
				alloc("running-0", 0, node1, "run", "running", 10),
				alloc("running-1", 1, node2, "run", "running", 10),
			}
		},
		stops: map[string]stop{"running-1": {descNotNeeded, ""}},
	}, {
		name:   "max_placements leaves the rest queued for a follow-up eval",
		setup:  func(r *schedulerpb.ScheduleRequest) { r.MaxPlacements = 1 },
		place:  map[string]string{"conformance.group[0]": ""},
		queued: 2,
	}, {
		name: "no node with the driver: the group fails and the eval blocks",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Job.TaskGroups[0].Tasks[0].Driver = "docker"
		},
		queued: 2,
		failed: true,
	}, {
		name: "no node with room: the group fails and the eval blocks",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Job.TaskGroups[0].Tasks[0].Resources.Cpu = 5000
		},
		queued: 2,
		failed: true,
	}, {
		name: "one node with room for one: one placed, one failed",
		setup: func(r *schedulerpb.ScheduleRequest) {
			r.Nodes = r.Nodes[:1]
			r.Job.TaskGroups[0].Tasks[0].Resources.Cpu = 3000
		},
		place:  map[string]string{"conformance.group[0]": ""},
		queued: 2,
		failed: true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := schedulertest.Request(JobType)
			tc.setup(req)
			resp, err := New("test").Schedule(t.Context(), req)
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			place := map[string]string{}
			nodes := map[string]bool{}
			for _, pa := range resp.GetPlan().GetNodeAllocation() {
				if _, dup := place[pa.GetName()]; dup {
					t.Errorf("%s placed twice", pa.GetName())
				}
				place[pa.GetName()] = pa.GetPreviousAllocation()
				nodes[pa.GetNodeId()] = true
			}
			if !maps.Equal(place, tc.place) {
				t.Errorf("placed %v; want %v", place, tc.place)
			}
			if tc.nodeSet > 0 && len(nodes) != tc.nodeSet {
				t.Errorf("placements use %d nodes; want %d (spread)", len(nodes), tc.nodeSet)
			}
			stops := map[string]stop{}
			for _, st := range resp.GetPlan().GetNodeUpdate() {
				stops[st.GetAllocId()] = stop{st.GetDesiredDescription(), st.GetClientStatus()}
			}
			if !maps.Equal(stops, tc.stops) {
				t.Errorf("stopped %v; want %v", stops, tc.stops)
			}
			if got := resp.GetQueuedAllocations()["group"]; got != tc.queued {
				t.Errorf("queued %d; want %d", got, tc.queued)
			}
			f := resp.GetFailedTgAllocs()["group"]
			if (f != nil) != tc.failed || (len(resp.GetBlockedEvals()) == 1) != tc.failed {
				t.Errorf("failed group metric %v, blocked evals %v; want failure %v", f, resp.GetBlockedEvals(), tc.failed)
			}
			if f != nil && f.GetNodesFiltered()+f.GetNodesExhausted() == 0 {
				t.Errorf("failure metric says neither filtered nor exhausted: %v", f)
			}
		})
	}
}

// The same request always yields the same plan, and a different eval
// orders the nodes differently.
func TestScheduleIsSeededByEvalID(t *testing.T) {
	req := schedulertest.Request(JobType)
	req.Job.TaskGroups[0].Count = 1
	s := New("test")
	first, _ := s.Schedule(t.Context(), req)
	again, _ := s.Schedule(t.Context(), proto.Clone(req).(*schedulerpb.ScheduleRequest))
	if !proto.Equal(first, again) {
		t.Fatalf("same request, different responses:\n%v\n%v", first, again)
	}
	var seen []string
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		req.Eval.Id = id
		resp, _ := s.Schedule(t.Context(), req)
		if n := resp.GetPlan().GetNodeAllocation()[0].GetNodeId(); !slices.Contains(seen, n) {
			seen = append(seen, n)
		}
	}
	if len(seen) < 2 {
		t.Errorf("eight evals all picked %v: the order is not seeded by the eval ID", seen)
	}
}

func TestInfoDeclaresARunToCompletionType(t *testing.T) {
	info, err := New("1.2.3").Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.GetName() != Name || info.GetVersion() != "1.2.3" || len(info.GetJobTypes()) != 1 {
		t.Fatalf("Info = %v", info)
	}
	jt := info.GetJobTypes()[0]
	if jt.GetName() != JobType || !jt.GetRunsToCompletion() || !jt.GetAllowPeriodic() || !jt.GetAllowParameterized() ||
		jt.GetEvalOnAllocEnd() || jt.GetPerNode() || jt.GetDefaultRestart().GetMode() != "fail" || jt.GetDefaultRestart().GetAttempts() != 0 {
		t.Errorf("declaration = %v", jt)
	}
}

// The plugin keeps the contract every scheduler plugin shares, over gRPC.
func TestSchedulerContract(t *testing.T) {
	schedulertest.Conformance(t, New("test"))
}

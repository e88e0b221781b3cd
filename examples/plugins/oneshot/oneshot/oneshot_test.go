package oneshot

import (
	"maps"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
	"github.com/drover-org/drover/sdk/scheduler/golden"
)

// cluster is three ready nodes and a new job of group "web", count 2.
func cluster() *conformance.Builder {
	return conformance.NewBuilder(JobType).Nodes(3).Group("web", 2)
}

type stop struct{ desc, clientStatus string }

func TestSchedule(t *testing.T) {
	complete, failed := conformance.ClientStatus("complete"), conformance.ClientStatus("failed")
	cases := []struct {
		name string
		req  *conformance.Builder
		// place maps each allocation name placed to the allocation it
		// replaces ("" for none).
		place   map[string]string
		stops   map[string]stop
		queued  int32
		failed  bool // the group reports a placement failure and the eval blocks
		nodeSet int  // distinct nodes the placements use (0: not checked)
	}{{
		name:    "a new job places count allocations on distinct nodes",
		req:     cluster(),
		place:   map[string]string{"kit.web[0]": "", "kit.web[1]": ""},
		queued:  2,
		nodeSet: 2,
	}, {
		name: "completed allocations are never placed again, not even for a new version",
		req: cluster().Alloc("web", "node-1", 0, complete).Alloc("web", "node-2", 1, complete).
			NewVersion(conformance.DestructiveChange).
			Node("node-1", conformance.Down()), // a finished alloc on a down node is not lost
	}, {
		name: "a failed allocation stays failed under its own version",
		req:  cluster().Alloc("web", "node-1", 0, failed).Alloc("web", "node-2", 1),
	}, {
		name: "a new version stops and replaces live and failed allocations of the old one",
		req: cluster().Alloc("web", "node-1", 0, failed).Alloc("web", "node-2", 1).
			NewVersion(conformance.DestructiveChange),
		place:  map[string]string{"kit.web[0]": "alloc-1", "kit.web[1]": "alloc-2"},
		stops:  map[string]stop{"alloc-2": {descUpdated, ""}},
		queued: 2,
	}, {
		name:  "a stopped job has its live allocations stopped",
		req:   cluster().Alloc("web", "node-1", 0).Alloc("web", "node-2", 1, complete).Stop(),
		stops: map[string]stop{"alloc-1": {descJobStopped, ""}},
	}, {
		name:  "a purged job has its live allocations stopped",
		req:   cluster().Alloc("web", "node-1", 0).Purge(),
		stops: map[string]stop{"alloc-1": {descJobStopped, ""}},
	}, {
		name: "an allocation on a down node is lost and placed again",
		req: cluster().Alloc("web", "node-1", 0).Alloc("web", "node-2", 1).
			Node("node-1", conformance.Down()).Trigger("node-update", "node-1"),
		place:  map[string]string{"kit.web[0]": "alloc-1"},
		stops:  map[string]stop{"alloc-1": {descLost, "lost"}},
		queued: 1,
	}, {
		name:   "an allocation marked for migration is stopped and placed again",
		req:    cluster().Alloc("web", "node-1", 0, conformance.Migrate()),
		place:  map[string]string{"kit.web[0]": "alloc-1", "kit.web[1]": ""},
		stops:  map[string]stop{"alloc-1": {descMigrated, ""}},
		queued: 2,
	}, {
		name:  "a lowered count stops the allocations past it",
		req:   cluster().Alloc("web", "node-1", 0).Alloc("web", "node-2", 1).Group("web", 1),
		stops: map[string]stop{"alloc-2": {descNotNeeded, ""}},
	}, {
		name:   "max_placements leaves the rest queued for a follow-up eval",
		req:    cluster().MaxPlacements(1),
		place:  map[string]string{"kit.web[0]": ""},
		queued: 2,
	}, {
		name: "no node with the driver: the group fails and the eval blocks",
		req: cluster().Edit(func(r *schedulerpb.ScheduleRequest) {
			r.Job.TaskGroups[0].Tasks[0].Driver = "docker"
		}),
		queued: 2,
		failed: true,
	}, {
		name:   "no node with room: the group fails and the eval blocks",
		req:    conformance.NewBuilder(JobType).Node("node-1", conformance.Capacity(50, 1024)).Group("web", 2),
		queued: 2,
		failed: true,
	}, {
		name:   "one node with room for one: one placed, one failed",
		req:    conformance.NewBuilder(JobType).Node("node-1", conformance.Capacity(150, 1024)).Group("web", 2),
		place:  map[string]string{"kit.web[0]": ""},
		queued: 2,
		failed: true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := New("test").Schedule(t.Context(), tc.req.Request())
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
			if got := resp.GetQueuedAllocations()["web"]; got != tc.queued {
				t.Errorf("queued %d; want %d", got, tc.queued)
			}
			f := resp.GetFailedTgAllocs()["web"]
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
	req := cluster().Group("web", 1).Request()
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

// Scenario files in testdata: a request in, the expected response out (see
// package golden; `go test -run Golden -update` rewrites them for review).
func TestGolden(t *testing.T) {
	s := New("test")
	golden.Run(t, "testdata", func(req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
		return s.Schedule(t.Context(), req)
	})
}

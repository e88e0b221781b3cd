package batch

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
	"github.com/drover-org/drover/sdk/scheduler/golden"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestInfo pins the whole declaration: the core reads nothing else about
// the job type. Batch is count-placed, so per_node is false.
func TestInfo(t *testing.T) {
	want := &schedulerpb.InfoResponse{
		Name:    "scheduler-batch",
		Version: "0.1.0",
		JobTypes: []*schedulerpb.JobTypeInfo{{
			Name: "batch", MaxAttempts: 2, PerNode: false,
			RunsToCompletion: true,
			DefaultRestart:   &schedulerpb.RestartPolicy{Attempts: 3, IntervalNs: int64(24 * time.Hour), DelayNs: int64(15 * time.Second), Mode: "fail"},
			// Nomad's batch default: one reschedule in 24h, 5s later.
			DefaultReschedule: &schedulerpb.ReschedulePolicy{
				Attempts: 1, IntervalNs: int64(24 * time.Hour), DelayNs: int64(5 * time.Second), DelayFunction: "constant",
			},
			AllowPeriodic:         true,
			AllowParameterized:    true,
			AllowMaxRunDuration:   true,
			RefusedBlocks:         []string{"update", "affinity", "spread"},
			EvalOnAllocEnd:        true,
			EvalOnAllocNodeChange: true,
			PreemptionSwitch:      "BatchSchedulerEnabled",
		}},
	}
	got, err := New().Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("Info = %v, want %v", got, want)
	}
}

// TestConformance holds the plugin, over gRPC, to the rules every
// scheduler keeps; as a count-based type it must keep each group's count
// in total.
func TestConformance(t *testing.T) {
	conformance.Run(t, New(), conformance.Options{})
}

// TestGolden runs the scenarios in testdata; see package golden for their
// format and -update. Every response also keeps the conformance kit's
// invariants (the reschedule scenarios' follow-ups among them).
func TestGolden(t *testing.T) {
	s := New()
	target := conformance.Target{JobType: JobType, Info: Declaration()}
	golden.Run(t, "testdata", func(req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
		resp, err := s.Schedule(t.Context(), req)
		if err == nil {
			for _, f := range conformance.Invariants(target, req, resp) {
				t.Errorf("%s: %v", req.GetEval().GetTriggeredBy(), f)
			}
		}
		return resp, err
	})
}

// A canceled context is an error: the core has given up on the attempt.
func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := conformance.NewBuilder(JobType).Nodes(1).Request()
	if _, err := New().Schedule(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("Schedule with a canceled context: err = %v, want context.Canceled", err)
	}
}

func used(cpu, mem int64) func(*schedulerpb.Node) {
	return func(n *schedulerpb.Node) { n.Used = &schedulerpb.Resources{Cpu: cpu, MemoryMb: mem} }
}

// placedOn counts the new (not in-place) placements per node.
func placedOn(resp *schedulerpb.ScheduleResponse) map[string]int {
	out := map[string]int{}
	for _, p := range resp.GetPlan().GetNodeAllocation() {
		if !p.GetInPlace() {
			out[p.GetNodeId()]++
		}
	}
	return out
}

func stopped(resp *schedulerpb.ScheduleResponse) []string {
	var out []string
	for _, s := range resp.GetPlan().GetNodeUpdate() {
		out = append(out, s.GetAllocId())
	}
	slices.Sort(out)
	return out
}

func TestSchedule(t *testing.T) {
	cases := []struct {
		name        string
		req         *schedulerpb.ScheduleRequest
		wantPlaced  map[string]int
		wantStopped []string
		wantFailed  bool
	}{
		{
			// node-2 is the fullest that still fits; node-3 is fuller
			// but has no room for 100 MHz.
			name: "bin-packing picks the fullest feasible node",
			req: conformance.NewBuilder(JobType).
				Node("node-1", used(1000, 1024)).Node("node-2", used(6000, 8192)).Node("node-3", used(7950, 8192)).
				Request(),
			wantPlaced: map[string]int{"node-2": 1},
		},
		{
			// Each alloc makes node-1 fuller still, so all go there.
			name: "bin-packing fills one node before the next",
			req: conformance.NewBuilder(JobType).Nodes(3).Node("node-1", used(100, 0)).
				Group("web", 5).Request(),
			wantPlaced: map[string]int{"node-1": 5},
		},
		{
			name: "a constraint-filtered node is skipped even if fuller",
			req: conformance.NewBuilder(JobType).Nodes(2).Node("node-1", used(4000, 4096)).
				Edit(func(r *schedulerpb.ScheduleRequest) {
					r.Nodes[0].Attributes["kernel.name"] = "windows"
					r.Job.Constraints = []*schedulerpb.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}}
				}).Request(),
			wantPlaced: map[string]int{"node-2": 1},
		},
		{
			name:       "count honoured: only the missing indexes are placed",
			req:        conformance.NewBuilder(JobType).Nodes(2).Group("web", 3).Alloc("web", "node-1", 0).Request(),
			wantPlaced: map[string]int{"node-1": 2},
		},
		{
			name: "completed and failed allocs are not replaced",
			req: conformance.NewBuilder(JobType).Nodes(2).Group("web", 3).
				Alloc("web", "node-1", 0, conformance.ClientStatus("complete")).
				Alloc("web", "node-2", 1, conformance.ClientStatus("complete")).
				Alloc("web", "node-2", 2, conformance.ClientStatus("failed")).Request(),
			wantPlaced: map[string]int{},
		},
		{
			name: "count lowered stops the allocs beyond it",
			req: conformance.NewBuilder(JobType).Nodes(2).Group("web", 3).Running(false).
				Edit(func(r *schedulerpb.ScheduleRequest) { r.Job.TaskGroups[0].Count = 1 }).Request(),
			wantPlaced:  map[string]int{},
			wantStopped: []string{"alloc-2", "alloc-3"},
		},
		{
			name:        "a stopped job stops its allocs",
			req:         conformance.NewBuilder(JobType).Nodes(2).Group("web", 2).Running(false).Stop().Request(),
			wantPlaced:  map[string]int{},
			wantStopped: []string{"alloc-1", "alloc-2"},
		},
		{
			name: "no room: nothing placed, group failed, eval blocked",
			req: conformance.NewBuilder(JobType).Node("node-1", conformance.Capacity(50, 64)).
				Group("web", 2).Request(),
			wantPlaced: map[string]int{},
			wantFailed: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := New().Schedule(t.Context(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := placedOn(resp); !mapsEqual(got, tc.wantPlaced) {
				t.Errorf("placed per node = %v, want %v", got, tc.wantPlaced)
			}
			if got := stopped(resp); !slices.Equal(got, tc.wantStopped) {
				t.Errorf("stopped = %v, want %v", got, tc.wantStopped)
			}
			_, failed := resp.GetFailedTgAllocs()["web"]
			if failed != tc.wantFailed || (len(resp.GetBlockedEvals()) > 0) != tc.wantFailed {
				t.Errorf("failed_tg_allocs = %v, blocked_evals = %v; want failure %v", resp.GetFailedTgAllocs(), resp.GetBlockedEvals(), tc.wantFailed)
			}
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The failure metric says why: one node exhausted on cpu, the rest of the
// group's allocations coalesced into it.
func TestFailureMetric(t *testing.T) {
	req := conformance.NewBuilder(JobType).Node("node-1", conformance.Capacity(50, 64)).Group("web", 3).Request()
	resp, err := New().Schedule(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.GetFailedTgAllocs()["web"]
	if m.GetNodesEvaluated() != 1 || m.GetNodesExhausted() != 1 || m.GetDimensionExhausted()["cpu"] != 1 || m.GetCoalescedFailures() != 2 {
		t.Errorf("metric = %v; want 1 node evaluated and exhausted on cpu, 2 coalesced failures", m)
	}
	if q := resp.GetQueuedAllocations()["web"]; q != 3 {
		t.Errorf("queued = %d, want 3", q)
	}
}

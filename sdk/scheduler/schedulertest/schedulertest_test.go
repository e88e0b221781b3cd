package schedulertest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a configurable scheduler whose knobs each break one rule of the
// contract.
type fake struct {
	name          string
	types         []*schedulerpb.JobTypeInfo
	placeWithout  bool // places even when the job is absent
	nondetermined bool // answers differ call by call
	calls         atomic.Int64
}

func (f *fake) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{Name: f.name, Version: "1", JobTypes: f.types}, nil
}

func (f *fake) Schedule(_ context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	n := f.calls.Add(1)
	plan := &schedulerpb.Plan{}
	if req.GetJob() != nil || f.placeWithout {
		for i, node := range req.GetNodes()[:2] {
			plan.NodeAllocation = append(plan.NodeAllocation, &schedulerpb.PlacedAlloc{
				Id: fmt.Sprintf("alloc-%d", i), NodeId: node.GetId(), TaskGroup: "group",
			})
		}
	}
	resp := &schedulerpb.ScheduleResponse{Plan: plan}
	if f.nondetermined {
		resp.StatusDescription = fmt.Sprint("call ", n)
	}
	return resp, nil
}

func types(names ...string) []*schedulerpb.JobTypeInfo {
	var out []*schedulerpb.JobTypeInfo
	for _, n := range names {
		out = append(out, &schedulerpb.JobTypeInfo{Name: n, MaxAttempts: 3})
	}
	return out
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		impl *fake
		want []string // substrings, one per expected error, in order
	}{
		{"conforming", &fake{name: "ok", types: types("batch", "sysbatch")}, nil},
		{"empty name", &fake{types: types("batch")}, []string{"empty name"}},
		{"no job types", &fake{name: "x"}, []string{"no job types"}},
		{"duplicate type", &fake{name: "x", types: types("batch", "batch")}, []string{`"batch" listed twice`}},
		{"zero max attempts", &fake{name: "x", types: []*schedulerpb.JobTypeInfo{{Name: "batch"}}},
			[]string{"max_attempts 0"}},
		{"places without job", &fake{name: "x", types: types("batch"), placeWithout: true},
			[]string{"placed 2 allocations, want 0"}},
		{"nondeterministic", &fake{name: "x", types: types("batch"), nondetermined: true},
			[]string{"different responses"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := check(t.Context(), Connect(t, tc.impl))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d %q", len(errs), errs, len(tc.want), tc.want)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tc.want[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, err, tc.want[i])
				}
			}
		})
	}
}

func TestConformancePasses(t *testing.T) {
	impl := &fake{name: "ok", types: types("batch")}
	Conformance(t, impl)
	// Info-free checks: one Schedule without a job, two for determinism.
	if got := impl.calls.Load(); got != 3 {
		t.Errorf("Schedule called %d times, want 3", got)
	}
}

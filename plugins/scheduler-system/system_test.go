package system

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/nodesched/goldentest"
	"github.com/drover-org/drover/sdk/scheduler/schedulertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ scheduler.Scheduler = (*Scheduler)(nil)

// TestGolden runs the scenarios in testdata; see package goldentest for
// the format and -update.
func TestGolden(t *testing.T) {
	s := New()
	goldentest.Run(t, "testdata", func(req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
		return s.Schedule(t.Context(), req)
	})
}

func TestInfo(t *testing.T) {
	info, err := New().Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.GetName() != "scheduler-system" || len(info.GetJobTypes()) != 1 {
		t.Fatalf("info = %v", info)
	}
	// System jobs get five scheduling attempts.
	if jt := info.GetJobTypes()[0]; jt.GetName() != "system" || jt.GetMaxAttempts() != 5 {
		t.Fatalf("job type = %v, want system with max_attempts 5", jt)
	}
}

func TestConformance(t *testing.T) {
	schedulertest.Conformance(t, New())
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := New().Schedule(ctx, schedulertest.Request("system")); err == nil {
		t.Fatal("want an error for a canceled context")
	}
}

package system

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
	"github.com/drover-org/drover/sdk/scheduler/golden"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ scheduler.Scheduler = (*Scheduler)(nil)

// TestInfo pins the whole declaration: the core reads nothing else about
// the job type.
func TestInfo(t *testing.T) {
	// System jobs get five scheduling attempts.
	want := &schedulerpb.InfoResponse{
		Name:    "scheduler-system",
		Version: "0.1.0",
		JobTypes: []*schedulerpb.JobTypeInfo{{
			Name: "system", MaxAttempts: 5, PerNode: true,
			RunningUntilStopped: true,
			DefaultRestart:      &schedulerpb.RestartPolicy{Attempts: 2, IntervalNs: int64(30 * time.Minute), DelayNs: int64(15 * time.Second), Mode: "fail"},
			RefusedBlocks:       []string{"affinity", "spread", "reschedule", "migrate"},
			MaxGroupCount:       1,
			EvalOnNodeUpdate:    true,
			EvalOnAllocEnd:      true,
			DrainLast:           true,
			PreemptionSwitch:    "SystemSchedulerEnabled",
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
// scheduler keeps.
func TestConformance(t *testing.T) {
	conformance.Run(t, New(), conformance.Options{})
}

// TestGolden runs the scenarios in testdata; see package golden for their
// format and -update.
func TestGolden(t *testing.T) {
	s := New()
	golden.Run(t, "testdata", func(req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
		return s.Schedule(t.Context(), req)
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

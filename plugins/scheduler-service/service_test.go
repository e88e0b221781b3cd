package service

import (
	"context"
	"errors"
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
// the job type.
func TestInfo(t *testing.T) {
	want := &schedulerpb.InfoResponse{
		Name:    "scheduler-service",
		Version: "0.1.0",
		JobTypes: []*schedulerpb.JobTypeInfo{{
			Name: "service", MaxAttempts: 5,
			DefaultRestart: &schedulerpb.RestartPolicy{Attempts: 2, IntervalNs: int64(30 * time.Minute), DelayNs: int64(15 * time.Second), Mode: "fail"},
			DefaultReschedule: &schedulerpb.ReschedulePolicy{
				DelayNs: int64(30 * time.Second), DelayFunction: "exponential", MaxDelayNs: int64(time.Hour), Unlimited: true,
			},
			EvalOnAllocNodeChange: true,
			EvalOnAllocEnd:        true,
			EvalOnAllocRunning:    true,
			PreemptionSwitch:      "ServiceSchedulerEnabled",
			Deployments:           true,
			DefaultMigrate: &schedulerpb.MigrateStrategy{
				MaxParallel: 1, HealthCheck: "checks", MinHealthyTimeNs: int64(10 * time.Second), HealthyDeadlineNs: int64(5 * time.Minute),
			},
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

// A trigger the scheduler does not know fails the eval with its reason,
// and a request without an eval is an error.
func TestRefusedTriggers(t *testing.T) {
	req := conformance.NewBuilder(JobType).Nodes(1).Trigger("periodic-job", "").Request()
	resp, err := New().Schedule(t.Context(), req)
	if err != nil || resp.GetStatus() != "failed" || resp.GetStatusDescription() != "scheduler cannot handle 'periodic-job' evaluation reason" {
		t.Fatalf("periodic-job: %v %v", resp, err)
	}
	if _, err := New().Schedule(t.Context(), &schedulerpb.ScheduleRequest{}); err == nil {
		t.Fatal("request without eval: no error")
	}
}

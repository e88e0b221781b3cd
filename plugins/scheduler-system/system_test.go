package system

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/nodesched/goldentest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var _ scheduler.Scheduler = (*Scheduler)(nil)

// TestSuite checks Info, the scheduler contract, and the scenarios in
// testdata; see package goldentest for their format and -update.
func TestSuite(t *testing.T) {
	// System jobs get five scheduling attempts.
	goldentest.Suite(t, New(), "testdata", &schedulerpb.InfoResponse{
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
	})
}

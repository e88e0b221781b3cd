package sysbatch

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
	// §10.8: two scheduling attempts at most for sysbatch.
	goldentest.Suite(t, New(), "testdata", &schedulerpb.InfoResponse{
		Name:    "scheduler-sysbatch",
		Version: "0.1.0",
		JobTypes: []*schedulerpb.JobTypeInfo{{
			Name: "sysbatch", MaxAttempts: 2, PerNode: true,
			RunsToCompletion:    true,
			DefaultRestart:      &schedulerpb.RestartPolicy{Attempts: 3, IntervalNs: int64(24 * time.Hour), DelayNs: int64(15 * time.Second), Mode: "fail"},
			AllowPeriodic:       true,
			AllowParameterized:  true,
			AllowMaxRunDuration: true,
			RefusedBlocks:       []string{"update", "reschedule", "migrate"},
			EvalOnNodeJoin:      true,
			PreemptionSwitch:    "SysBatchSchedulerEnabled",
		}},
	})
}

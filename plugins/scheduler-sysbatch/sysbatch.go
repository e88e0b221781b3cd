// Package sysbatch is the sysbatch scheduler plugin: a batch job that runs
// each task group Count times on every feasible, ready node, once. A
// finished allocation (complete or failed) is done and is not re-placed
// while the job is unchanged; a new job version re-runs only where it
// changes the tasks destructively.
package sysbatch

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/nodesched"
)

// Plugin identity and the job type served.
const (
	Name        = "scheduler-sysbatch"
	Version     = "0.1.0"
	JobType     = "sysbatch"
	MaxAttempts = 2
)

// Scheduler is the sysbatch scheduler. It is stateless and safe for
// concurrent use.
type Scheduler struct {
	*nodesched.Plugin // serves Info and Schedule
}

// New returns the sysbatch scheduler. Preemption is off unless the
// operator's scheduler configuration turns it on for sysbatch.
func New() *Scheduler {
	return NewWithLogger(hclog.NewNullLogger())
}

// Declaration is how sysbatch jobs behave once placed: they run to
// completion once on every eligible node, may be periodic or
// parameterized, and reach a node that joins while they still run.
func Declaration() *schedulerpb.JobTypeInfo {
	return &schedulerpb.JobTypeInfo{
		RunsToCompletion: true,
		DefaultRestart: &schedulerpb.RestartPolicy{
			Attempts: 3, IntervalNs: int64(24 * time.Hour), DelayNs: int64(15 * time.Second), Mode: "fail",
		},
		AllowPeriodic:       true,
		AllowParameterized:  true,
		AllowMaxRunDuration: true,
		RefusedBlocks:       []string{"update", "reschedule", "migrate"},
		EvalOnNodeJoin:      true,
		PreemptionSwitch:    "SysBatchSchedulerEnabled",
	}
}

// NewWithLogger returns the sysbatch scheduler logging to l.
func NewWithLogger(l hclog.Logger) *Scheduler {
	id := nodesched.Identity{Name: Name, Version: Version, JobType: JobType, MaxAttempts: MaxAttempts, Declares: Declaration()}
	return &Scheduler{Plugin: nodesched.NewPlugin(id, nodesched.Options{
		Sysbatch:          true,
		PreemptionEnabled: nodesched.SysbatchPreemption,
		Logger:            l.Named(JobType),
	})}
}

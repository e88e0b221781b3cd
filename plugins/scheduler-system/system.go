// Package system is the system scheduler plugin: each task group of a
// system job runs on every feasible, ready node, and keeps running there:
// an allocation that finishes or fails is replaced, chained to its
// predecessor through PreviousAllocation.
package system

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/nodesched"
)

// Plugin identity and the job type served.
const (
	Name        = "scheduler-system"
	Version     = "0.1.0"
	JobType     = "system"
	MaxAttempts = 5
)

// Scheduler is the system scheduler. It is stateless and safe for
// concurrent use.
type Scheduler struct {
	*nodesched.Plugin // serves Info and Schedule
}

// New returns the system scheduler. Preemption is on unless the operator's
// scheduler configuration turns it off for system jobs.
func New() *Scheduler {
	return NewWithLogger(hclog.NewNullLogger())
}

// Declaration is how system jobs behave once placed: they keep running on
// every eligible node until stopped, follow every node change, and are
// evaluated again when one of their allocations ends.
func Declaration() *schedulerpb.JobTypeInfo {
	return &schedulerpb.JobTypeInfo{
		RunningUntilStopped: true,
		DefaultRestart: &schedulerpb.RestartPolicy{
			Attempts: 2, IntervalNs: int64(30 * time.Minute), DelayNs: int64(15 * time.Second), Mode: "fail",
		},
		RefusedBlocks:    []string{"affinity", "spread", "reschedule", "migrate"},
		MaxGroupCount:    1,
		EvalOnNodeUpdate: true,
		EvalOnAllocEnd:   true,
		DrainLast:        true,
		PreemptionSwitch: "SystemSchedulerEnabled",
	}
}

// NewWithLogger returns the system scheduler logging to l.
func NewWithLogger(l hclog.Logger) *Scheduler {
	id := nodesched.Identity{Name: Name, Version: Version, JobType: JobType, MaxAttempts: MaxAttempts, Declares: Declaration()}
	return &Scheduler{Plugin: nodesched.NewPlugin(id, nodesched.Options{
		PreemptionEnabled: nodesched.SystemPreemption,
		Logger:            l.Named(JobType),
	})}
}

// Package system is the system scheduler plugin: each task group of a
// system job runs on every feasible, ready node, and keeps running there:
// an allocation that finishes or fails is replaced, chained to its
// predecessor through PreviousAllocation.
package system

import (
	"github.com/hashicorp/go-hclog"

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

// NewWithLogger returns the system scheduler logging to l.
func NewWithLogger(l hclog.Logger) *Scheduler {
	id := nodesched.Identity{Name: Name, Version: Version, JobType: JobType, MaxAttempts: MaxAttempts}
	return &Scheduler{Plugin: nodesched.NewPlugin(id, nodesched.Options{
		PreemptionEnabled: nodesched.SystemPreemption,
		Logger:            l.Named(JobType),
	})}
}

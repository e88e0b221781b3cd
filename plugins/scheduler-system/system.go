// Package system is the system scheduler plugin: each task group of a
// system job runs on every feasible, ready node, and keeps running there:
// an allocation that finishes or fails is replaced, chained to its
// predecessor through PreviousAllocation.
package system

import (
	"context"

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
	engine *nodesched.Engine
}

// New returns the system scheduler. Preemption is on unless the operator's
// scheduler configuration turns it off for system jobs.
func New() *Scheduler {
	return NewWithLogger(hclog.NewNullLogger())
}

// NewWithLogger returns the system scheduler logging to l.
func NewWithLogger(l hclog.Logger) *Scheduler {
	return &Scheduler{engine: nodesched.New(nodesched.Options{
		PreemptionEnabled: nodesched.SystemPreemption,
		Logger:            l.Named(JobType),
	})}
}

// Info reports the plugin's name, version and job type.
func (s *Scheduler) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{
		Name:     Name,
		Version:  Version,
		JobTypes: []*schedulerpb.JobTypeInfo{{Name: JobType, MaxAttempts: MaxAttempts}},
	}, nil
}

// Schedule makes one scheduling attempt for one evaluation.
func (s *Scheduler) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.engine.Schedule(req)
}

// Package sysbatch is the sysbatch scheduler plugin: a batch job that runs
// each task group Count times on every feasible, ready node, once. A
// finished allocation (complete or failed) is done and is not re-placed
// while the job is unchanged; a new job version re-runs only where it
// changes the tasks destructively.
package sysbatch

import (
	"context"

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
	engine *nodesched.Engine
}

// New returns the sysbatch scheduler. Preemption is off unless the
// operator's scheduler configuration turns it on for sysbatch.
func New() *Scheduler {
	return NewWithLogger(hclog.NewNullLogger())
}

// NewWithLogger returns the sysbatch scheduler logging to l.
func NewWithLogger(l hclog.Logger) *Scheduler {
	return &Scheduler{engine: nodesched.New(nodesched.Options{
		Sysbatch:          true,
		PreemptionEnabled: nodesched.SysbatchPreemption,
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

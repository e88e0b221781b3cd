// Package service is the service scheduler plugin: each task group keeps
// Count allocations running, placed on the best-ranked feasible node
// (bin-packing, job anti-affinity, affinity and spread; package rank).
// An allocation that completes on its client is replaced at once; a
// failed one is rescheduled by its group's reschedule block (service's
// default: after 30s, doubling up to 1h, unlimited) — at once when its
// delay has passed, on another node when one fits; later through a
// follow-up eval; not at all once its attempts are used up, leaving the
// group short of its count. Lost ones (node down or
// missing) are replaced elsewhere; those a drain marks migrate at most
// migrate.max_parallel at a time; a changed job is updated in place when
// only non-destructive fields changed, else replaced.
//
// A group with an update block (max_parallel > 0; a job that sets none
// gets Nomad's default, max_parallel 1) rolls a destructive change out
// through a deployment, as Nomad does (package rollout): the
// plan proposes the deployment of the new version; canaries, when asked
// for, run next to the old allocations until the deployment is promoted
// (drover deployment promote, or auto_promote); then the old allocations
// are replaced at most max_parallel at a time, a replacement counting as
// in flight until its client reports it healthy; a failed deployment stops
// the rollout (the core's watcher reverts the job with auto_revert). While
// the deployment is under way, a failed allocation of it is rescheduled
// only once the core's watcher marks it for replacement (an unhealthy
// allocation of a group with a progress deadline), and an unhealthy
// allocation the group keeps holds further updates back; once the
// deployment is over, failed allocations reschedule by their policy (those
// of a failed deployment excepted), as in Nomad. A group with max_parallel
// 0 is replaced without a deployment, at once or paced by the job's update
// max_parallel counting a replacement done once it runs.
//
// It imports only sdk/: the core learns everything about the type from
// Declaration.
package service

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/countsched"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
)

// Plugin identity and the job type served.
const (
	Name        = "scheduler-service"
	Version     = "0.1.0"
	JobType     = "service"
	MaxAttempts = 5
)

// Scheduler is the service scheduler. It is stateless and safe for
// concurrent use.
type Scheduler struct {
	logger hclog.Logger
}

var _ scheduler.Scheduler = (*Scheduler)(nil)

// New returns the service scheduler.
func New() *Scheduler { return NewWithLogger(hclog.NewNullLogger()) }

// NewWithLogger returns the service scheduler logging to l.
func NewWithLogger(l hclog.Logger) *Scheduler { return &Scheduler{logger: l.Named(JobType)} }

// Declaration is how service jobs behave once placed: they keep running,
// are neither periodic nor parameterized, are evaluated when a node of
// one of their allocations changes (lost, draining) and when an
// allocation ends on its client (to replace it) or starts to run (so a
// paced rolling update or drain goes on once replacements run). Restart,
// reschedule and migrate defaults are Nomad's for service jobs; with the
// migrate block, a drain migration is in flight until its replacement is
// healthy (judged by its client per the block). Every placement block is
// accepted, canaries too: the type declares deployments, so the core
// tracks allocation health and runs the deployment watcher. Jobs of this
// type preempt under ServiceSchedulerEnabled.
func Declaration() *schedulerpb.JobTypeInfo {
	return &schedulerpb.JobTypeInfo{
		Name:        JobType,
		MaxAttempts: MaxAttempts,
		DefaultRestart: &schedulerpb.RestartPolicy{
			Attempts: 2, IntervalNs: int64(30 * time.Minute), DelayNs: int64(15 * time.Second), Mode: "fail",
		},
		DefaultReschedule: &schedulerpb.ReschedulePolicy{
			DelayNs: int64(30 * time.Second), DelayFunction: "exponential", MaxDelayNs: int64(time.Hour), Unlimited: true,
		},
		EvalOnAllocNodeChange: true,
		EvalOnAllocEnd:        true,
		EvalOnAllocRunning:    true,
		PreemptionSwitch:      "ServiceSchedulerEnabled",
		Deployments:           true,
		DefaultMigrate: &schedulerpb.MigrateStrategy{
			MaxParallel: 1, HealthCheck: "checks",
			MinHealthyTimeNs: int64(10 * time.Second), HealthyDeadlineNs: int64(5 * time.Minute),
		},
	}
}

// Info reports the plugin's name, version and job type.
func (s *Scheduler) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{Name: Name, Version: Version, JobTypes: []*schedulerpb.JobTypeInfo{Declaration()}}, nil
}

// config is the count engine as service uses it: finished allocs
// replaced, updates and migrations paced, groups with an update block
// rolled out through deployments, preemption under ServiceSchedulerEnabled
// (when no node fits, allocations of jobs at least 10 lower in priority
// are evicted to make room).
var config = countsched.Config{
	Finished: finished, PaceUpdates: true, PaceMigrations: true, Deployments: true,
	Preemption: countsched.ServicePreemption,
}

// finished decides for an allocation that ended on its client: a service
// is meant to keep running. A complete one is placed afresh (as Nomad
// does, unlinked); a failed one is rescheduled by its group's reschedule
// policy (countsched.Reschedule: now, later or never), chained to it and
// preferring another node.
func finished(a *schedulerpb.Allocation, _ bool) countsched.Finish {
	if a.GetClientStatus() == reconcile.ClientFailed {
		return countsched.Reschedule
	}
	return countsched.Place
}

// Schedule makes one scheduling attempt for one evaluation. A canceled
// context is an error: the core has given up on the attempt.
func (s *Scheduler) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	eval := req.GetEval()
	if eval == nil {
		return nil, fmt.Errorf("invalid schedule request: no evaluation")
	}
	if !handles[eval.GetTriggeredBy()] {
		s.logger.Debug("evaluation refused", "eval_id", eval.GetId(), "triggered_by", eval.GetTriggeredBy())
		return &schedulerpb.ScheduleResponse{
			Status:            "failed",
			StatusDescription: fmt.Sprintf("scheduler cannot handle '%s' evaluation reason", eval.GetTriggeredBy()),
		}, nil
	}
	res := countsched.Schedule(req, config)
	resp := res.Response
	s.logger.Debug("evaluation scheduled", "eval_id", eval.GetId(), "job_id", eval.GetJobId(),
		"attempt", req.GetAttempt(), "placed", res.Placed, "stopped", res.Stopped, "held_back", res.HeldBack,
		"failed_groups", len(resp.GetFailedTgAllocs()), "blocked", len(resp.GetBlockedEvals()))
	return resp, nil
}

// handles lists the eval triggers the scheduler accepts.
var handles = map[string]bool{
	"job-register": true, "node-update": true, "failed-follow-up": true, "alloc-failure": true,
	"job-deregister": true, "rolling-update": true, "preemption": true, "deployment-watcher": true,
	"node-drain": true, "alloc-stop": true, "queued-allocs": true, "job-scaling": true, "reconnect": true,
	"max-disconnect-timeout": true,
}

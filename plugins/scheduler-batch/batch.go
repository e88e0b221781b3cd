// Package batch is the batch scheduler plugin: each task group keeps Count
// allocations in total, placed by bin-packing (the fullest feasible node
// that still fits the group's cpu and memory), run to completion. A
// finished allocation is done and is not re-placed while the job is
// unchanged; a new job version re-runs only what it changes destructively.
//
// A failed allocation is rescheduled by its group's reschedule block
// (Nomad's batch default: once in 24h, after 5s): due now, it is replaced
// on another node when one fits; due later, it is marked with a delayed
// follow-up eval that replaces it then; with its attempts used up it stays
// failed and its work is done. Lost allocations (down or missing node) and
// allocations migrating off a draining node are replaced whatever the
// policy.
//
// The scheduling itself is package countsched's, configured for batch:
// finished allocations hold their index (Finished), no job anti-affinity
// (a group packs onto as few nodes as fit it), nothing paced, preemption
// under BatchSchedulerEnabled (package preempt).
//
// Its config block (Settings) sets the attempts declared for the type
// (max_attempts) and turns the job anti-affinity score on
// (job_anti_affinity).
//
// It imports only sdk/: the core learns everything about the type from
// Declaration.
package batch

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/proto/basepb"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/countsched"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
	"github.com/drover-org/drover/sdk/scheduler/reschedule"
)

// Plugin identity and the job type served.
const (
	Name        = "scheduler-batch"
	Version     = "0.1.0"
	JobType     = "batch"
	MaxAttempts = 2
)

// Settings is the plugin's config block in the agent:
//
//	plugin "scheduler-batch" {
//	  config {
//	    max_attempts      = 3
//	    job_anti_affinity = true
//	  }
//	}
type Settings struct {
	MaxAttempts     int  `hcl:"max_attempts,optional" doc:"Scheduling attempts the core makes for one batch evaluation before it gives up (1 to 10). Declared in Info."`
	JobAntiAffinity bool `hcl:"job_anti_affinity,optional" doc:"Score Nomad's job anti-affinity: a group's allocations prefer nodes not yet running the job, spreading them instead of packing them onto as few nodes as fit."`
}

// DefaultSettings are the settings of an empty config block.
var DefaultSettings = Settings{MaxAttempts: MaxAttempts}

// MaxMaxAttempts bounds max_attempts: an attempt is a full scheduling
// pass, and a batch eval that fails ten times will not place on the
// eleventh without a change that triggers a new eval anyway.
const MaxMaxAttempts = 10

// ValidateSettings refuses settings outside their ranges.
func ValidateSettings(s Settings) []*basepb.FieldError {
	if s.MaxAttempts < 1 || s.MaxAttempts > MaxMaxAttempts {
		return []*basepb.FieldError{base.FieldErrorf("max_attempts", "must be between 1 and %d, not %d", MaxMaxAttempts, s.MaxAttempts)}
	}
	return nil
}

// Scheduler is the batch scheduler. It holds no state but its settings
// and is safe for concurrent use.
type Scheduler struct {
	logger hclog.Logger
	cfg    *base.Config[Settings]
}

var (
	_ scheduler.Scheduler = (*Scheduler)(nil)
	_ base.Configurable   = (*Scheduler)(nil)
)

// New returns the batch scheduler with DefaultSettings.
func New() *Scheduler { return NewWithLogger(hclog.NewNullLogger()) }

// NewWithLogger returns the batch scheduler logging to l.
func NewWithLogger(l hclog.Logger) *Scheduler {
	return &Scheduler{logger: l.Named(JobType), cfg: base.MustConfig(DefaultSettings, ValidateSettings)}
}

// PluginConfig is the config block the agent hands the plugin before it
// asks for Info.
func (s *Scheduler) PluginConfig() base.Settable { return s.cfg }

// Settings returns the settings in force.
func (s *Scheduler) Settings() Settings { return s.cfg.Get() }

// Declaration is how batch jobs behave once placed: placed by count (not
// per node), run to completion, may be periodic or parameterized. A lost
// allocation's node change evaluates the job so it can be replaced.
// The affinity and spread blocks are refused until they are implemented,
// so a job file asking for them is told rather than silently ignored.
// Jobs of this type preempt under BatchSchedulerEnabled (off by default):
// when no node fits, allocations of jobs at least 10 lower in priority
// are evicted to make room. An alloc ending evaluates the job
// (eval_on_alloc_end), so that a failure is rescheduled.
func Declaration() *schedulerpb.JobTypeInfo {
	return &schedulerpb.JobTypeInfo{
		Name:             JobType,
		MaxAttempts:      MaxAttempts,
		RunsToCompletion: true,
		DefaultRestart: &schedulerpb.RestartPolicy{
			Attempts: 3, IntervalNs: int64(24 * time.Hour), DelayNs: int64(15 * time.Second), Mode: "fail",
		},
		DefaultReschedule: &schedulerpb.ReschedulePolicy{
			Attempts: 1, IntervalNs: int64(24 * time.Hour), DelayNs: int64(5 * time.Second),
			DelayFunction: reschedule.DelayConstant, Unlimited: false,
		},
		AllowPeriodic:         true,
		AllowParameterized:    true,
		AllowMaxRunDuration:   true,
		RefusedBlocks:         []string{"update", "affinity", "spread"},
		EvalOnAllocEnd:        true,
		EvalOnAllocNodeChange: true,
		PreemptionSwitch:      "BatchSchedulerEnabled",
	}
}

// Info reports the plugin's name, version and job type, with max_attempts
// from the settings in force.
func (s *Scheduler) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	d := Declaration()
	d.MaxAttempts = int32(s.cfg.Get().MaxAttempts)
	return &schedulerpb.InfoResponse{Name: Name, Version: Version, JobTypes: []*schedulerpb.JobTypeInfo{d}}, nil
}

// config is the count engine as batch uses it by default: bin-packing
// alone (job_anti_affinity turns the anti-affinity score on), nothing
// paced (batch jobs have no update block; migrations go as drains mark
// them), preempting under BatchSchedulerEnabled.
var config = countsched.Config{Finished: finished, NoJobAntiAffinity: true, Preemption: countsched.BatchPreemption}

// finished decides for an allocation that ended on its client. Batch work
// runs once: a complete allocation, or a failed one whose tasks all
// finished successfully, holds its index. A failed one is rescheduled by
// its group's reschedule policy (countsched.Reschedule: now, later or,
// attempts used up, never — its work then done, failed). A job version
// that changed the group destructively re-runs the index, replacing it.
func finished(a *schedulerpb.Allocation, changed bool) countsched.Finish {
	switch {
	case changed:
		return countsched.Replace
	case a.GetClientStatus() == reconcile.ClientFailed && !a.GetRanSuccessfully():
		return countsched.Reschedule
	}
	return countsched.Hold
}

// Schedule makes one scheduling attempt for one evaluation. A canceled
// context is an error: the core has given up on the attempt.
func (s *Scheduler) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if req.GetEval() == nil {
		return nil, fmt.Errorf("invalid schedule request: no evaluation")
	}
	eval := req.GetEval()
	if !handles[eval.GetTriggeredBy()] {
		s.logger.Debug("evaluation refused", "eval_id", eval.GetId(), "triggered_by", eval.GetTriggeredBy())
		return &schedulerpb.ScheduleResponse{
			Status:            "failed",
			StatusDescription: fmt.Sprintf("scheduler cannot handle '%s' evaluation reason", eval.GetTriggeredBy()),
		}, nil
	}
	cfg := config
	cfg.NoJobAntiAffinity = !s.cfg.Get().JobAntiAffinity
	res := countsched.Schedule(req, cfg)
	resp := res.Response
	s.logger.Debug("evaluation scheduled", "eval_id", eval.GetId(), "job_id", eval.GetJobId(),
		"attempt", req.GetAttempt(), "placed", res.Placed, "stopped", res.Stopped,
		"failed_groups", len(resp.GetFailedTgAllocs()), "blocked", len(resp.GetBlockedEvals()),
		"followup_evals", len(resp.GetFollowupEvals()))
	return resp, nil
}

// handles lists the eval triggers the scheduler accepts.
var handles = map[string]bool{
	"job-register": true, "node-update": true, "failed-follow-up": true, "job-deregister": true,
	"rolling-update": true, "preemption": true, "deployment-watcher": true, "node-drain": true,
	"alloc-stop": true, "queued-allocs": true, "job-scaling": true, "reconnect": true,
	"periodic-job": true, "alloc-failure": true,
}

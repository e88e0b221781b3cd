package pluginhost

import (
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Behavior turns a scheduler plugin's declaration of one job type into the
// core's JobTypeBehavior. MaxAttempts is at least 1.
func Behavior(jt *schedulerpb.JobTypeInfo) structs.JobTypeBehavior {
	b := structs.JobTypeBehavior{
		MaxAttempts:           max(int(jt.GetMaxAttempts()), 1),
		PerNode:               jt.GetPerNode(),
		RunsToCompletion:      jt.GetRunsToCompletion(),
		RunningUntilStopped:   jt.GetRunningUntilStopped(),
		AllowPeriodic:         jt.GetAllowPeriodic(),
		AllowParameterized:    jt.GetAllowParameterized(),
		AllowMaxRunDuration:   jt.GetAllowMaxRunDuration(),
		RefusedBlocks:         append([]string(nil), jt.GetRefusedBlocks()...),
		MaxGroupCount:         int(jt.GetMaxGroupCount()),
		EvalOnNodeUpdate:      jt.GetEvalOnNodeUpdate(),
		EvalOnNodeJoin:        jt.GetEvalOnNodeJoin(),
		EvalOnAllocEnd:        jt.GetEvalOnAllocEnd(),
		EvalOnAllocRunning:    jt.GetEvalOnAllocRunning(),
		EvalOnAllocNodeChange: jt.GetEvalOnAllocNodeChange(),
		DrainLast:             jt.GetDrainLast(),
		PreemptionSwitch:      jt.GetPreemptionSwitch(),
		Deployments:           jt.GetDeployments(),
	}
	if r := jt.GetDefaultRestart(); r != nil {
		b.DefaultRestart = &structs.RestartPolicy{
			Attempts: int(r.GetAttempts()),
			Interval: time.Duration(r.GetIntervalNs()),
			Delay:    time.Duration(r.GetDelayNs()),
			Mode:     r.GetMode(),
		}
	}
	if r := jt.GetDefaultReschedule(); r != nil {
		b.DefaultReschedule = &structs.ReschedulePolicy{
			Attempts:      int(r.GetAttempts()),
			Interval:      time.Duration(r.GetIntervalNs()),
			Delay:         time.Duration(r.GetDelayNs()),
			DelayFunction: r.GetDelayFunction(),
			MaxDelay:      time.Duration(r.GetMaxDelayNs()),
			Unlimited:     r.GetUnlimited(),
		}
	}
	if m := jt.GetDefaultMigrate(); m != nil {
		b.DefaultMigrate = &structs.MigrateStrategy{
			MaxParallel:     int(m.GetMaxParallel()),
			HealthCheck:     m.GetHealthCheck(),
			MinHealthyTime:  time.Duration(m.GetMinHealthyTimeNs()),
			HealthyDeadline: time.Duration(m.GetHealthyDeadlineNs()),
		}
	}
	fillDefaults(&b)
	return b
}

// Nomad's defaults, which a type gets for every field its plugin leaves
// unset: its batch defaults for a type that runs to completion, its
// service defaults otherwise. A plugin written from the SDK alone, that
// declares only its name, must get jobs that run.
var (
	batchRestart   = structs.RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail}
	serviceRestart = structs.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail}
	batchResched   = structs.ReschedulePolicy{Attempts: 1, Interval: 24 * time.Hour, Delay: 5 * time.Second, DelayFunction: "constant"}
	serviceResched = structs.ReschedulePolicy{Delay: 30 * time.Second, DelayFunction: "exponential", MaxDelay: time.Hour, Unlimited: true}
)

// fillDefaults lays what b declares over Nomad's defaults of its kind,
// field by field: an absent policy takes the whole default, a declared
// one keeps its counts (zero attempts is a choice) and takes the default
// of each duration or name it leaves zero. A type that refuses the
// reschedule block gets no reschedule default.
func fillDefaults(b *structs.JobTypeBehavior) {
	rs, rsch := serviceRestart, serviceResched
	if b.RunsToCompletion {
		rs, rsch = batchRestart, batchResched
	}
	if b.DefaultRestart == nil {
		r := rs
		b.DefaultRestart = &r
	} else {
		r := b.DefaultRestart
		if r.Interval == 0 {
			r.Interval = rs.Interval
		}
		if r.Delay == 0 {
			r.Delay = rs.Delay
		}
		if r.Mode == "" {
			r.Mode = rs.Mode
		}
	}
	if b.Refuses(structs.BlockReschedule) {
		return
	}
	if b.DefaultReschedule == nil {
		r := rsch
		b.DefaultReschedule = &r
		return
	}
	r := b.DefaultReschedule
	if r.Delay == 0 {
		r.Delay = rsch.Delay
	}
	if r.DelayFunction == "" {
		r.DelayFunction = rsch.DelayFunction
	}
	if r.DelayFunction != "constant" && r.MaxDelay == 0 {
		r.MaxDelay = serviceResched.MaxDelay
	}
	if !r.Unlimited && r.Attempts > 0 && r.Interval == 0 {
		r.Interval = rsch.Interval
	}
}

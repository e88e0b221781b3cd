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
	return b
}

package jobspec

import (
	"time"

	"github.com/drover-org/drover/core/structs"
)

// testTypes are the declarations the jobspec tests parse with, as the
// server's scheduler plugins would give them (pluginhost.Behavior of the
// plugin's JobTypeInfo). system and sysbatch hold the values the built-in
// plugins declare (plugins/scheduler-*/ Declaration(), pinned by their own
// tests; jobspec does not import plugins/). service and batch are what a
// plugin following Nomad's defaults (NOMAD-BEHAVIOR §1.3) would declare:
// drover ships no such plugin, but the test files use those types.
var testTypes = map[string]*structs.JobTypeBehavior{
	structs.JobTypeSystem: {
		MaxAttempts:         5,
		PerNode:             true,
		RunningUntilStopped: true,
		DefaultRestart:      &structs.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail},
		RefusedBlocks:       []string{structs.BlockAffinity, structs.BlockSpread, structs.BlockReschedule, structs.BlockMigrate},
		MaxGroupCount:       1,
		EvalOnNodeUpdate:    true,
		EvalOnAllocEnd:      true,
		DrainLast:           true,
		PreemptionSwitch:    structs.PreemptSwitchSystem,
	},
	structs.JobTypeSysBatch: {
		MaxAttempts:         2,
		PerNode:             true,
		RunsToCompletion:    true,
		DefaultRestart:      &structs.RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail},
		AllowPeriodic:       true,
		AllowParameterized:  true,
		AllowMaxRunDuration: true,
		RefusedBlocks:       []string{structs.BlockUpdate, structs.BlockReschedule, structs.BlockMigrate},
		EvalOnNodeJoin:      true,
		PreemptionSwitch:    structs.PreemptSwitchSysBatch,
	},
	structs.JobTypeService: {
		MaxAttempts:       5,
		DefaultRestart:    &structs.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail},
		DefaultReschedule: &structs.ReschedulePolicy{Delay: 30 * time.Second, DelayFunction: "exponential", MaxDelay: time.Hour, Unlimited: true},
		PreemptionSwitch:  structs.PreemptSwitchService,
	},
	structs.JobTypeBatch: {
		MaxAttempts:         2,
		RunsToCompletion:    true,
		DefaultRestart:      &structs.RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail},
		DefaultReschedule:   &structs.ReschedulePolicy{Attempts: 1, Interval: 24 * time.Hour, Delay: 5 * time.Second, DelayFunction: "constant"},
		AllowPeriodic:       true,
		AllowParameterized:  true,
		AllowMaxRunDuration: true,
		EvalOnAllocEnd:      true,
		PreemptionSwitch:    structs.PreemptSwitchBatch,
	},
}

// testOptions parse with testTypes; a type outside it is unknown.
var testOptions = Options{Defaults: func(jobType string) *structs.JobTypeBehavior { return testTypes[jobType] }}

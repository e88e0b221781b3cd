// Package structs holds drover's domain types: jobs, allocations, evaluations,
// nodes and plans, with their validation and canonicalization. JSON field
// names are the Go field names, as in Nomad's v1 API, so Nomad's tooling
// reads drover's answers unchanged.
package structs

// DefaultJobType is the type of a job that names none, as in Nomad.
const DefaultJobType = "service"

// Job statuses.
const (
	JobStatusPending = "pending"
	JobStatusRunning = "running"
	JobStatusDead    = "dead"
)

// Job defaults and limits.
const (
	JobDefaultPriority = 50
	JobMinPriority     = 1
	JobMaxPriority     = 100
	DefaultNamespace   = "default"
	DefaultRegion      = "global"
	NodePoolDefault    = "default"
	NodePoolAll        = "all"
	// DispatchPayloadSizeLimit bounds a dispatch payload (16 KiB).
	DispatchPayloadSizeLimit = 16 * 1024
)

// Allocation desired statuses.
const (
	AllocDesiredStatusRun   = "run"
	AllocDesiredStatusStop  = "stop"
	AllocDesiredStatusEvict = "evict"
)

// Allocation client statuses.
const (
	AllocClientStatusPending  = "pending"
	AllocClientStatusRunning  = "running"
	AllocClientStatusComplete = "complete"
	AllocClientStatusFailed   = "failed"
	AllocClientStatusLost     = "lost"
	AllocClientStatusUnknown  = "unknown"
)

// Evaluation statuses.
const (
	EvalStatusBlocked   = "blocked"
	EvalStatusPending   = "pending"
	EvalStatusComplete  = "complete"
	EvalStatusFailed    = "failed"
	EvalStatusCancelled = "canceled"
)

// Evaluation triggers.
const (
	EvalTriggerJobRegister      = "job-register"
	EvalTriggerJobDeregister    = "job-deregister"
	EvalTriggerPeriodicJob      = "periodic-job"
	EvalTriggerNodeDrain        = "node-drain"
	EvalTriggerNodeUpdate       = "node-update"
	EvalTriggerAllocStop        = "alloc-stop"
	EvalTriggerScheduled        = "scheduled"
	EvalTriggerRollingUpdate    = "rolling-update"
	EvalTriggerFailedFollowUp   = "failed-follow-up"
	EvalTriggerMaxPlans         = "max-plan-attempts"
	EvalTriggerRetryFailedAlloc = "alloc-failure"
	EvalTriggerQueuedAllocs     = "queued-allocs"
	EvalTriggerPreemption       = "preemption"
	EvalTriggerJobScaling       = "job-scaling"
	EvalTriggerReconnect        = "reconnect"
)

// Node statuses and eligibility.
const (
	NodeStatusInit         = "initializing"
	NodeStatusReady        = "ready"
	NodeStatusDown         = "down"
	NodeStatusDisconnected = "disconnected"

	NodeSchedulingEligible   = "eligible"
	NodeSchedulingIneligible = "ineligible"
)

// Task states.
const (
	TaskStatePending = "pending"
	TaskStateRunning = "running"
	TaskStateDead    = "dead"
)

// Task event types, as Nomad names them.
const (
	TaskReceived           = "Received"
	TaskSetup              = "Task Setup"
	TaskStarted            = "Started"
	TaskTerminated         = "Terminated"
	TaskKilling            = "Killing"
	TaskKilled             = "Killed"
	TaskRestarting         = "Restarting"
	TaskNotRestarting      = "Not Restarting"
	TaskDriverFailure      = "Driver Failure"
	TaskSetupFailure       = "Setup Failure"
	TaskFailedValidation   = "Failed Validation"
	TaskRestartSignal      = "Restart Signaled"
	TaskSiblingFailed      = "Sibling Task Failed"
	TaskClientReconnected  = "Reconnected"
	TaskLeaderDead         = "Leader Task Dead"
	TaskMainDead           = "Main Tasks Dead"
	TaskSignaling          = "Signaling"
	TaskRestoreFailed      = "Failed Restoring Task"
	TaskPluginUnhealthy    = "Plugin became unhealthy"
	TaskHookFailed         = "Task hook failed"
	TaskBuildingTaskDir    = "Task Setup"
	TaskArtifactDownloadFn = "Downloading Artifacts"
	// TaskArtifactDownloadFailed: an artifact could not be fetched.
	TaskArtifactDownloadFailed = "Failed Artifact Download"
)

// Restart modes.
const (
	RestartPolicyModeDelay = "delay"
	RestartPolicyModeFail  = "fail"
)

// Parameterized payload modes.
const (
	DispatchPayloadOptional  = "optional"
	DispatchPayloadRequired  = "required"
	DispatchPayloadForbidden = "forbidden"
)

// Periodic spec types.
const PeriodicSpecCron = "cron"

// Child job ID infixes.
const (
	PeriodicLaunchSuffix = "/periodic-"
	DispatchLaunchSuffix = "/dispatch-"
)

package structs

import "slices"

// JobTypeBehavior is what the scheduler plugin serving a job type declares
// about that type's jobs once they are placed (sdk/proto JobTypeInfo). The
// core knows no job type by name: every type-dependent decision of the
// server, the state machine and the client reads a JobTypeBehavior.
//
// The leader copies the serving plugin's declaration into each job version
// it registers (Job.TypeBehavior), so a job keeps the behaviour it was
// registered under, the state machine stays deterministic whatever plugins
// a server runs, and a client reads it from the allocation's job. The zero
// value is a job that keeps running, is restarted when a task exits, may be
// neither periodic nor parameterized, and is evaluated only on its own
// changes and when its allocations are lost.
type JobTypeBehavior struct {
	// MaxAttempts is the number of scheduling attempts for one eval.
	MaxAttempts int `codec:",omitempty"`
	// PerNode: each group's count is placed on every candidate node.
	PerNode bool `codec:",omitempty"`
	// RunsToCompletion: a task that exits 0 is done, the job is dead once
	// every allocation is terminal, and a drain lets allocations finish
	// until its deadline.
	RunsToCompletion bool `codec:",omitempty"`
	// RunningUntilStopped: the job is running from registration until
	// stopped, whatever its allocations.
	RunningUntilStopped bool `codec:",omitempty"`
	// DefaultRestart is the restart policy of a group that sets none.
	DefaultRestart *RestartPolicy `codec:",omitempty"`
	// DefaultReschedule is the reschedule policy of a group that sets none;
	// nil: none.
	DefaultReschedule *ReschedulePolicy `codec:",omitempty"`

	AllowPeriodic       bool `codec:",omitempty"`
	AllowParameterized  bool `codec:",omitempty"`
	AllowMaxRunDuration bool `codec:",omitempty"`
	// RefusedBlocks lists job file blocks refused at job and group level,
	// among BlockAffinity, BlockSpread, BlockUpdate, BlockReschedule and
	// BlockMigrate. Canaries are refused by not declaring Deployments.
	RefusedBlocks []string `codec:",omitempty"`
	// MaxGroupCount bounds a group's count; 0: no bound.
	MaxGroupCount int `codec:",omitempty"`

	// EvalOnNodeUpdate: every node change evaluates each job of the type
	// that the node takes and each with a live allocation on it.
	EvalOnNodeUpdate bool `codec:",omitempty"`
	// EvalOnNodeJoin: a node becoming schedulable evaluates each job of the
	// type that takes it and is not dead.
	EvalOnNodeJoin bool `codec:",omitempty"`
	// EvalOnAllocNodeChange: every change of a node holding a live
	// allocation of the type evaluates that allocation's job
	// (EvalOnNodeUpdate implies it).
	EvalOnAllocNodeChange bool `codec:",omitempty"`
	// EvalOnAllocEnd: an allocation ending (failed or complete) on its node
	// evaluates its job again.
	EvalOnAllocEnd bool `codec:",omitempty"`
	// EvalOnAllocRunning: an allocation starting to run on its node
	// (pending to running) evaluates its job again, so paced updates and
	// migrations go on once their replacements run; so does a drain
	// migration's replacement reported healthy (outside a deployment).
	EvalOnAllocRunning bool `codec:",omitempty"`
	// DrainLast: on a draining node these allocations leave after all
	// others, and IgnoreSystemJobs leaves them in place.
	DrainLast bool `codec:",omitempty"`
	// PreemptionSwitch names the PreemptionConfig field that lets jobs of
	// the type preempt (PreemptSwitch*); empty: never.
	PreemptionSwitch string `codec:",omitempty"`
	// Deployments: jobs of the type with an update block roll out through
	// deployments (canaries, health, auto-revert). A type that does not
	// declare it refuses update.canary > 0.
	Deployments bool `codec:",omitempty"`
	// DefaultMigrate is the migrate block of a group that sets none; the
	// fields a job's or group's block leaves unset are taken from it. With
	// a migrate block, clients judge allocation health outside deployments
	// too, so a drain can wait for replacements to be healthy. nil: none.
	DefaultMigrate *MigrateStrategy `codec:",omitempty"`
}

// Job file blocks a job type may refuse (JobTypeBehavior.RefusedBlocks).
const (
	BlockAffinity   = "affinity"
	BlockSpread     = "spread"
	BlockUpdate     = "update"
	BlockReschedule = "reschedule"
	BlockMigrate    = "migrate"
)

// The PreemptionConfig switches a job type may name.
const (
	PreemptSwitchSystem   = "SystemSchedulerEnabled"
	PreemptSwitchSysBatch = "SysBatchSchedulerEnabled"
	PreemptSwitchBatch    = "BatchSchedulerEnabled"
	PreemptSwitchService  = "ServiceSchedulerEnabled"
)

// Refuses reports whether the type refuses the job file block.
func (b *JobTypeBehavior) Refuses(block string) bool {
	return b != nil && slices.Contains(b.RefusedBlocks, block)
}

// Copy returns a deep copy.
func (b *JobTypeBehavior) Copy() *JobTypeBehavior {
	if b == nil {
		return nil
	}
	c := *b
	if b.DefaultRestart != nil {
		r := *b.DefaultRestart
		c.DefaultRestart = &r
	}
	if b.DefaultReschedule != nil {
		r := *b.DefaultReschedule
		c.DefaultReschedule = &r
	}
	if b.DefaultMigrate != nil {
		m := *b.DefaultMigrate
		c.DefaultMigrate = &m
	}
	c.RefusedBlocks = slices.Clone(b.RefusedBlocks)
	return &c
}

// PreemptionEnabled reports whether cfg lets jobs of the type preempt.
func (b *JobTypeBehavior) PreemptionEnabled(cfg *SchedulerConfiguration) bool {
	if b == nil || cfg == nil {
		return false
	}
	p := cfg.PreemptionConfig
	switch b.PreemptionSwitch {
	case PreemptSwitchSystem:
		return p.SystemSchedulerEnabled
	case PreemptSwitchSysBatch:
		return p.SysBatchSchedulerEnabled
	case PreemptSwitchBatch:
		return p.BatchSchedulerEnabled
	case PreemptSwitchService:
		return p.ServiceSchedulerEnabled
	}
	return false
}

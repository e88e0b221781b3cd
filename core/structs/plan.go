package structs

// Plan is a scheduler's proposed change, checked and committed by the leader's
// plan applier.
type Plan struct {
	EvalID          string                   `codec:",omitempty"`
	EvalToken       string                   `codec:",omitempty"`
	Priority        int                      `codec:",omitempty"`
	AllAtOnce       bool                     `codec:",omitempty"`
	Job             *Job                     `codec:",omitempty"`
	NodeUpdate      map[string][]*Allocation `codec:",omitempty"`
	NodeAllocation  map[string][]*Allocation `codec:",omitempty"`
	NodePreemptions map[string][]*Allocation `codec:",omitempty"`
	Annotations     *PlanAnnotations         `codec:",omitempty"`
	SnapshotIndex   uint64                   `codec:",omitempty"`
	// FollowupEvals are delayed evals that reschedule failed allocs;
	// AllocFollowups mark those allocs with them. Both commit with the
	// plan's first Raft entry, whatever its nodes' fate: they reserve
	// nothing on a node.
	FollowupEvals  []*Evaluation    `codec:",omitempty"`
	AllocFollowups []*AllocFollowup `codec:",omitempty"`
	// Deployment is a deployment the plan creates (it cancels the job's
	// older active one), DeploymentUpdates the status changes it makes to
	// the job's deployments; both commit with the plan.
	Deployment        *Deployment               `codec:",omitempty"`
	DeploymentUpdates []*DeploymentStatusUpdate `codec:",omitempty"`
}

// AllocFollowup sets the FollowupEvalID of an allocation, and nothing else.
type AllocFollowup struct {
	AllocID        string `codec:",omitempty"`
	FollowupEvalID string `codec:",omitempty"`
}

// PlanAnnotations explains a plan.
type PlanAnnotations struct {
	DesiredTGUpdates map[string]*DesiredUpdates `codec:",omitempty"`
	PreemptedAllocs  []*AllocListStub           `codec:",omitempty"`
}

// DesiredUpdates counts what a plan does per group.
type DesiredUpdates struct {
	Ignore            uint64 `codec:",omitempty"`
	Place             uint64 `codec:",omitempty"`
	Migrate           uint64 `codec:",omitempty"`
	Stop              uint64 `codec:",omitempty"`
	InPlaceUpdate     uint64 `codec:",omitempty"`
	DestructiveUpdate uint64 `codec:",omitempty"`
	Canary            uint64 `codec:",omitempty"`
	Preemptions       uint64 `codec:",omitempty"`
	Disconnect        uint64 `codec:",omitempty"`
	Reconnect         uint64 `codec:",omitempty"`
	RescheduleNow     uint64 `codec:",omitempty"`
	RescheduleLater   uint64 `codec:",omitempty"`
}

// IsNoOp reports whether the plan changes nothing.
func (p *Plan) IsNoOp() bool {
	return len(p.NodeUpdate) == 0 && len(p.NodeAllocation) == 0 && len(p.FollowupEvals) == 0 && len(p.AllocFollowups) == 0 &&
		p.Deployment == nil && len(p.DeploymentUpdates) == 0
}

// PlanResult is what the applier committed.
type PlanResult struct {
	NodeUpdate      map[string][]*Allocation `codec:",omitempty"`
	NodeAllocation  map[string][]*Allocation `codec:",omitempty"`
	NodePreemptions map[string][]*Allocation `codec:",omitempty"`
	RejectedNodes   []string                 `codec:",omitempty"`
	IneligibleNodes []string                 `codec:",omitempty"`
	RefreshIndex    uint64                   `codec:",omitempty"`
	AllocIndex      uint64                   `codec:",omitempty"`
	FollowupEvals   []*Evaluation            `codec:",omitempty"`
	AllocFollowups  []*AllocFollowup         `codec:",omitempty"`
}

// FullCommit reports whether every planned allocation was committed, and
// how many were expected and committed.
func (r *PlanResult) FullCommit(p *Plan) (bool, int, int) {
	expected, actual := 0, 0
	for node, allocs := range p.NodeAllocation {
		expected += len(allocs)
		actual += len(r.NodeAllocation[node])
	}
	return expected == actual, expected, actual
}

// IsNoOp reports whether nothing was committed.
func (r *PlanResult) IsNoOp() bool {
	return len(r.NodeUpdate) == 0 && len(r.NodeAllocation) == 0 && len(r.NodePreemptions) == 0 &&
		len(r.FollowupEvals) == 0 && len(r.AllocFollowups) == 0
}

// SchedulerConfiguration is the operator's scheduler settings.
type SchedulerConfiguration struct {
	SchedulerAlgorithm string           `codec:",omitempty"`
	PreemptionConfig   PreemptionConfig `codec:",omitempty"`
	// Nomad's switches, kept and answered as set (Nomad's API tests read
	// them back); drover does not act on them yet (docs/nomad-compatibility.md).
	MemoryOversubscriptionEnabled bool   `codec:",omitempty"`
	RejectJobRegistration         bool   `codec:",omitempty"`
	PauseEvalBroker               bool   `codec:",omitempty"`
	CreateIndex                   uint64 `codec:",omitempty"`
	ModifyIndex                   uint64 `codec:",omitempty"`
}

// PreemptionConfig toggles preemption per scheduler type.
type PreemptionConfig struct {
	SystemSchedulerEnabled   bool `codec:",omitempty"`
	SysBatchSchedulerEnabled bool `codec:",omitempty"`
	BatchSchedulerEnabled    bool `codec:",omitempty"`
	ServiceSchedulerEnabled  bool `codec:",omitempty"`
}

// DefaultSchedulerConfig: preemption on for system only.
func DefaultSchedulerConfig() *SchedulerConfiguration {
	return &SchedulerConfiguration{
		SchedulerAlgorithm: "binpack",
		PreemptionConfig:   PreemptionConfig{SystemSchedulerEnabled: true},
	}
}

package structs

// Plan is a scheduler's proposed change, checked and committed by the leader's
// plan applier.
type Plan struct {
	EvalID          string
	EvalToken       string
	Priority        int
	AllAtOnce       bool
	Job             *Job
	NodeUpdate      map[string][]*Allocation
	NodeAllocation  map[string][]*Allocation
	NodePreemptions map[string][]*Allocation
	Annotations     *PlanAnnotations
	SnapshotIndex   uint64
}

// PlanAnnotations explains a plan.
type PlanAnnotations struct {
	DesiredTGUpdates map[string]*DesiredUpdates
	PreemptedAllocs  []*AllocListStub
}

// DesiredUpdates counts what a plan does per group.
type DesiredUpdates struct {
	Ignore            uint64
	Place             uint64
	Migrate           uint64
	Stop              uint64
	InPlaceUpdate     uint64
	DestructiveUpdate uint64
	Canary            uint64
	Preemptions       uint64
	Disconnect        uint64
	Reconnect         uint64
	RescheduleNow     uint64
	RescheduleLater   uint64
}

// IsNoOp reports whether the plan changes nothing.
func (p *Plan) IsNoOp() bool {
	return len(p.NodeUpdate) == 0 && len(p.NodeAllocation) == 0
}

// PlanResult is what the applier committed.
type PlanResult struct {
	NodeUpdate      map[string][]*Allocation
	NodeAllocation  map[string][]*Allocation
	NodePreemptions map[string][]*Allocation
	RejectedNodes   []string
	IneligibleNodes []string
	RefreshIndex    uint64
	AllocIndex      uint64
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
	return len(r.NodeUpdate) == 0 && len(r.NodeAllocation) == 0 && len(r.NodePreemptions) == 0
}

// SchedulerConfiguration is the operator's scheduler settings.
type SchedulerConfiguration struct {
	SchedulerAlgorithm string
	PreemptionConfig   PreemptionConfig
	CreateIndex        uint64
	ModifyIndex        uint64
}

// PreemptionConfig toggles preemption per scheduler type.
type PreemptionConfig struct {
	SystemSchedulerEnabled   bool
	SysBatchSchedulerEnabled bool
	BatchSchedulerEnabled    bool
	ServiceSchedulerEnabled  bool
}

// DefaultSchedulerConfig: preemption on for system only.
func DefaultSchedulerConfig() *SchedulerConfiguration {
	return &SchedulerConfiguration{
		SchedulerAlgorithm: "binpack",
		PreemptionConfig:   PreemptionConfig{SystemSchedulerEnabled: true},
	}
}

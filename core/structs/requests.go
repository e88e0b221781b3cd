package structs

// MessageType tags a Raft log entry. Numbers are wire-stable (§9.1): never
// renumber, only add.
type MessageType uint8

const (
	NodeRegisterRequestType                 MessageType = 0
	NodeDeregisterRequestType               MessageType = 1
	NodeUpdateStatusRequestType             MessageType = 2
	NodeUpdateDrainRequestType              MessageType = 3
	JobRegisterRequestType                  MessageType = 4
	JobDeregisterRequestType                MessageType = 5
	EvalUpdateRequestType                   MessageType = 6
	EvalDeleteRequestType                   MessageType = 7
	AllocClientUpdateRequestType            MessageType = 9
	ApplyPlanResultsRequestType             MessageType = 13
	JobBatchDeregisterRequestType           MessageType = 26
	AllocUpdateDesiredTransitionRequestType MessageType = 27
	NodeUpdateEligibilityRequestType        MessageType = 28
	SchedulerConfigRequestType              MessageType = 30

	// IgnoreUnknownTypeFlag marks entries an older FSM may skip.
	IgnoreUnknownTypeFlag MessageType = 128
)

// WriteMeta is returned by every write.
type WriteMeta struct {
	Index uint64
}

// QueryOptions are the common read parameters.
type QueryOptions struct {
	Namespace string
	Region    string
	// MinQueryIndex makes the read block until the result's index exceeds it.
	MinQueryIndex uint64
	MaxQueryTime  int64
	AllowStale    bool
	Prefix        string
	AuthToken     string
}

// NodeRegisterRequest upserts a node.
type NodeRegisterRequest struct {
	Node *Node
}

// NodeDeregisterRequest deletes nodes.
type NodeDeregisterRequest struct {
	NodeIDs []string
}

// NodeUpdateStatusRequest changes a node's status, with the evals it causes.
type NodeUpdateStatusRequest struct {
	NodeID    string
	Status    string
	NodeEvent *NodeEvent
	UpdatedAt int64
	Evals     []*Evaluation
}

// NodeUpdateDrainRequest sets or clears a drain.
type NodeUpdateDrainRequest struct {
	NodeID        string
	DrainStrategy *DrainStrategy
	MarkEligible  bool
	NodeEvent     *NodeEvent
	UpdatedAt     int64
	Meta          map[string]string
}

// NodeUpdateEligibilityRequest toggles scheduling eligibility.
type NodeUpdateEligibilityRequest struct {
	NodeID      string
	Eligibility string
	NodeEvent   *NodeEvent
	UpdatedAt   int64
	Evals       []*Evaluation
}

// JobRegisterRequest writes a job (nil when unchanged) and its eval.
type JobRegisterRequest struct {
	Job  *Job
	Eval *Evaluation
	// Namespace and JobID name the job when Job is nil (unchanged spec).
	Namespace string
	JobID     string
}

// JobDeregisterRequest stops or purges a job, with its eval.
type JobDeregisterRequest struct {
	Namespace string
	JobID     string
	Purge     bool
	Eval      *Evaluation
}

// JobBatchDeregisterRequest purges many jobs at once (GC).
type JobBatchDeregisterRequest struct {
	Jobs  []NamespacedID
	Evals []*Evaluation
}

// EvalUpdateRequest upserts evals.
type EvalUpdateRequest struct {
	Evals     []*Evaluation
	EvalToken string
}

// EvalDeleteRequest reaps evals and allocs.
type EvalDeleteRequest struct {
	Evals  []string
	Allocs []string
}

// AllocUpdateRequest carries client status updates of allocs, and the evals
// they cause.
type AllocUpdateRequest struct {
	Alloc []*Allocation
	Evals []*Evaluation
}

// AllocUpdateDesiredTransitionRequest sets desired transitions.
type AllocUpdateDesiredTransitionRequest struct {
	Allocs map[string]*DesiredTransition
	Evals  []*Evaluation
}

// ApplyPlanResultsRequest commits a plan.
type ApplyPlanResultsRequest struct {
	Job             *Job
	AllocsStopped   []*Allocation
	AllocsUpdated   []*Allocation
	AllocsPreempted []*Allocation
	PreemptionEvals []*Evaluation
	EvalID          string
	UpdatedAt       int64
}

// SchedulerSetConfigRequest replaces the scheduler configuration.
type SchedulerSetConfigRequest struct {
	Config SchedulerConfiguration
}

// JobRegisterResponse answers a job registration.
type JobRegisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	Warnings        string
	Index           uint64
}

// JobDeregisterResponse answers a job stop.
type JobDeregisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	VolumeEvalID    string
	VolumeEvalIndex uint64
	Index           uint64
}

// JobDispatchRequest asks to dispatch a parameterized job.
type JobDispatchRequest struct {
	JobID            string
	Payload          []byte
	Meta             map[string]string
	IdPrefixTemplate string
	Priority         int
	IdempotencyToken string
}

// JobDispatchResponse answers a dispatch.
type JobDispatchResponse struct {
	DispatchedJobID string
	EvalID          string
	EvalCreateIndex uint64
	JobCreateIndex  uint64
	Index           uint64
}

// PeriodicForceResponse answers a forced periodic launch.
type PeriodicForceResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	Index           uint64
}

// NodeEligibilityUpdateResponse answers an eligibility or drain change.
type NodeEligibilityUpdateResponse struct {
	NodeModifyIndex uint64
	EvalIDs         []string
	EvalCreateIndex uint64
	Index           uint64
}

// AllocStopResponse answers an alloc stop.
type AllocStopResponse struct {
	EvalID string
	Index  uint64
}

// JobPlanResponse answers a dry-run plan of a job.
type JobPlanResponse struct {
	Annotations        *PlanAnnotations
	FailedTGAllocs     map[string]*AllocMetric
	JobModifyIndex     uint64
	CreatedEvals       []*Evaluation
	Diff               *JobDiff
	NextPeriodicLaunch int64
	Warnings           string
	Index              uint64
}

// JobDiff is a coarse diff of a job against its current version: the type is
// "Added", "Deleted", "Edited" or "None".
type JobDiff struct {
	Type   string
	ID     string
	Fields []*FieldDiff
}

// FieldDiff is one changed field.
type FieldDiff struct {
	Type string
	Name string
	Old  string
	New  string
}

package structs

import "time"

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
	ReconcileJobSummariesRequestType        MessageType = 10
	ApplyPlanResultsRequestType             MessageType = 13
	JobBatchDeregisterRequestType           MessageType = 26
	AllocUpdateDesiredTransitionRequestType MessageType = 27
	NodeUpdateEligibilityRequestType        MessageType = 28
	SchedulerConfigRequestType              MessageType = 30
	// Cluster PKI (pki_requests.go); 72 is reserved for it.
	PKIInitRequestType   MessageType = 70
	PKITokensRequestType MessageType = 71

	ACLPolicyUpsertRequestType    MessageType = 19
	ACLPolicyDeleteRequestType    MessageType = 20
	ACLTokenUpsertRequestType     MessageType = 21
	ACLTokenDeleteRequestType     MessageType = 22
	ACLTokenBootstrapRequestType  MessageType = 23
	OneTimeTokenUpsertRequestType MessageType = 44
	OneTimeTokenDeleteRequestType MessageType = 45
	OneTimeTokenExpireRequestType MessageType = 46
	ACLRoleUpsertRequestType      MessageType = 66
	ACLRoleDeleteRequestType      MessageType = 67
	NamespaceUpsertRequestType    MessageType = 64
	NamespaceDeleteRequestType    MessageType = 65

	// Variables and the keyring (variables.go): 90-99.
	VariableApplyRequestType  MessageType = 90
	RootKeyUpsertRequestType  MessageType = 91
	RootKeyStateRequestType   MessageType = 92
	VariablesRekeyRequestType MessageType = 93
	RootKeyDeleteRequestType  MessageType = 95 // not 94: 0x5e is one bit from the FSM entry marker (0x7e)

	CSIVolumeRegisterRequestType   MessageType = 35
	CSIVolumeDeregisterRequestType MessageType = 36
	CSIVolumeClaimBatchRequestType MessageType = 39
	CSIPluginDeleteRequestType     MessageType = 40

	// IgnoreUnknownTypeFlag marks entries an older FSM may skip.
	IgnoreUnknownTypeFlag MessageType = 128
)

// Stamped is a Raft request that carries the leader's clock. The FSM and
// the state store never read the wall clock while applying an entry (each
// server applies it at a different moment, and a replay much later): every
// time they store comes from the entry. The leader stamps each request just
// before proposing it; an entry written before the stamp existed (Now zero)
// falls back to times the entry carries itself, never to the clock.
type Stamped interface {
	// StampNow sets the request's time (unix nanoseconds) unless the
	// caller already set one.
	StampNow(unixNano int64)
}

func stamp(dst *int64, v int64) {
	if *dst == 0 {
		*dst = v
	}
}

func (r *NodeRegisterRequest) StampNow(n int64)                 { stamp(&r.Now, n) }
func (r *NodeUpdateStatusRequest) StampNow(n int64)             { stamp(&r.Now, n) }
func (r *NodeUpdateDrainRequest) StampNow(n int64)              { stamp(&r.Now, n) }
func (r *NodeUpdateEligibilityRequest) StampNow(n int64)        { stamp(&r.Now, n) }
func (r *JobRegisterRequest) StampNow(n int64)                  { stamp(&r.Now, n) }
func (r *JobDeregisterRequest) StampNow(n int64)                { stamp(&r.Now, n) }
func (r *JobBatchDeregisterRequest) StampNow(n int64)           { stamp(&r.Now, n) }
func (r *EvalUpdateRequest) StampNow(n int64)                   { stamp(&r.Now, n) }
func (r *AllocUpdateRequest) StampNow(n int64)                  { stamp(&r.Now, n) }
func (r *AllocUpdateDesiredTransitionRequest) StampNow(n int64) { stamp(&r.Now, n) }

// StampNow sets UpdatedAt, which has always been the plan's time.
func (r *ApplyPlanResultsRequest) StampNow(n int64) { stamp(&r.UpdatedAt, n) }

// WriteMeta is returned by every write.
type WriteMeta struct {
	Index uint64 `codec:",omitempty"`
}

// QueryOptions are the common read parameters.
type QueryOptions struct {
	Namespace string `codec:",omitempty"`
	Region    string `codec:",omitempty"`
	// MinQueryIndex makes the read block until the result's index exceeds it.
	MinQueryIndex uint64 `codec:",omitempty"`
	MaxQueryTime  int64  `codec:",omitempty"`
	AllowStale    bool   `codec:",omitempty"`
	Prefix        string `codec:",omitempty"`
	AuthToken     string `codec:",omitempty"`
}

// NodeRegisterRequest upserts a node, with the evals the registration
// causes (written in the same entry; see NodeUpdateStatusRequest).
type NodeRegisterRequest struct {
	Node  *Node         `codec:",omitempty"`
	Evals []*Evaluation `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// NodeDeregisterRequest deletes nodes.
type NodeDeregisterRequest struct {
	NodeIDs []string `codec:",omitempty"`
}

// NodeUpdateStatusRequest changes a node's status, with the evals it causes.
// A node change and its evals are one entry, so that a leadership loss
// cannot commit the change and lose the evals. An eval of the node without
// a NodeModifyIndex gets the entry's index.
type NodeUpdateStatusRequest struct {
	NodeID    string        `codec:",omitempty"`
	Status    string        `codec:",omitempty"`
	NodeEvent *NodeEvent    `codec:",omitempty"`
	UpdatedAt int64         `codec:",omitempty"`
	Evals     []*Evaluation `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// NodeUpdateDrainRequest sets or clears a drain, with the evals it causes.
type NodeUpdateDrainRequest struct {
	NodeID        string            `codec:",omitempty"`
	DrainStrategy *DrainStrategy    `codec:",omitempty"`
	MarkEligible  bool              `codec:",omitempty"`
	NodeEvent     *NodeEvent        `codec:",omitempty"`
	UpdatedAt     int64             `codec:",omitempty"`
	Meta          map[string]string `codec:",omitempty"`
	Evals         []*Evaluation     `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// NodeUpdateEligibilityRequest toggles scheduling eligibility.
type NodeUpdateEligibilityRequest struct {
	NodeID      string        `codec:",omitempty"`
	Eligibility string        `codec:",omitempty"`
	NodeEvent   *NodeEvent    `codec:",omitempty"`
	UpdatedAt   int64         `codec:",omitempty"`
	Evals       []*Evaluation `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// JobRegisterRequest writes a job (nil when unchanged) and its eval.
type JobRegisterRequest struct {
	Job  *Job        `codec:",omitempty"`
	Eval *Evaluation `codec:",omitempty"`
	// Submission is the job's source as submitted, stored with the
	// version the entry writes (nil: none, or an unchanged spec).
	Submission *JobSubmission `codec:",omitempty"`
	// Namespace and JobID name the job when Job is nil (unchanged spec).
	Namespace string `codec:",omitempty"`
	JobID     string `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
	// RequireNamespace makes the FSM refuse the entry when its namespace
	// does not exist. Every entry proposed since namespaces are checked
	// sets it; older entries in a log or snapshot replay as they applied.
	RequireNamespace bool `codec:",omitempty"`
	// RequireNodePool makes the FSM refuse the entry when the job's node
	// pool does not exist (set by job registration since node pools are
	// checked).
	RequireNodePool bool `codec:",omitempty"`
}

// JobDeregisterRequest stops or purges a job, with its eval.
type JobDeregisterRequest struct {
	Namespace string      `codec:",omitempty"`
	JobID     string      `codec:",omitempty"`
	Purge     bool        `codec:",omitempty"`
	Eval      *Evaluation `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// JobBatchDeregisterRequest purges many jobs at once (GC).
type JobBatchDeregisterRequest struct {
	Jobs  []NamespacedID `codec:",omitempty"`
	Evals []*Evaluation  `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// EvalUpdateRequest upserts evals.
type EvalUpdateRequest struct {
	Evals     []*Evaluation `codec:",omitempty"`
	EvalToken string        `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// EvalDeleteRequest reaps evals and allocs.
type EvalDeleteRequest struct {
	Evals  []string `codec:",omitempty"`
	Allocs []string `codec:",omitempty"`
}

// AllocUpdateRequest carries client status updates of allocs, and the evals
// they cause.
type AllocUpdateRequest struct {
	Alloc []*Allocation `codec:",omitempty"`
	Evals []*Evaluation `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// AllocUpdateDesiredTransitionRequest sets desired transitions.
type AllocUpdateDesiredTransitionRequest struct {
	Allocs map[string]*DesiredTransition `codec:",omitempty"`
	Evals  []*Evaluation                 `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// ApplyPlanResultsRequest commits a plan.
type ApplyPlanResultsRequest struct {
	Job             *Job          `codec:",omitempty"`
	AllocsStopped   []*Allocation `codec:",omitempty"`
	AllocsUpdated   []*Allocation `codec:",omitempty"`
	AllocsPreempted []*Allocation `codec:",omitempty"`
	PreemptionEvals []*Evaluation `codec:",omitempty"`
	// FollowupEvals are created unless an eval of that ID exists (a
	// retried attempt names the same ones); AllocFollowups set the
	// FollowupEvalID of existing allocs.
	FollowupEvals  []*Evaluation    `codec:",omitempty"`
	AllocFollowups []*AllocFollowup `codec:",omitempty"`
	// PlacementMetric is the Metrics of every new alloc that has none in
	// the entry: node schedulers place thousands of allocs with one
	// identical metric, written once here.
	PlacementMetric *AllocMetric `codec:",omitempty"`
	EvalID          string       `codec:",omitempty"`
	UpdatedAt       int64        `codec:",omitempty"`
	// Deployment is created with the plan (cancelling the job's older
	// active deployment); DeploymentUpdates change deployments' statuses.
	Deployment        *Deployment               `codec:",omitempty"`
	DeploymentUpdates []*DeploymentStatusUpdate `codec:",omitempty"`
}

// SchedulerSetConfigRequest replaces the scheduler configuration.
type SchedulerSetConfigRequest struct {
	Config SchedulerConfiguration `codec:",omitempty"`
}

// JobRegisterResponse answers a job registration.
type JobRegisterResponse struct {
	EvalID          string `codec:",omitempty"`
	EvalCreateIndex uint64 `codec:",omitempty"`
	JobModifyIndex  uint64 `codec:",omitempty"`
	Warnings        string `codec:",omitempty"`
	Index           uint64 `codec:",omitempty"`
}

// JobDeregisterResponse answers a job stop.
type JobDeregisterResponse struct {
	EvalID          string `codec:",omitempty"`
	EvalCreateIndex uint64 `codec:",omitempty"`
	JobModifyIndex  uint64 `codec:",omitempty"`
	VolumeEvalID    string `codec:",omitempty"`
	VolumeEvalIndex uint64 `codec:",omitempty"`
	Index           uint64 `codec:",omitempty"`
}

// JobDispatchRequest asks to dispatch a parameterized job.
type JobDispatchRequest struct {
	JobID            string            `codec:",omitempty" bound:"jobid"`
	Payload          []byte            `codec:",omitempty" bound:"-"`
	Meta             map[string]string `codec:",omitempty"`
	IdPrefixTemplate string            `codec:",omitempty" bound:"bytes=MaxDispatchPrefixBytes"`
	Priority         int               `codec:",omitempty"`
	IdempotencyToken string            `codec:",omitempty" bound:"id"`
}

// JobDispatchResponse answers a dispatch.
type JobDispatchResponse struct {
	DispatchedJobID string `codec:",omitempty"`
	EvalID          string `codec:",omitempty"`
	EvalCreateIndex uint64 `codec:",omitempty"`
	JobCreateIndex  uint64 `codec:",omitempty"`
	Index           uint64 `codec:",omitempty"`
}

// PeriodicForceResponse answers a forced periodic launch.
type PeriodicForceResponse struct {
	EvalID          string `codec:",omitempty"`
	EvalCreateIndex uint64 `codec:",omitempty"`
	Index           uint64 `codec:",omitempty"`
}

// NodeEligibilityUpdateResponse answers an eligibility or drain change.
type NodeEligibilityUpdateResponse struct {
	NodeModifyIndex uint64   `codec:",omitempty"`
	EvalIDs         []string `codec:",omitempty"`
	EvalCreateIndex uint64   `codec:",omitempty"`
	Index           uint64   `codec:",omitempty"`
}

// AllocStopResponse answers an alloc stop.
type AllocStopResponse struct {
	EvalID string `codec:",omitempty"`
	Index  uint64 `codec:",omitempty"`
}

// JobPlanResponse answers a dry-run plan of a job.
type JobPlanResponse struct {
	Annotations    *PlanAnnotations        `codec:",omitempty"`
	FailedTGAllocs map[string]*AllocMetric `codec:",omitempty"`
	JobModifyIndex uint64                  `codec:",omitempty"`
	CreatedEvals   []*Evaluation           `codec:",omitempty"`
	Diff           *JobDiff                `codec:",omitempty"`
	// NextPeriodicLaunch is a time, not UnixNano, in Nomad's API: its client
	// decodes it as an RFC 3339 string.
	NextPeriodicLaunch time.Time `codec:",omitempty"`
	Warnings           string    `codec:",omitempty"`
	Index              uint64    `codec:",omitempty"`
}

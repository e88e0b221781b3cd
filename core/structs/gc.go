package structs

import (
	"fmt"
	"time"
)

// GCReapRequestType is the Raft entry of the leader's garbage collector: a
// conditional delete of allocations, evals, jobs, nodes, CSI plugins and
// tokens (GCReapRequest). Drover's own number: Nomad reaps unconditionally
// through EvalDelete (7), JobBatchDeregister (26) and NodeBatchDeregister
// (31); drover's GC re-checks every object when the entry applies, so a
// decision about an object that changed since its page was built is void.
const GCReapRequestType MessageType = 80

// Bounds of one GCReapRequest, checked by the leader before it proposes an
// entry (GCReapRequest.Validate) and by the state store when it applies
// one. They keep a reap entry, and the time the FSM spends on it, small.
const (
	// MaxGCReapObjects bounds the objects of one entry, all kinds
	// together: Nomad's bound on one Eval.Reap request (its 7,281 IDs fit
	// a 256 KiB entry).
	MaxGCReapObjects = 7281
	// MaxGCReapJobs bounds the jobs of one entry (Nomad's job GC batch):
	// each purge also deletes the job's versions, summary and launch.
	MaxGCReapJobs = 2048
)

// GCRef names one object a GC entry deletes and the modify index the leader
// decided it at. Namespace is empty for nodes, CSI plugins and tokens; ID
// is an accessor ID for tokens.
type GCRef struct {
	Namespace   string `codec:",omitempty"`
	ID          string `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
}

// GCReapRequest deletes objects garbage collection decided to reap. The
// state store applies it object by object and skips, never fails on, an
// object that is gone, moved past its ModifyIndex, or no longer meets the
// floor below, checked against the state as the entry applies:
//
//   - an allocation whose client status is terminal;
//   - a terminal eval all of whose allocations are gone or reaped by this
//     entry;
//   - a job that is dead or stopped all of whose evals and allocations are
//     gone or reaped by this entry;
//   - a down node with no allocation whose client status is not terminal;
//   - a CSI plugin with no instances, none expected, and no volumes;
//   - a one-time token or ACL token expired before Now.
//
// Allocations are deleted first, then evals, jobs and the rest, so an eval
// and its allocations, or a job and its children, can go in one entry.
type GCReapRequest struct {
	Allocs        []GCRef `codec:",omitempty"`
	Evals         []GCRef `codec:",omitempty"`
	Jobs          []GCRef `codec:",omitempty"`
	Nodes         []GCRef `codec:",omitempty"`
	CSIPlugins    []GCRef `codec:",omitempty"`
	OneTimeTokens []GCRef `codec:",omitempty"`
	ACLTokens     []GCRef `codec:",omitempty"`
	// Deployments that are terminal and have no allocation whose client
	// status is not terminal (other than those this entry reaps).
	Deployments []GCRef `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry: tokens are expired relative to it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// StampNow sets Now.
func (r *GCReapRequest) StampNow(n int64) { stamp(&r.Now, n) }

// Len is the number of objects the request names.
func (r *GCReapRequest) Len() int {
	return len(r.Allocs) + len(r.Evals) + len(r.Jobs) + len(r.Nodes) + len(r.CSIPlugins) +
		len(r.OneTimeTokens) + len(r.ACLTokens) + len(r.Deployments)
}

// Validate checks the request's bounds (MaxGCReapObjects, MaxGCReapJobs).
func (r *GCReapRequest) Validate() error {
	if n := r.Len(); n > MaxGCReapObjects {
		return &LimitError{Msg: fmt.Sprintf("a GC reap names %d objects", n),
			Limit: fmt.Sprintf("MaxGCReapObjects (%d)", MaxGCReapObjects), Kind: ErrInvalid}
	}
	if n := len(r.Jobs); n > MaxGCReapJobs {
		return &LimitError{Msg: fmt.Sprintf("a GC reap names %d jobs", n),
			Limit: fmt.Sprintf("MaxGCReapJobs (%d)", MaxGCReapJobs), Kind: ErrInvalid}
	}
	return nil
}

// GCReapResponse is what a GCReapRequest did: the objects deleted, by kind,
// and how many it skipped because they changed or were already gone.
type GCReapResponse struct {
	Allocs, Evals, Jobs, Nodes, CSIPlugins, OneTimeTokens, ACLTokens int
	Deployments                                                      int
	Skipped                                                          int
	// DeletedJobs lists the jobs purged, for the FSM's hooks.
	DeletedJobs []NamespacedID
	// Apply is how long the entry held the state machine (the leader's
	// own apply; not replicated), for the collector's entry sizing.
	Apply time.Duration `codec:"-" json:"-"`
}

// Reaped is the number of objects deleted.
func (r *GCReapResponse) Reaped() int {
	return r.Allocs + r.Evals + r.Jobs + r.Nodes + r.CSIPlugins + r.OneTimeTokens + r.ACLTokens + r.Deployments
}

// ReconcileJobSummariesRequest rebuilds job summaries from the state
// (PUT /v1/system/reconcile/summaries): those of at most Limit jobs after
// (AfterNamespace, AfterID) in (namespace, ID) order, so a large state is
// reconciled in bounded entries the leader paces. Limit 0 is every job in
// one entry (as entries written before paging ask).
type ReconcileJobSummariesRequest struct {
	AfterNamespace string `codec:",omitempty"`
	AfterID        string `codec:",omitempty"`
	Limit          int    `codec:",omitempty"`
}

// MaxReconcileJobs bounds ReconcileJobSummariesRequest.Limit.
const MaxReconcileJobs = 10_000

// Validate refuses a request over its bounds.
func (r *ReconcileJobSummariesRequest) Validate() error {
	if r.Limit < 0 || r.Limit > MaxReconcileJobs {
		return NewError(ErrInvalid, "Limit: %d is out of range (0 to %d)", r.Limit, MaxReconcileJobs)
	}
	if len(r.AfterNamespace)+len(r.AfterID) > DefaultMaxRequestBodyBytes {
		return NewError(ErrInvalid, "AfterNamespace, AfterID: longer than %d bytes", DefaultMaxRequestBodyBytes)
	}
	return nil
}

// ReconcileJobSummariesResponse says where a bounded reconciliation
// stopped: Done when no job is left after the last one it reconciled
// (NextNamespace, NextID).
type ReconcileJobSummariesResponse struct {
	Reconciled    int
	NextNamespace string
	NextID        string
	Done          bool
}

package structs

import "time"

// Evaluation is a request to reconcile a job's desired and actual state.
type Evaluation struct {
	ID                   string                  `codec:",omitempty"`
	Namespace            string                  `codec:",omitempty"`
	Priority             int                     `codec:",omitempty"`
	Type                 string                  `codec:",omitempty"`
	TriggeredBy          string                  `codec:",omitempty"`
	JobID                string                  `codec:",omitempty"`
	JobModifyIndex       uint64                  `codec:",omitempty"`
	NodeID               string                  `codec:",omitempty"`
	NodeModifyIndex      uint64                  `codec:",omitempty"`
	DeploymentID         string                  `codec:",omitempty"`
	Status               string                  `codec:",omitempty"`
	StatusDescription    string                  `codec:",omitempty"`
	Wait                 time.Duration           `codec:",omitempty"`
	WaitUntil            time.Time               `codec:",omitempty"`
	NextEval             string                  `codec:",omitempty"`
	PreviousEval         string                  `codec:",omitempty"`
	BlockedEval          string                  `codec:",omitempty"`
	RelatedEvals         []*EvaluationStub       `codec:",omitempty"`
	FailedTGAllocs       map[string]*AllocMetric `codec:",omitempty"`
	ClassEligibility     map[string]bool         `codec:",omitempty"`
	EscapedComputedClass bool                    `codec:",omitempty"`
	QuotaLimitReached    string                  `codec:",omitempty"`
	AnnotatePlan         bool                    `codec:",omitempty"`
	QueuedAllocations    map[string]int          `codec:",omitempty"`
	PlanAnnotations      *PlanAnnotations        `codec:",omitempty"`
	SnapshotIndex        uint64                  `codec:",omitempty"`
	CreateIndex          uint64                  `codec:",omitempty"`
	ModifyIndex          uint64                  `codec:",omitempty"`
	CreateTime           int64                   `codec:",omitempty"`
	ModifyTime           int64                   `codec:",omitempty"`
}

// EvaluationStub is a related eval in an eval's listing.
type EvaluationStub struct {
	ID          string `codec:",omitempty"`
	Namespace   string `codec:",omitempty"`
	Priority    int    `codec:",omitempty"`
	Type        string `codec:",omitempty"`
	TriggeredBy string `codec:",omitempty"`
	JobID       string `codec:",omitempty"`
	NodeID      string `codec:",omitempty"`
	Status      string `codec:",omitempty"`
	CreateIndex uint64 `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
}

// TerminalStatus reports whether the eval is finished.
func (e *Evaluation) TerminalStatus() bool {
	switch e.Status {
	case EvalStatusComplete, EvalStatusFailed, EvalStatusCancelled:
		return true
	}
	return false
}

// Copy returns a shallow copy with its maps copied.
func (e *Evaluation) Copy() *Evaluation {
	if e == nil {
		return nil
	}
	c := *e
	if e.FailedTGAllocs != nil {
		c.FailedTGAllocs = make(map[string]*AllocMetric, len(e.FailedTGAllocs))
		for k, v := range e.FailedTGAllocs {
			c.FailedTGAllocs[k] = v
		}
	}
	if e.QueuedAllocations != nil {
		c.QueuedAllocations = make(map[string]int, len(e.QueuedAllocations))
		for k, v := range e.QueuedAllocations {
			c.QueuedAllocations[k] = v
		}
	}
	return &c
}

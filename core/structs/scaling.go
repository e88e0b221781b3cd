package structs

import "encoding/json"

// JobScaleRequestType is the Raft entry of a scaling action (JobScaleRequest):
// the job's new version with one group's count changed (none for an event
// that only records a message), its eval and the scaling event, written
// together.
const JobScaleRequestType MessageType = 47

// Scaling bounds. Every event is kept in the state and in every snapshot,
// so what one may carry is bounded at the edge.
const (
	// MaxScalingEventsPerGroup is how many scaling events a group keeps,
	// newest first (as Nomad does).
	MaxScalingEventsPerGroup = 20
	// MaxScalingMessageBytes bounds a scaling event's Message.
	MaxScalingMessageBytes = 4 << 10
	// MaxScalingMetaBytes bounds a scaling event's Meta, JSON-encoded.
	MaxScalingMetaBytes = 16 << 10
	// ScalingTargetGroup and ScalingTargetJob are the keys of a scaling
	// request's Target (Nomad's).
	ScalingTargetGroup     = "Group"
	ScalingTargetJob       = "Job"
	ScalingTargetNamespace = "Namespace"
)

// ScalingEvent is one scaling action on a group, as Nomad's API shows it.
type ScalingEvent struct {
	// Time is when the leader proposed the action (unix nanoseconds).
	Time int64 `codec:",omitempty"`
	// Count is the count asked for; nil for an event that changed nothing.
	Count         *int64         `codec:",omitempty"`
	PreviousCount int64          `codec:",omitempty"`
	Message       string         `codec:",omitempty"`
	Error         bool           `codec:",omitempty"`
	Meta          map[string]any `codec:",omitempty"`
	// EvalID is the eval the action created; nil when it created none.
	EvalID      *string `codec:",omitempty"`
	CreateIndex uint64  `codec:",omitempty"`
}

// JobScalingEvents is a job's scaling events by group, newest first, at
// most MaxScalingEventsPerGroup per group. It is stored per job and
// deleted with the job.
type JobScalingEvents struct {
	Namespace     string                     `codec:",omitempty"`
	JobID         string                     `codec:",omitempty"`
	ScalingEvents map[string][]*ScalingEvent `codec:",omitempty"`
	ModifyIndex   uint64                     `codec:",omitempty"`
}

// Copy returns a copy whose event lists the caller may change; the
// events themselves are shared and never changed once stored.
func (e *JobScalingEvents) Copy() *JobScalingEvents {
	if e == nil {
		return nil
	}
	c := *e
	c.ScalingEvents = make(map[string][]*ScalingEvent, len(e.ScalingEvents))
	for g, l := range e.ScalingEvents {
		c.ScalingEvents[g] = append([]*ScalingEvent(nil), l...)
	}
	return &c
}

// JobScaleRequest is the Raft entry (JobScaleRequestType) of a scaling
// action. The state machine writes it only while the job is still the
// version the leader scaled (JobModifyIndex): a job changed or purged in
// between refuses the entry (ErrConflict, ErrNotFound) and nothing is
// written, so a scale never resurrects a purged job nor overwrites a newer
// version.
type JobScaleRequest struct {
	Namespace string `codec:",omitempty"`
	JobID     string `codec:",omitempty"`
	Group     string `codec:",omitempty"`
	// JobModifyIndex is the stored job's, as the leader read it.
	JobModifyIndex uint64 `codec:",omitempty"`
	// Job is the new version; nil when the count is unchanged or the
	// action only records an event.
	Job   *Job          `codec:",omitempty"`
	Eval  *Evaluation   `codec:",omitempty"`
	Event *ScalingEvent `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry; the FSM stamps the times it stores with it (see Stamped).
	Now int64 `codec:",omitempty"`
}

// StampNow implements Stamped.
func (r *JobScaleRequest) StampNow(n int64) { stamp(&r.Now, n) }

// ScalingRequest is the body of PUT /v1/job/<id>/scale (Nomad's).
type ScalingRequest struct {
	Count          *int64
	Target         map[string]string `bound:"id"`
	Message        string            `bound:"-"` // MaxScalingMessageBytes
	Error          bool
	Meta           map[string]any `bound:"-"` // MaxScalingMetaBytes, encoded
	PolicyOverride bool
	// JobModifyIndex, when set, scales only a job still at that index.
	JobModifyIndex uint64
}

// Validate checks what a scaling request carries on its own (the job's
// facts are the server's to check), naming the field and the rule.
func (r *ScalingRequest) Validate() error {
	if err := CheckBounds("ScalingRequest", r); err != nil {
		return err
	}
	var l errList
	if r.Target[ScalingTargetGroup] == "" {
		l.add("Target.Group: the task group to scale is required")
	}
	if r.Count != nil && *r.Count < 0 {
		l.add("Count: must not be negative (got %d)", *r.Count)
	}
	if len(r.Message) > MaxScalingMessageBytes {
		l.add("Message: %d bytes, more than the limit of %d", len(r.Message), MaxScalingMessageBytes)
	}
	if len(r.Meta) > 0 {
		b, err := json.Marshal(r.Meta)
		switch {
		case err != nil:
			l.add("Meta: not encodable: %v", err)
		case len(b) > MaxScalingMetaBytes:
			l.add("Meta: %d bytes encoded, more than the limit of %d", len(b), MaxScalingMetaBytes)
		}
	}
	if r.Count == nil && r.Message == "" && !r.Error {
		l.add("Count: required unless the request only records a Message or an Error")
	}
	return l.err()
}

// JobRevertRequest is the body of PUT /v1/job/<id>/revert (Nomad's).
type JobRevertRequest struct {
	JobID      string
	JobVersion uint64
	// EnforcePriorVersion, when set, reverts only while the job's current
	// version is this one.
	EnforcePriorVersion *uint64
}

// JobScaleStatusResponse answers GET /v1/job/<id>/scale (Nomad's).
type JobScaleStatusResponse struct {
	JobID          string
	Namespace      string
	JobCreateIndex uint64
	JobModifyIndex uint64
	JobStopped     bool
	TaskGroups     map[string]TaskGroupScaleStatus
}

// TaskGroupScaleStatus is one group's part of JobScaleStatusResponse.
// drover runs no deployments, so no allocation carries deployment health:
// Healthy and Unhealthy are 0, as Nomad reports for jobs without one.
type TaskGroupScaleStatus struct {
	Desired   int
	Placed    int
	Running   int
	Healthy   int
	Unhealthy int
	Events    []*ScalingEvent
}

// ScaleStatus builds a job's scale status from its allocations and its
// stored events (nil: none). Placed counts the allocations the scheduler
// still wants (not stopped, not terminal), Running those of them running.
func ScaleStatus(job *Job, allocs []*Allocation, events *JobScalingEvents) *JobScaleStatusResponse {
	out := &JobScaleStatusResponse{
		JobID: job.ID, Namespace: job.Namespace,
		JobCreateIndex: job.CreateIndex, JobModifyIndex: job.JobModifyIndex,
		JobStopped: job.Stop,
		TaskGroups: make(map[string]TaskGroupScaleStatus, len(job.TaskGroups)),
	}
	for _, tg := range job.TaskGroups {
		st := TaskGroupScaleStatus{Desired: tg.Count, Events: []*ScalingEvent{}}
		if events != nil && len(events.ScalingEvents[tg.Name]) > 0 {
			st.Events = events.ScalingEvents[tg.Name]
		}
		out.TaskGroups[tg.Name] = st
	}
	for _, a := range allocs {
		if a == nil || a.TerminalStatus() {
			continue
		}
		st, ok := out.TaskGroups[a.TaskGroup]
		if !ok {
			continue
		}
		st.Placed++
		if a.ClientStatus == AllocClientStatusRunning {
			st.Running++
		}
		out.TaskGroups[a.TaskGroup] = st
	}
	return out
}

// ScaleTargetError is the refusal of a group the job does not have.
func ScaleTargetError(jobID, group string) error {
	return NewError(ErrInvalid, "Target.Group: task group %q specified for scaling does not exist in job %q", group, jobID)
}

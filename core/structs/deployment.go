package structs

import (
	"slices"
	"time"
)

// Deployment tracks the rollout of one job version whose groups have an
// update block, when the job's type declares deployments
// (JobTypeBehavior.Deployments). The scheduler plugin proposes it in a plan;
// the state store keeps its counters as allocations are placed and report
// health; the leader's deployment watcher fails, promotes or completes it.
// JSON field names are Nomad's (api.Deployment).
type Deployment struct {
	ID                 string                      `codec:",omitempty"`
	Namespace          string                      `codec:",omitempty"`
	JobID              string                      `codec:",omitempty"`
	JobVersion         uint64                      `codec:",omitempty"`
	JobModifyIndex     uint64                      `codec:",omitempty"`
	JobSpecModifyIndex uint64                      `codec:",omitempty"`
	JobCreateIndex     uint64                      `codec:",omitempty"`
	TaskGroups         map[string]*DeploymentState `codec:",omitempty"`
	Status             string                      `codec:",omitempty"`
	StatusDescription  string                      `codec:",omitempty"`
	EvalPriority       int                         `codec:",omitempty"`
	CreateIndex        uint64                      `codec:",omitempty"`
	ModifyIndex        uint64                      `codec:",omitempty"`
	// CreateTime and ModifyTime are unix nanoseconds, as Nomad's.
	CreateTime int64 `codec:",omitempty"`
	ModifyTime int64 `codec:",omitempty"`
}

// DeploymentState is one task group's progress in a deployment.
type DeploymentState struct {
	AutoRevert       bool          `codec:",omitempty"`
	AutoPromote      bool          `codec:",omitempty"`
	ProgressDeadline time.Duration `codec:",omitempty"`
	// RequireProgressBy is when the group fails unless an allocation
	// becomes healthy first; zero without a progress deadline. It is a
	// time (RFC 3339 in JSON), as in Nomad's API.
	RequireProgressBy time.Time `codec:",omitempty"`
	Promoted          bool      `codec:",omitempty"`
	PlacedCanaries    []string  `codec:",omitempty"`
	DesiredCanaries   int       `codec:",omitempty"`
	DesiredTotal      int       `codec:",omitempty"`
	PlacedAllocs      int       `codec:",omitempty"`
	HealthyAllocs     int       `codec:",omitempty"`
	UnhealthyAllocs   int       `codec:",omitempty"`
}

// AllocDeploymentStatus is an allocation's part in its deployment: whether
// it is a canary, and the health its client (or an operator) reported.
type AllocDeploymentStatus struct {
	// Healthy is nil until health is known.
	Healthy     *bool     `codec:",omitempty"`
	Timestamp   time.Time `codec:",omitempty"`
	Canary      bool      `codec:",omitempty"`
	ModifyIndex uint64    `codec:",omitempty"`
}

// HasHealth reports whether health was reported.
func (s *AllocDeploymentStatus) HasHealth() bool { return s != nil && s.Healthy != nil }

// IsHealthy reports whether the alloc was reported healthy.
func (s *AllocDeploymentStatus) IsHealthy() bool { return s.HasHealth() && *s.Healthy }

// IsUnhealthy reports whether the alloc was reported unhealthy.
func (s *AllocDeploymentStatus) IsUnhealthy() bool { return s.HasHealth() && !*s.Healthy }

// IsCanary reports whether the alloc was placed as a canary.
func (s *AllocDeploymentStatus) IsCanary() bool { return s != nil && s.Canary }

// Copy returns a copy.
func (s *AllocDeploymentStatus) Copy() *AllocDeploymentStatus {
	if s == nil {
		return nil
	}
	c := *s
	if s.Healthy != nil {
		h := *s.Healthy
		c.Healthy = &h
	}
	return &c
}

// Deployment statuses (Nomad's).
const (
	DeploymentStatusRunning    = "running"
	DeploymentStatusPaused     = "paused"
	DeploymentStatusFailed     = "failed"
	DeploymentStatusSuccessful = "successful"
	DeploymentStatusCancelled  = "cancelled"
	DeploymentStatusPending    = "pending"
	DeploymentStatusBlocked    = "blocked"
	DeploymentStatusUnblocking = "unblocking"
)

// Deployment status descriptions (Nomad's wording).
const (
	DeploymentStatusDescriptionRunning               = "Deployment is running"
	DeploymentStatusDescriptionRunningNeedsPromotion = "Deployment is running but requires manual promotion"
	DeploymentStatusDescriptionRunningAutoPromotion  = "Deployment is running pending automatic promotion"
	DeploymentStatusDescriptionPaused                = "Deployment is paused"
	DeploymentStatusDescriptionSuccessful            = "Deployment completed successfully"
	DeploymentStatusDescriptionStoppedJob            = "Cancelled because job is stopped"
	DeploymentStatusDescriptionNewerJob              = "Cancelled due to newer version of job"
	DeploymentStatusDescriptionFailedAllocations     = "Failed due to unhealthy allocations"
	DeploymentStatusDescriptionProgressDeadline      = "Failed due to progress deadline"
	DeploymentStatusDescriptionFailedByUser          = "Deployment marked as failed"
)

// DeploymentStatusDescriptionRollback is a failure description followed by
// the auto-revert it caused, as Nomad words it.
func DeploymentStatusDescriptionRollback(base string, version uint64) string {
	return base + " - rolling back to job version " + uitoa(version)
}

// DeploymentStatusDescriptionNoRollbackTarget is a failure description for a
// job with auto_revert but no stable version to revert to.
func DeploymentStatusDescriptionNoRollbackTarget(base string) string {
	return base + " - no stable job version to auto revert to"
}

func uitoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}

// EvalTriggerDeploymentWatcher is the trigger of evals the deployment
// watcher creates.
const EvalTriggerDeploymentWatcher = "deployment-watcher"

// Limits on what one deployment request may carry, so that every entry is
// bounded before it reaches Raft.
const (
	// MaxDeploymentAllocHealth bounds the allocation IDs of one
	// allocation-health request (healthy and unhealthy together).
	MaxDeploymentAllocHealth = 10_000
	// MaxDeploymentUpdates bounds the status updates one plan carries.
	MaxDeploymentUpdates = 64
)

// Active reports whether the deployment may still make progress.
func (d *Deployment) Active() bool {
	if d == nil {
		return false
	}
	return DeploymentStatusActive(d.Status)
}

// DeploymentStatusActive reports whether a status is not terminal.
func DeploymentStatusActive(status string) bool {
	switch status {
	case DeploymentStatusRunning, DeploymentStatusPaused, DeploymentStatusPending,
		DeploymentStatusBlocked, DeploymentStatusUnblocking:
		return true
	}
	return false
}

// DeploymentStatusKnown reports whether status is one of Nomad's.
func DeploymentStatusKnown(status string) bool {
	return DeploymentStatusActive(status) || status == DeploymentStatusFailed ||
		status == DeploymentStatusSuccessful || status == DeploymentStatusCancelled
}

// HasPlacedCanaries reports whether a group of the deployment placed a
// canary that is not yet promoted.
func (d *Deployment) HasPlacedCanaries() bool {
	for _, s := range d.TaskGroups {
		if len(s.PlacedCanaries) > 0 && !s.Promoted {
			return true
		}
	}
	return false
}

// RequiresPromotion reports whether a group wants canaries and is not
// promoted.
func (d *Deployment) RequiresPromotion() bool {
	for _, s := range d.TaskGroups {
		if s.DesiredCanaries > 0 && !s.Promoted {
			return true
		}
	}
	return false
}

// Copy returns a deep copy.
func (d *Deployment) Copy() *Deployment {
	if d == nil {
		return nil
	}
	c := *d
	if d.TaskGroups != nil {
		c.TaskGroups = make(map[string]*DeploymentState, len(d.TaskGroups))
		for k, s := range d.TaskGroups {
			c.TaskGroups[k] = s.Copy()
		}
	}
	return &c
}

// Copy returns a deep copy.
func (s *DeploymentState) Copy() *DeploymentState {
	if s == nil {
		return nil
	}
	c := *s
	c.PlacedCanaries = slices.Clone(s.PlacedCanaries)
	return &c
}

// SortedGroups returns the deployment's group names in order.
func (d *Deployment) SortedGroups() []string {
	out := make([]string, 0, len(d.TaskGroups))
	for k := range d.TaskGroups {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// DeploymentStatusUpdate changes a deployment's status.
type DeploymentStatusUpdate struct {
	DeploymentID      string `codec:",omitempty"`
	Status            string `codec:",omitempty"`
	StatusDescription string `codec:",omitempty"`
}

// DeploymentStatusUpdateRequest (Raft type DeploymentStatusUpdateRequestType)
// changes a deployment's status, with the eval it causes and, for an
// auto-revert, the job version registered again (Job, written as a new
// version). A deployment that becomes successful marks its job version
// Stable.
type DeploymentStatusUpdateRequest struct {
	DeploymentUpdate *DeploymentStatusUpdate `codec:",omitempty"`
	Job              *Job                    `codec:",omitempty"`
	Eval             *Evaluation             `codec:",omitempty"`
	// Now is the leader's clock (unix nanoseconds) when it proposed the
	// entry (see Stamped).
	Now int64 `codec:",omitempty"`
}

// DeploymentPromoteRequest (Raft type DeploymentPromoteRequestType) promotes
// the canaries of every group (All) or of the named Groups.
type DeploymentPromoteRequest struct {
	DeploymentID string      `codec:",omitempty"`
	All          bool        `codec:",omitempty"`
	Groups       []string    `codec:",omitempty"`
	Eval         *Evaluation `codec:",omitempty"`
	Now          int64       `codec:",omitempty"`
}

// DeploymentAllocHealthRequest (Raft type DeploymentAllocHealthRequestType)
// sets the health of allocations of a deployment (manual health, or the
// watcher's), with an optional status change (a failure), auto-revert job
// and eval.
type DeploymentAllocHealthRequest struct {
	DeploymentID           string                  `codec:",omitempty"`
	HealthyAllocationIDs   []string                `codec:",omitempty"`
	UnhealthyAllocationIDs []string                `codec:",omitempty"`
	DeploymentUpdate       *DeploymentStatusUpdate `codec:",omitempty"`
	Job                    *Job                    `codec:",omitempty"`
	Eval                   *Evaluation             `codec:",omitempty"`
	Now                    int64                   `codec:",omitempty"`
}

// DeploymentDeleteRequest (Raft type DeploymentDeleteRequestType) deletes
// deployments (the GC).
type DeploymentDeleteRequest struct {
	Deployments []string `codec:",omitempty"`
}

func (r *DeploymentStatusUpdateRequest) StampNow(n int64) { stamp(&r.Now, n) }
func (r *DeploymentPromoteRequest) StampNow(n int64)      { stamp(&r.Now, n) }
func (r *DeploymentAllocHealthRequest) StampNow(n int64)  { stamp(&r.Now, n) }

// Raft message types of deployments (Nomad's numbers).
const (
	DeploymentStatusUpdateRequestType MessageType = 14
	DeploymentPromoteRequestType      MessageType = 15
	DeploymentAllocHealthRequestType  MessageType = 16
	DeploymentDeleteRequestType       MessageType = 17
)

// DeploymentUpdateResponse answers a deployment write (Nomad's shape).
type DeploymentUpdateResponse struct {
	EvalID                string  `codec:",omitempty"`
	EvalCreateIndex       uint64  `codec:",omitempty"`
	DeploymentModifyIndex uint64  `codec:",omitempty"`
	RevertedJobVersion    *uint64 `codec:",omitempty"`
	Index                 uint64  `codec:",omitempty"`
}

// Update block health checks.
const (
	UpdateHealthCheckChecks     = "checks"
	UpdateHealthCheckTaskStates = "task_states"
	UpdateHealthCheckManual     = "manual"
)

// validate checks an update block's values (Nomad's rules). An empty block
// (the Nomad API client sends one for every job) is valid.
func (u *UpdateStrategy) validate(l *errList, where string) {
	if u.IsEmpty() {
		return
	}
	where += ": update"
	switch u.HealthCheck {
	case "", UpdateHealthCheckChecks, UpdateHealthCheckTaskStates, UpdateHealthCheckManual:
	default:
		l.add("%s: health_check is %q, must be one of %q, %q or %q", where, u.HealthCheck,
			UpdateHealthCheckChecks, UpdateHealthCheckTaskStates, UpdateHealthCheckManual)
	}
	if u.MaxParallel < 0 {
		l.add("%s: max_parallel is %d, must not be negative", where, u.MaxParallel)
	}
	if u.Canary < 0 {
		l.add("%s: canary is %d, must not be negative", where, u.Canary)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"min_healthy_time", u.MinHealthyTime}, {"healthy_deadline", u.HealthyDeadline},
		{"progress_deadline", u.ProgressDeadline}, {"stagger", u.Stagger}} {
		if d.v < 0 {
			l.add("%s: %s is %s, must not be negative", where, d.name, d.v)
		}
	}
	if u.HealthyDeadline > 0 && u.MinHealthyTime >= u.HealthyDeadline {
		l.add("%s: min_healthy_time (%s) must be less than healthy_deadline (%s)", where, u.MinHealthyTime, u.HealthyDeadline)
	}
	if u.ProgressDeadline > 0 && u.HealthyDeadline > u.ProgressDeadline {
		l.add("%s: healthy_deadline (%s) must not exceed progress_deadline (%s)", where, u.HealthyDeadline, u.ProgressDeadline)
	}
}

// validate checks a migrate block's values (Nomad's rules).
func (m *MigrateStrategy) validate(l *errList, where string) {
	if m == nil {
		return
	}
	where += ": migrate"
	switch m.HealthCheck {
	case "", UpdateHealthCheckChecks, UpdateHealthCheckTaskStates:
	default:
		l.add("%s: health_check is %q, must be %q or %q", where, m.HealthCheck, UpdateHealthCheckChecks, UpdateHealthCheckTaskStates)
	}
	if m.MaxParallel < 0 {
		l.add("%s: max_parallel is %d, must not be negative", where, m.MaxParallel)
	}
	if m.MinHealthyTime < 0 {
		l.add("%s: min_healthy_time is %s, must not be negative", where, m.MinHealthyTime)
	}
	if m.HealthyDeadline < 0 {
		l.add("%s: healthy_deadline is %s, must not be negative", where, m.HealthyDeadline)
	}
	if m.HealthyDeadline > 0 && m.MinHealthyTime >= m.HealthyDeadline {
		l.add("%s: min_healthy_time (%s) must be less than healthy_deadline (%s)", where, m.MinHealthyTime, m.HealthyDeadline)
	}
}

// HealthStrategy is the migrate block as the update block its health
// check reads (health_check, min_healthy_time, healthy_deadline).
func (m *MigrateStrategy) HealthStrategy() *UpdateStrategy {
	if m == nil {
		return nil
	}
	return &UpdateStrategy{HealthCheck: m.HealthCheck, MinHealthyTime: m.MinHealthyTime, HealthyDeadline: m.HealthyDeadline}
}

// HasDeployment reports whether a group's update block makes it roll out
// through a deployment: max_parallel > 0, as in Nomad.
func (u *UpdateStrategy) HasDeployment() bool { return u != nil && u.MaxParallel > 0 }

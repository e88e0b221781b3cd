package structs

import (
	"encoding/json"
	"strings"
	"time"
)

// Job is a user's declaration of work. A job is identified by
// (Namespace, ID); every write bumps Version and JobModifyIndex.
type Job struct {
	Region                   string
	Namespace                string
	ID                       string
	ParentID                 string
	Name                     string
	Type                     string
	Priority                 int
	AllAtOnce                bool
	Datacenters              []string
	NodePool                 string
	Constraints              []*Constraint
	Affinities               []*Affinity
	Spreads                  []*Spread
	TaskGroups               []*TaskGroup
	Update                   *UpdateStrategy
	Periodic                 *PeriodicConfig
	ParameterizedJob         *ParameterizedJobConfig
	Dispatched               bool
	DispatchIdempotencyToken string
	Payload                  []byte
	Meta                     map[string]string
	Stop                     bool
	Status                   string
	StatusDescription        string
	Stable                   bool
	Version                  uint64
	SubmitTime               int64
	CreateIndex              uint64
	ModifyIndex              uint64
	JobModifyIndex           uint64
}

// TaskGroup is a set of tasks placed together on one node.
type TaskGroup struct {
	Name             string
	Count            int
	Update           *UpdateStrategy
	Constraints      []*Constraint
	Affinities       []*Affinity
	Spreads          []*Spread
	RestartPolicy    *RestartPolicy
	ReschedulePolicy *ReschedulePolicy
	Migrate          *MigrateStrategy
	EphemeralDisk    *EphemeralDisk
	Tasks            []*Task
	Meta             map[string]string
	MaxRunDuration   *time.Duration
	ShutdownDelay    *time.Duration
}

// Task is one process run by a driver.
type Task struct {
	Name            string
	Driver          string
	User            string
	Config          map[string]any
	Env             map[string]string
	Constraints     []*Constraint
	Affinities      []*Affinity
	Resources       *Resources
	RestartPolicy   *RestartPolicy
	DispatchPayload *DispatchPayloadConfig
	Lifecycle       *TaskLifecycleConfig
	Meta            map[string]string
	KillTimeout     time.Duration
	KillSignal      string
	LogConfig       *LogConfig
	Leader          bool
}

// Resources asked by a task, in MHz and MB.
type Resources struct {
	CPU         int
	Cores       int
	MemoryMB    int
	MemoryMaxMB int
	DiskMB      int
	IOPS        int
}

// Constraint restricts placement; String() is the key shown in
// AllocMetric.ConstraintFiltered.
type Constraint struct {
	LTarget string
	RTarget string
	Operand string
}

func (c *Constraint) String() string {
	return c.LTarget + " " + c.Operand + " " + c.RTarget
}

// Affinity is accepted for compatibility; the built-in node schedulers do
// not score by it.
type Affinity struct {
	LTarget string
	RTarget string
	Operand string
	Weight  int8
}

// Spread is accepted for compatibility.
type Spread struct {
	Attribute    string
	Weight       int8
	SpreadTarget []*SpreadTarget
}

// SpreadTarget is one value of a spread.
type SpreadTarget struct {
	Value   string
	Percent uint8
}

// RestartPolicy drives the client's restart tracker.
type RestartPolicy struct {
	Attempts        int
	Interval        time.Duration
	Delay           time.Duration
	Mode            string
	RenderTemplates bool
}

// ReschedulePolicy exists so that a reschedule block on system and sysbatch
// jobs can be refused by name.
type ReschedulePolicy struct {
	Attempts      int
	Interval      time.Duration
	Delay         time.Duration
	DelayFunction string
	MaxDelay      time.Duration
	Unlimited     bool
}

// MigrateStrategy is accepted for service jobs only.
type MigrateStrategy struct {
	MaxParallel     int
	HealthCheck     string
	MinHealthyTime  time.Duration
	HealthyDeadline time.Duration
}

// UpdateStrategy limits destructive updates.
type UpdateStrategy struct {
	Stagger          time.Duration
	MaxParallel      int
	HealthCheck      string
	MinHealthyTime   time.Duration
	HealthyDeadline  time.Duration
	ProgressDeadline time.Duration
	AutoRevert       bool
	AutoPromote      bool
	Canary           int
}

// EphemeralDisk is the group's shared scratch disk.
type EphemeralDisk struct {
	Sticky  bool
	SizeMB  int
	Migrate bool
}

// PeriodicConfig launches children of a job on a cron schedule.
type PeriodicConfig struct {
	Enabled         bool
	Spec            string
	Specs           []string
	SpecType        string
	ProhibitOverlap bool
	TimeZone        string
}

// AllSpecs returns Spec and Specs together.
func (p *PeriodicConfig) AllSpecs() []string {
	if p == nil {
		return nil
	}
	var out []string
	if p.Spec != "" {
		out = append(out, p.Spec)
	}
	return append(out, p.Specs...)
}

// ParameterizedJobConfig makes a job a template for dispatched children.
type ParameterizedJobConfig struct {
	Payload      string
	MetaRequired []string
	MetaOptional []string
}

// DispatchPayloadConfig names the file, relative to local/, that receives a
// dispatched job's payload.
type DispatchPayloadConfig struct {
	File string
}

// TaskLifecycleConfig orders tasks inside a group.
type TaskLifecycleConfig struct {
	Hook    string
	Sidecar bool
}

// LogConfig bounds a task's log files.
type LogConfig struct {
	MaxFiles      int
	MaxFileSizeMB int
	Disabled      bool
}

// Stopped reports whether the job is absent or stopped.
func (j *Job) Stopped() bool { return j == nil || j.Stop }

// IsPeriodic reports whether the job is a periodic parent.
func (j *Job) IsPeriodic() bool { return j != nil && j.Periodic != nil }

// IsPeriodicActive reports whether the dispatcher should track the job.
func (j *Job) IsPeriodicActive() bool {
	return j.IsPeriodic() && j.Periodic.Enabled && !j.Stopped() && !j.IsParameterized()
}

// IsParameterized reports whether the job is a parameterized parent (not a
// dispatched child).
func (j *Job) IsParameterized() bool {
	return j != nil && j.ParameterizedJob != nil && !j.Dispatched
}

// IsParent reports whether the job launches children instead of running.
func (j *Job) IsParent() bool { return j.IsPeriodic() || j.IsParameterized() }

// LookupTaskGroup finds a group by name.
func (j *Job) LookupTaskGroup(name string) *TaskGroup {
	for _, tg := range j.TaskGroups {
		if tg.Name == name {
			return tg
		}
	}
	return nil
}

// LookupTask finds a task by name.
func (tg *TaskGroup) LookupTask(name string) *Task {
	for _, t := range tg.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Copy returns a deep copy made through JSON; jobs are small and copied
// rarely (on register and on child derivation), so clarity wins over speed.
func (j *Job) Copy() *Job {
	if j == nil {
		return nil
	}
	b, err := json.Marshal(j)
	if err != nil {
		panic(err)
	}
	var out Job
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return &out
}

// SpecChanged reports whether the user-controlled parts of the job differ,
// ignoring the fields that the server stamps.
func (j *Job) SpecChanged(other *Job) bool {
	if j == nil || other == nil {
		return j != other
	}
	a, b := j.Copy(), other.Copy()
	for _, x := range []*Job{a, b} {
		x.Status, x.StatusDescription, x.Stable = "", "", false
		x.Version, x.SubmitTime = 0, 0
		x.CreateIndex, x.ModifyIndex, x.JobModifyIndex = 0, 0, 0
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return string(ab) != string(bb)
}

// NamespacedID is the unique key of a namespaced object.
type NamespacedID struct {
	ID        string
	Namespace string
}

func (n NamespacedID) String() string { return n.Namespace + "/" + n.ID }

// JobListStub is the row of GET /v1/jobs.
type JobListStub struct {
	ID                string
	ParentID          string
	Name              string
	Namespace         string
	Datacenters       []string
	NodePool          string
	Multiregion       any
	Type              string
	Priority          int
	Periodic          bool
	ParameterizedJob  bool
	Stop              bool
	Status            string
	StatusDescription string
	JobSummary        *JobSummary
	CreateIndex       uint64
	ModifyIndex       uint64
	JobModifyIndex    uint64
	SubmitTime        int64
	Meta              map[string]string
}

// Stub summarises the job for list endpoints.
func (j *Job) Stub(summary *JobSummary) *JobListStub {
	return &JobListStub{
		ID: j.ID, ParentID: j.ParentID, Name: j.Name, Namespace: j.Namespace,
		Datacenters: j.Datacenters, NodePool: j.NodePool, Type: j.Type, Priority: j.Priority,
		Periodic: j.IsPeriodic(), ParameterizedJob: j.IsParameterized(), Stop: j.Stop,
		Status: j.Status, StatusDescription: j.StatusDescription, JobSummary: summary,
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex, JobModifyIndex: j.JobModifyIndex,
		SubmitTime: j.SubmitTime, Meta: j.Meta,
	}
}

// PeriodicLaunch records the last launch of a periodic parent.
type PeriodicLaunch struct {
	ID          string
	Namespace   string
	Launch      time.Time
	CreateIndex uint64
	ModifyIndex uint64
}

// IsPeriodicChild reports whether id names a periodic child of parent.
func IsPeriodicChild(parent, id string) bool {
	return strings.HasPrefix(id, parent+PeriodicLaunchSuffix)
}

// JobSummary counts a job's allocations per group by client status.
type JobSummary struct {
	JobID       string
	Namespace   string
	Summary     map[string]TaskGroupSummary
	Children    *JobChildrenSummary
	CreateIndex uint64
	ModifyIndex uint64
}

// TaskGroupSummary counts a group's allocations.
type TaskGroupSummary struct {
	Queued   int
	Complete int
	Failed   int
	Running  int
	Starting int
	Lost     int
	Unknown  int
}

// JobChildrenSummary counts a parent's children by status.
type JobChildrenSummary struct {
	Pending int64
	Running int64
	Dead    int64
}

package structs

import (
	"encoding/json"
	"math"
	"strings"
	"time"
)

// Job is a user's declaration of work. A job is identified by
// (Namespace, ID); every write bumps Version and JobModifyIndex.
type Job struct {
	Region                   string                  `codec:",omitempty" bound:"id"`
	Namespace                string                  `codec:",omitempty" bound:"id"`
	ID                       string                  `codec:",omitempty" bound:"jobid"`
	ParentID                 string                  `codec:",omitempty" bound:"jobid"`
	Name                     string                  `codec:",omitempty" bound:"jobid"`
	Type                     string                  `codec:",omitempty" bound:"id"`
	Priority                 int                     `codec:",omitempty"`
	AllAtOnce                bool                    `codec:",omitempty"`
	Datacenters              []string                `codec:",omitempty" bound:"id"`
	NodePool                 string                  `codec:",omitempty" bound:"id"`
	Constraints              []*Constraint           `codec:",omitempty"`
	Affinities               []*Affinity             `codec:",omitempty"`
	Spreads                  []*Spread               `codec:",omitempty"`
	TaskGroups               []*TaskGroup            `codec:",omitempty"`
	Update                   *UpdateStrategy         `codec:",omitempty"`
	Periodic                 *PeriodicConfig         `codec:",omitempty"`
	ParameterizedJob         *ParameterizedJobConfig `codec:",omitempty"`
	Dispatched               bool                    `codec:",omitempty"`
	DispatchIdempotencyToken string                  `codec:",omitempty" bound:"id"`
	Payload                  []byte                  `codec:",omitempty" bound:"payload"`
	Meta                     map[string]string       `codec:",omitempty"`
	UI                       *JobUIConfig            `codec:",omitempty"`
	// Multiregion, VaultToken and ConsulToken are parsed as Nomad parses
	// them and refused at registration (job_integrations.go).
	Multiregion       *Multiregion `codec:",omitempty"`
	VaultToken        string       `codec:",omitempty" bound:"id"`
	ConsulToken       string       `codec:",omitempty" bound:"id"`
	Stop              bool         `codec:",omitempty"`
	Status            string       `codec:",omitempty" bound:"id"`
	StatusDescription string       `codec:",omitempty"`
	Stable            bool         `codec:",omitempty"`
	Version           uint64       `codec:",omitempty"`
	SubmitTime        int64        `codec:",omitempty"`
	CreateIndex       uint64       `codec:",omitempty"`
	ModifyIndex       uint64       `codec:",omitempty"`
	JobModifyIndex    uint64       `codec:",omitempty"`
	// TypeBehavior is the declaration of the plugin serving Type when this
	// version was registered, copied in by the leader (a submitted value
	// is replaced). It is drover's, not Nomad's.
	TypeBehavior *JobTypeBehavior `codec:",omitempty" bound:"-"`
	// DefaultServiceProvider is the servers' default_service_provider
	// when this version was registered, stamped by the server (a
	// submitted value is replaced): with "nomad", the services that named
	// no provider are drover's, and the templates' Consul catalogue
	// functions (service, services) read drover's catalogue. Drover's.
	DefaultServiceProvider string `codec:",omitempty" bound:"id"`
}

// TaskGroup is a set of tasks placed together on one node.
type TaskGroup struct {
	Name             string                    `codec:",omitempty" bound:"id"`
	Count            int                       `codec:",omitempty"`
	Update           *UpdateStrategy           `codec:",omitempty"`
	Constraints      []*Constraint             `codec:",omitempty"`
	Affinities       []*Affinity               `codec:",omitempty"`
	Spreads          []*Spread                 `codec:",omitempty"`
	RestartPolicy    *RestartPolicy            `codec:",omitempty"`
	ReschedulePolicy *ReschedulePolicy         `codec:",omitempty"`
	Migrate          *MigrateStrategy          `codec:",omitempty"`
	EphemeralDisk    *EphemeralDisk            `codec:",omitempty"`
	Tasks            []*Task                   `codec:",omitempty"`
	Meta             map[string]string         `codec:",omitempty"`
	MaxRunDuration   *time.Duration            `codec:",omitempty"`
	ShutdownDelay    *time.Duration            `codec:",omitempty"`
	Volumes          map[string]*VolumeRequest `codec:",omitempty"`
	Networks         []*NetworkResource        `codec:",omitempty"`
	Services         []*Service                `codec:",omitempty"`
	Scaling          *ScalingPolicy            `codec:",omitempty"`
	Disconnect       *DisconnectStrategy       `codec:",omitempty"`
	// Consul is parsed as Nomad parses it and refused at registration.
	Consul *Consul `codec:",omitempty"`
	// The deprecated forms of Disconnect's fields, kept for job files
	// that still use them.
	MaxClientDisconnect       *time.Duration `codec:",omitempty"`
	StopAfterClientDisconnect *time.Duration `codec:",omitempty"`
	PreventRescheduleOnLost   bool           `codec:",omitempty"`
}

// Task is one process run by a driver.
type Task struct {
	Name            string                 `codec:",omitempty" bound:"id"`
	Driver          string                 `codec:",omitempty" bound:"id"`
	User            string                 `codec:",omitempty" bound:"id"`
	Config          map[string]any         `codec:",omitempty" bound:"blob"`
	Env             map[string]string      `codec:",omitempty"`
	Constraints     []*Constraint          `codec:",omitempty"`
	Affinities      []*Affinity            `codec:",omitempty"`
	Resources       *Resources             `codec:",omitempty"`
	RestartPolicy   *RestartPolicy         `codec:",omitempty"`
	DispatchPayload *DispatchPayloadConfig `codec:",omitempty"`
	Lifecycle       *TaskLifecycleConfig   `codec:",omitempty"`
	Meta            map[string]string      `codec:",omitempty"`
	KillTimeout     time.Duration          `codec:",omitempty"`
	KillSignal      string                 `codec:",omitempty"`
	// ShutdownDelay: how long the task keeps running after its services
	// are deregistered, before it is killed.
	ShutdownDelay   time.Duration        `codec:",omitempty"`
	LogConfig       *LogConfig           `codec:",omitempty"`
	Leader          bool                 `codec:",omitempty"`
	VolumeMounts    []*VolumeMount       `codec:",omitempty"`
	CSIPluginConfig *TaskCSIPluginConfig `codec:",omitempty"`
	Artifacts       []*TaskArtifact      `codec:",omitempty" bound:"max=MaxArtifactsPerTask"`
	Templates       []*Template          `codec:",omitempty" bound:"max=MaxTemplatesPerTask"`
	Services        []*Service           `codec:",omitempty"`
	Kind            string               `codec:",omitempty" bound:"bytes=MaxTaskKindBytes"`
	Actions         []*Action            `codec:",omitempty" bound:"max=MaxActionsPerTask"`
	// Vault, Consul, Identity and Identities are parsed as Nomad parses
	// them and refused at registration (job_integrations.go).
	// ScalingPolicies are the task's `scaling "cpu"|"mem"` blocks (Nomad
	// Enterprise's dynamic application sizing), parsed as Nomad parses
	// them and refused at registration.
	ScalingPolicies []*ScalingPolicy    `codec:",omitempty"`
	Vault           *Vault              `codec:",omitempty"`
	Consul          *Consul             `codec:",omitempty"`
	Identity        *WorkloadIdentity   `codec:",omitempty"`
	Identities      []*WorkloadIdentity `codec:",omitempty"`
}

// Resources asked by a task, in MHz and MB.
type Resources struct {
	CPU         int `codec:",omitempty"`
	Cores       int `codec:",omitempty"`
	MemoryMB    int `codec:",omitempty"`
	MemoryMaxMB int `codec:",omitempty"`
	DiskMB      int `codec:",omitempty"`
	IOPS        int `codec:",omitempty"`
	// SecretsMB is the size asked for the task's secrets directory.
	SecretsMB int                `codec:",omitempty"`
	Devices   []*RequestedDevice `codec:",omitempty" bound:"max=MaxDevicesPerTask"`
	NUMA      *NUMAResource      `codec:",omitempty"`
}

// Constraint restricts placement; String() is the key shown in
// AllocMetric.ConstraintFiltered.
type Constraint struct {
	LTarget string `codec:",omitempty"`
	RTarget string `codec:",omitempty"`
	Operand string `codec:",omitempty" bound:"id"`
}

func (c *Constraint) String() string {
	return c.LTarget + " " + c.Operand + " " + c.RTarget
}

// Affinity is accepted for compatibility; the built-in node schedulers do
// not score by it.
type Affinity struct {
	LTarget string `codec:",omitempty"`
	RTarget string `codec:",omitempty"`
	Operand string `codec:",omitempty" bound:"id"`
	Weight  int8   `codec:",omitempty"`
}

// Spread is accepted for compatibility.
type Spread struct {
	Attribute    string          `codec:",omitempty"`
	Weight       int8            `codec:",omitempty"`
	SpreadTarget []*SpreadTarget `codec:",omitempty"`
}

// SpreadTarget is one value of a spread.
type SpreadTarget struct {
	Value   string `codec:",omitempty"`
	Percent uint8  `codec:",omitempty"`
}

// RestartPolicy drives the client's restart tracker.
type RestartPolicy struct {
	Attempts        int           `codec:",omitempty"`
	Interval        time.Duration `codec:",omitempty"`
	Delay           time.Duration `codec:",omitempty"`
	Mode            string        `codec:",omitempty" bound:"id"`
	RenderTemplates bool          `codec:",omitempty"`

	// null marks the fields a JSON block left null (job_json.go) until
	// FillNullPolicies fills them; never encoded.
	null nullFields
}

// ReschedulePolicy exists so that a reschedule block on system and sysbatch
// jobs can be refused by name.
type ReschedulePolicy struct {
	Attempts      int           `codec:",omitempty"`
	Interval      time.Duration `codec:",omitempty"`
	Delay         time.Duration `codec:",omitempty"`
	DelayFunction string        `codec:",omitempty" bound:"id"`
	MaxDelay      time.Duration `codec:",omitempty"`
	Unlimited     bool          `codec:",omitempty"`

	// null: as RestartPolicy's.
	null nullFields
}

// MigrateStrategy is accepted for service jobs only.
type MigrateStrategy struct {
	MaxParallel     int           `codec:",omitempty"`
	HealthCheck     string        `codec:",omitempty" bound:"id"`
	MinHealthyTime  time.Duration `codec:",omitempty"`
	HealthyDeadline time.Duration `codec:",omitempty"`
}

// UpdateStrategy limits destructive updates.
type UpdateStrategy struct {
	Stagger          time.Duration `codec:",omitempty"`
	MaxParallel      int           `codec:",omitempty"`
	HealthCheck      string        `codec:",omitempty" bound:"id"`
	MinHealthyTime   time.Duration `codec:",omitempty"`
	HealthyDeadline  time.Duration `codec:",omitempty"`
	ProgressDeadline time.Duration `codec:",omitempty"`
	AutoRevert       bool          `codec:",omitempty"`
	AutoPromote      bool          `codec:",omitempty"`
	Canary           int           `codec:",omitempty"`
}

// DefaultUpdateStrategy is Nomad's update block: what an update block
// leaves unset takes these values.
func DefaultUpdateStrategy() *UpdateStrategy {
	return &UpdateStrategy{
		Stagger:          30 * time.Second,
		MaxParallel:      1,
		HealthCheck:      UpdateHealthCheckChecks,
		MinHealthyTime:   10 * time.Second,
		HealthyDeadline:  5 * time.Minute,
		ProgressDeadline: 10 * time.Minute,
	}
}

// EphemeralDisk is the group's shared scratch disk.
type EphemeralDisk struct {
	Sticky  bool `codec:",omitempty"`
	SizeMB  int  `codec:",omitempty"`
	Migrate bool `codec:",omitempty"`
}

// PeriodicConfig launches children of a job on a cron schedule.
type PeriodicConfig struct {
	Enabled         bool     `codec:",omitempty"`
	Spec            string   `codec:",omitempty" bound:"bytes=MaxCronLength"`
	Specs           []string `codec:",omitempty" bound:"bytes=MaxCronLength"`
	SpecType        string   `codec:",omitempty" bound:"id"`
	ProhibitOverlap bool     `codec:",omitempty"`
	TimeZone        string   `codec:",omitempty" bound:"id"`
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
	Payload      string   `codec:",omitempty" bound:"id"`
	MetaRequired []string `codec:",omitempty" bound:"id"`
	MetaOptional []string `codec:",omitempty" bound:"id"`
}

// DispatchPayloadConfig names the file, relative to local/, that receives a
// dispatched job's payload.
type DispatchPayloadConfig struct {
	File string `codec:",omitempty"`
}

// TaskLifecycleConfig orders tasks inside a group.
type TaskLifecycleConfig struct {
	Hook    string `codec:",omitempty" bound:"id"`
	Sidecar bool   `codec:",omitempty"`
}

// LogConfig bounds a task's log files.
type LogConfig struct {
	MaxFiles      int  `codec:",omitempty"`
	MaxFileSizeMB int  `codec:",omitempty"`
	Disabled      bool `codec:",omitempty"`
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
	ID        string `codec:",omitempty"`
	Namespace string `codec:",omitempty"`
}

func (n NamespacedID) String() string { return n.Namespace + "/" + n.ID }

// JobListStub is the row of GET /v1/jobs.
type JobListStub struct {
	ID                string            `codec:",omitempty"`
	ParentID          string            `codec:",omitempty"`
	Name              string            `codec:",omitempty"`
	Namespace         string            `codec:",omitempty"`
	Datacenters       []string          `codec:",omitempty"`
	NodePool          string            `codec:",omitempty"`
	Multiregion       any               `codec:",omitempty"`
	Type              string            `codec:",omitempty"`
	Priority          int               `codec:",omitempty"`
	Periodic          bool              `codec:",omitempty"`
	ParameterizedJob  bool              `codec:",omitempty"`
	Stop              bool              `codec:",omitempty"`
	Status            string            `codec:",omitempty"`
	StatusDescription string            `codec:",omitempty"`
	JobSummary        *JobSummary       `codec:",omitempty"`
	CreateIndex       uint64            `codec:",omitempty"`
	ModifyIndex       uint64            `codec:",omitempty"`
	JobModifyIndex    uint64            `codec:",omitempty"`
	SubmitTime        int64             `codec:",omitempty"`
	Meta              map[string]string `codec:",omitempty"`
}

// Stub summarises the job for list endpoints. Meta is shared with the job,
// not copied, and only with withMeta: as Nomad does, a list shows it only
// when asked (GET /v1/jobs?meta=true), for a job's meta may be most of it.
func (j *Job) Stub(summary *JobSummary, withMeta bool) *JobListStub {
	var meta map[string]string
	if withMeta {
		meta = j.Meta
	}
	return &JobListStub{
		ID: j.ID, ParentID: j.ParentID, Name: j.Name, Namespace: j.Namespace,
		Datacenters: j.Datacenters, NodePool: j.NodePool, Type: j.Type, Priority: j.Priority,
		Periodic: j.IsPeriodic(), ParameterizedJob: j.IsParameterized(), Stop: j.Stop,
		Status: j.Status, StatusDescription: j.StatusDescription, JobSummary: summary,
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex, JobModifyIndex: j.JobModifyIndex,
		SubmitTime: j.SubmitTime, Meta: meta,
	}
}

// PeriodicLaunch records the last launch of a periodic parent.
type PeriodicLaunch struct {
	ID          string    `codec:",omitempty"`
	Namespace   string    `codec:",omitempty"`
	Launch      time.Time `codec:",omitempty"`
	CreateIndex uint64    `codec:",omitempty"`
	ModifyIndex uint64    `codec:",omitempty"`
}

// IsPeriodicChild reports whether id names a periodic child of parent.
func IsPeriodicChild(parent, id string) bool {
	return strings.HasPrefix(id, parent+PeriodicLaunchSuffix)
}

// JobSummary counts a job's allocations per group by client status.
type JobSummary struct {
	JobID       string                      `codec:",omitempty"`
	Namespace   string                      `codec:",omitempty"`
	Summary     map[string]TaskGroupSummary `codec:",omitempty"`
	Children    *JobChildrenSummary         `codec:",omitempty"`
	CreateIndex uint64                      `codec:",omitempty"`
	ModifyIndex uint64                      `codec:",omitempty"`
}

// TaskGroupSummary counts a group's allocations.
type TaskGroupSummary struct {
	Queued   int `codec:",omitempty"`
	Complete int `codec:",omitempty"`
	Failed   int `codec:",omitempty"`
	Running  int `codec:",omitempty"`
	Starting int `codec:",omitempty"`
	Lost     int `codec:",omitempty"`
	Unknown  int `codec:",omitempty"`
}

// JobChildrenSummary counts a parent's children by status.
type JobChildrenSummary struct {
	Pending int64 `codec:",omitempty"`
	Running int64 `codec:",omitempty"`
	Dead    int64 `codec:",omitempty"`
}

// UnmarshalJSON decodes a task group as Nomad's API does: a group sent
// without Count runs one allocation (Nomad's client canonicalizes an absent
// count to 1, or to its scaling block's min), while an explicit 0 is kept
// and runs none.
func (tg *TaskGroup) UnmarshalJSON(b []byte) error {
	type plain TaskGroup // no methods: no recursion
	if err := json.Unmarshal(b, (*plain)(tg)); err != nil {
		return err
	}
	if s := tg.Scaling; s != nil && s.minNull {
		// As Nomad's client: a scaling block without min has the
		// group's count as its min (once the count is known).
		defer func() { s.Min, s.minNull = int64(tg.Count), false }()
	}
	if tg.Count != 0 {
		return nil // present: the common case decodes once
	}
	var count struct {
		Count   *int
		Scaling *struct{ Min *int64 }
	}
	if err := json.Unmarshal(b, &count); err != nil {
		return err
	}
	if count.Count == nil {
		// As Nomad's client: a scaling block's min, else one.
		tg.Count = 1
		if s := count.Scaling; s != nil && s.Min != nil && *s.Min >= 0 && *s.Min <= math.MaxInt32 {
			tg.Count = int(*s.Min)
		}
	}
	return nil
}

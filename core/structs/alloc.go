package structs

import (
	"encoding/json"
	"fmt"
	"time"
)

// Allocation is one placement of a task group on a node.
type Allocation struct {
	ID                    string                `codec:",omitempty"`
	Namespace             string                `codec:",omitempty"`
	EvalID                string                `codec:",omitempty"`
	Name                  string                `codec:",omitempty"`
	NodeID                string                `codec:",omitempty"`
	NodeName              string                `codec:",omitempty"`
	JobID                 string                `codec:",omitempty"`
	Job                   *Job                  `codec:",omitempty"`
	TaskGroup             string                `codec:",omitempty"`
	Resources             *Resources            `codec:",omitempty"`
	TaskResources         map[string]*Resources `codec:",omitempty"`
	AllocatedResources    *AllocatedResources   `codec:",omitempty"`
	Metrics               *AllocMetric          `codec:",omitempty"`
	DesiredStatus         string                `codec:",omitempty"`
	DesiredDescription    string                `codec:",omitempty"`
	DesiredTransition     DesiredTransition     `codec:",omitempty"`
	ClientStatus          string                `codec:",omitempty"`
	ClientDescription     string                `codec:",omitempty"`
	TaskStates            map[string]*TaskState `codec:",omitempty"`
	AllocStates           []*AllocState         `codec:",omitempty"`
	PreviousAllocation    string                `codec:",omitempty"`
	NextAllocation        string                `codec:",omitempty"`
	DeploymentID          string                `codec:",omitempty"`
	FollowupEvalID        string                `codec:",omitempty"`
	RescheduleTracker     *RescheduleTracker    `codec:",omitempty"`
	PreemptedAllocations  []string              `codec:",omitempty"`
	PreemptedByAllocation string                `codec:",omitempty"`
	CreateIndex           uint64                `codec:",omitempty"`
	ModifyIndex           uint64                `codec:",omitempty"`
	AllocModifyIndex      uint64                `codec:",omitempty"`
	CreateTime            int64                 `codec:",omitempty"`
	ModifyTime            int64                 `codec:",omitempty"`

	// DeploymentStatus is the alloc's part in its deployment (canary,
	// health); nil outside a deployment.
	DeploymentStatus *AllocDeploymentStatus `codec:",omitempty"`

	// NetworkStatus is the alloc's address in its own network namespace
	// (bridge and cni modes), as the client reports it.
	NetworkStatus *AllocNetworkStatus `codec:",omitempty"`
}

// RescheduleTracker is the history of reschedules of an allocation's
// lineage that still counts toward its reschedule policy, oldest first.
type RescheduleTracker struct {
	Events []*RescheduleEvent `codec:",omitempty"`
}

// RescheduleEvent is one reschedule: when, from which allocation on which
// node, and the delay waited before it.
type RescheduleEvent struct {
	RescheduleTime int64         `codec:",omitempty"` // Unix ns
	PrevAllocID    string        `codec:",omitempty"`
	PrevNodeID     string        `codec:",omitempty"`
	Delay          time.Duration `codec:",omitempty"`
}

// AllocatedResources is what the plan applier reserved for the alloc.
type AllocatedResources struct {
	Tasks          map[string]*AllocatedTaskResources `codec:",omitempty"`
	TaskLifecycles map[string]*TaskLifecycleConfig    `codec:",omitempty"`
	Shared         AllocatedSharedResources           `codec:",omitempty"`
}

// AllocatedTaskResources is one task's reservation.
type AllocatedTaskResources struct {
	Cpu    AllocatedCpuResources    `codec:",omitempty"`
	Memory AllocatedMemoryResources `codec:",omitempty"`
}

// AllocatedCpuResources is a CPU reservation in MHz.
type AllocatedCpuResources struct {
	CpuShares     int64    `codec:",omitempty"`
	ReservedCores []uint16 `codec:",omitempty"`
}

// AllocatedMemoryResources is a memory reservation in MB.
type AllocatedMemoryResources struct {
	MemoryMB    int64 `codec:",omitempty"`
	MemoryMaxMB int64 `codec:",omitempty"`
}

// AllocatedSharedResources is the group's shared reservation.
type AllocatedSharedResources struct {
	DiskMB   int64                  `codec:",omitempty"`
	Networks []*NetworkResource     `codec:",omitempty"`
	Ports    []AllocatedPortMapping `codec:",omitempty"`
}

// Comparable sums the reservation into one Resources value.
func (a *AllocatedResources) Comparable() Resources {
	var r Resources
	if a == nil {
		return r
	}
	for _, t := range a.Tasks {
		r.CPU += int(t.Cpu.CpuShares)
		r.MemoryMB += int(t.Memory.MemoryMB)
	}
	r.DiskMB = int(a.Shared.DiskMB)
	return r
}

// EvalOptions are the options of a forced evaluation of a job
// (/v1/job/<id>/evaluate).
type EvalOptions struct {
	// ForceReschedule reschedules the job's failed allocations now,
	// whatever their reschedule policy and the attempts they used.
	ForceReschedule bool
}

// DesiredTransition carries server intents the scheduler acts on.
type DesiredTransition struct {
	Migrate         *bool `codec:",omitempty"`
	Reschedule      *bool `codec:",omitempty"`
	ForceReschedule *bool `codec:",omitempty"`
	NoShutdownDelay *bool `codec:",omitempty"`
}

// ShouldMigrate reports whether the alloc was marked for migration.
func (d DesiredTransition) ShouldMigrate() bool { return d.Migrate != nil && *d.Migrate }

// AllocState records a client status transition.
type AllocState struct {
	Field string    `codec:",omitempty"`
	Value string    `codec:",omitempty"`
	Time  time.Time `codec:",omitempty"`
}

// TaskState is a task's lifecycle as the client reports it.
type TaskState struct {
	State       string       `codec:",omitempty"`
	Failed      bool         `codec:",omitempty"`
	Restarts    uint64       `codec:",omitempty"`
	LastRestart time.Time    `codec:",omitempty"`
	StartedAt   time.Time    `codec:",omitempty"`
	FinishedAt  time.Time    `codec:",omitempty"`
	Events      []*TaskEvent `codec:",omitempty"`
}

// Successful reports whether the task finished without failing.
func (ts *TaskState) Successful() bool { return ts.State == TaskStateDead && !ts.Failed }

// TaskEvent is one event in a task's life, shown by `alloc status`.
type TaskEvent struct {
	Type           string            `codec:",omitempty"`
	Time           int64             `codec:",omitempty"`
	Message        string            `codec:",omitempty"`
	DisplayMessage string            `codec:",omitempty"`
	Details        map[string]string `codec:",omitempty"`
	FailsTask      bool              `codec:",omitempty"`
	RestartReason  string            `codec:",omitempty"`
	DriverError    string            `codec:",omitempty"`
	ExitCode       int               `codec:",omitempty"`
	Signal         int               `codec:",omitempty"`
	KillTimeout    time.Duration     `codec:",omitempty"`
	KillReason     string            `codec:",omitempty"`
	StartDelay     int64             `codec:",omitempty"`
	SetupError     string            `codec:",omitempty"`
}

// NewTaskEvent makes an event stamped now.
func NewTaskEvent(typ, msg string) *TaskEvent {
	return &TaskEvent{Type: typ, Time: time.Now().UnixNano(), Message: msg, DisplayMessage: msg, Details: map[string]string{}}
}

// ServerTerminalStatus reports whether the server wants the alloc stopped.
func (a *Allocation) ServerTerminalStatus() bool {
	return a.DesiredStatus == AllocDesiredStatusStop || a.DesiredStatus == AllocDesiredStatusEvict
}

// ClientTerminalStatus reports whether the client finished with the alloc.
func (a *Allocation) ClientTerminalStatus() bool {
	switch a.ClientStatus {
	case AllocClientStatusComplete, AllocClientStatusFailed, AllocClientStatusLost:
		return true
	}
	return false
}

// TerminalStatus is ServerTerminalStatus or ClientTerminalStatus.
func (a *Allocation) TerminalStatus() bool {
	return a.ServerTerminalStatus() || a.ClientTerminalStatus()
}

// RanSuccessfully reports whether every task finished dead and not failed.
func (a *Allocation) RanSuccessfully() bool {
	if len(a.TaskStates) == 0 {
		return false
	}
	for _, ts := range a.TaskStates {
		if !ts.Successful() {
			return false
		}
	}
	return true
}

// ComparableResources is the alloc's total reservation.
func (a *Allocation) ComparableResources() Resources {
	if a.AllocatedResources != nil {
		return a.AllocatedResources.Comparable()
	}
	if a.Resources != nil {
		return *a.Resources
	}
	return Resources{}
}

// Index returns the [i] suffix of the alloc's name, or -1.
func (a *Allocation) Index() int {
	var i int
	for p := len(a.Name) - 1; p >= 0; p-- {
		if a.Name[p] == '[' {
			if _, err := fmt.Sscanf(a.Name[p:], "[%d]", &i); err == nil {
				return i
			}
			break
		}
	}
	return -1
}

// Copy returns a deep copy. Job is shared: stored jobs are immutable.
func (a *Allocation) Copy() *Allocation {
	if a == nil {
		return nil
	}
	// Marshal a shallow copy without the job: a is often a stored alloc
	// that other goroutines read, so it is never written, even briefly.
	shallow := *a
	shallow.Job = nil
	job := a.Job
	b, err := json.Marshal(&shallow)
	if err != nil {
		panic(err)
	}
	var out Allocation
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	out.Job = job
	return &out
}

// AllocName builds "<job>.<group>[<index>]".
func AllocName(job, group string, idx int) string { return fmt.Sprintf("%s.%s[%d]", job, group, idx) }

// AllocListStub is the row of allocation list endpoints.
type AllocListStub struct {
	ID                    string                `codec:",omitempty"`
	EvalID                string                `codec:",omitempty"`
	Name                  string                `codec:",omitempty"`
	Namespace             string                `codec:",omitempty"`
	NodeID                string                `codec:",omitempty"`
	NodeName              string                `codec:",omitempty"`
	JobID                 string                `codec:",omitempty"`
	JobType               string                `codec:",omitempty"`
	JobVersion            uint64                `codec:",omitempty"`
	TaskGroup             string                `codec:",omitempty"`
	AllocatedResources    *AllocatedResources   `codec:",omitempty"`
	DesiredStatus         string                `codec:",omitempty"`
	DesiredDescription    string                `codec:",omitempty"`
	ClientStatus          string                `codec:",omitempty"`
	ClientDescription     string                `codec:",omitempty"`
	DesiredTransition     DesiredTransition     `codec:",omitempty"`
	TaskStates            map[string]*TaskState `codec:",omitempty"`
	FollowupEvalID        string                `codec:",omitempty"`
	NextAllocation        string                `codec:",omitempty"`
	RescheduleTracker     *RescheduleTracker    `codec:",omitempty"`
	PreemptedAllocations  []string              `codec:",omitempty"`
	PreemptedByAllocation string                `codec:",omitempty"`
	CreateIndex           uint64                `codec:",omitempty"`
	ModifyIndex           uint64                `codec:",omitempty"`
	CreateTime            int64                 `codec:",omitempty"`
	ModifyTime            int64                 `codec:",omitempty"`

	DeploymentStatus *AllocDeploymentStatus `codec:",omitempty"`
}

// Stub summarises the alloc for list endpoints.
func (a *Allocation) Stub() *AllocListStub {
	s := &AllocListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace, NodeID: a.NodeID,
		NodeName: a.NodeName, JobID: a.JobID, TaskGroup: a.TaskGroup,
		AllocatedResources: a.AllocatedResources, DesiredStatus: a.DesiredStatus,
		DesiredDescription: a.DesiredDescription, ClientStatus: a.ClientStatus,
		ClientDescription: a.ClientDescription, DesiredTransition: a.DesiredTransition,
		TaskStates: a.TaskStates, FollowupEvalID: a.FollowupEvalID, NextAllocation: a.NextAllocation,
		RescheduleTracker: a.RescheduleTracker, PreemptedAllocations: a.PreemptedAllocations, PreemptedByAllocation: a.PreemptedByAllocation,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
		DeploymentStatus: a.DeploymentStatus,
	}
	if a.Job != nil {
		s.JobType, s.JobVersion = a.Job.Type, a.Job.Version
	}
	return s
}

// AllocMetric explains a placement decision or failure.
type AllocMetric struct {
	NodesEvaluated     int                   `codec:",omitempty"`
	NodesFiltered      int                   `codec:",omitempty"`
	NodesInPool        int                   `codec:",omitempty"`
	NodePool           string                `codec:",omitempty"`
	NodesAvailable     map[string]int        `codec:",omitempty"`
	ClassFiltered      map[string]int        `codec:",omitempty"`
	ConstraintFiltered map[string]int        `codec:",omitempty"`
	NodesExhausted     int                   `codec:",omitempty"`
	ClassExhausted     map[string]int        `codec:",omitempty"`
	DimensionExhausted map[string]int        `codec:",omitempty"`
	QuotaExhausted     []string              `codec:",omitempty"`
	ResourcesExhausted map[string]*Resources `codec:",omitempty"`
	Scores             map[string]float64    `codec:",omitempty"`
	AllocationTime     time.Duration         `codec:",omitempty"`
	CoalescedFailures  int                   `codec:",omitempty"`
}

package structs

import (
	"encoding/json"
	"fmt"
	"time"
)

// Allocation is one placement of a task group on a node.
type Allocation struct {
	ID                    string
	Namespace             string
	EvalID                string
	Name                  string
	NodeID                string
	NodeName              string
	JobID                 string
	Job                   *Job
	TaskGroup             string
	Resources             *Resources
	TaskResources         map[string]*Resources
	AllocatedResources    *AllocatedResources
	Metrics               *AllocMetric
	DesiredStatus         string
	DesiredDescription    string
	DesiredTransition     DesiredTransition
	ClientStatus          string
	ClientDescription     string
	TaskStates            map[string]*TaskState
	AllocStates           []*AllocState
	PreviousAllocation    string
	NextAllocation        string
	DeploymentID          string
	FollowupEvalID        string
	PreemptedAllocations  []string
	PreemptedByAllocation string
	CreateIndex           uint64
	ModifyIndex           uint64
	AllocModifyIndex      uint64
	CreateTime            int64
	ModifyTime            int64
}

// AllocatedResources is what the plan applier reserved for the alloc.
type AllocatedResources struct {
	Tasks          map[string]*AllocatedTaskResources
	TaskLifecycles map[string]*TaskLifecycleConfig
	Shared         AllocatedSharedResources
}

// AllocatedTaskResources is one task's reservation.
type AllocatedTaskResources struct {
	Cpu    AllocatedCpuResources
	Memory AllocatedMemoryResources
}

// AllocatedCpuResources is a CPU reservation in MHz.
type AllocatedCpuResources struct {
	CpuShares     int64
	ReservedCores []uint16
}

// AllocatedMemoryResources is a memory reservation in MB.
type AllocatedMemoryResources struct {
	MemoryMB    int64
	MemoryMaxMB int64
}

// AllocatedSharedResources is the group's shared reservation.
type AllocatedSharedResources struct {
	DiskMB int64
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

// DesiredTransition carries server intents the scheduler acts on.
type DesiredTransition struct {
	Migrate         *bool
	Reschedule      *bool
	ForceReschedule *bool
	NoShutdownDelay *bool
}

// ShouldMigrate reports whether the alloc was marked for migration.
func (d DesiredTransition) ShouldMigrate() bool { return d.Migrate != nil && *d.Migrate }

// AllocState records a client status transition.
type AllocState struct {
	Field string
	Value string
	Time  time.Time
}

// TaskState is a task's lifecycle as the client reports it.
type TaskState struct {
	State       string
	Failed      bool
	Restarts    uint64
	LastRestart time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	Events      []*TaskEvent
}

// Successful reports whether the task finished without failing.
func (ts *TaskState) Successful() bool { return ts.State == TaskStateDead && !ts.Failed }

// TaskEvent is one event in a task's life, shown by `alloc status`.
type TaskEvent struct {
	Type           string
	Time           int64
	Message        string
	DisplayMessage string
	Details        map[string]string
	FailsTask      bool
	RestartReason  string
	DriverError    string
	ExitCode       int
	Signal         int
	KillTimeout    time.Duration
	KillReason     string
	StartDelay     int64
	SetupError     string
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
	job := a.Job
	a.Job = nil
	b, err := json.Marshal(a)
	a.Job = job
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
	ID                    string
	EvalID                string
	Name                  string
	Namespace             string
	NodeID                string
	NodeName              string
	JobID                 string
	JobType               string
	JobVersion            uint64
	TaskGroup             string
	AllocatedResources    *AllocatedResources
	DesiredStatus         string
	DesiredDescription    string
	ClientStatus          string
	ClientDescription     string
	DesiredTransition     DesiredTransition
	TaskStates            map[string]*TaskState
	FollowupEvalID        string
	NextAllocation        string
	PreemptedAllocations  []string
	PreemptedByAllocation string
	CreateIndex           uint64
	ModifyIndex           uint64
	CreateTime            int64
	ModifyTime            int64
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
		PreemptedAllocations: a.PreemptedAllocations, PreemptedByAllocation: a.PreemptedByAllocation,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
	if a.Job != nil {
		s.JobType, s.JobVersion = a.Job.Type, a.Job.Version
	}
	return s
}

// AllocMetric explains a placement decision or failure.
type AllocMetric struct {
	NodesEvaluated     int
	NodesFiltered      int
	NodesInPool        int
	NodePool           string
	NodesAvailable     map[string]int
	ClassFiltered      map[string]int
	ConstraintFiltered map[string]int
	NodesExhausted     int
	ClassExhausted     map[string]int
	DimensionExhausted map[string]int
	QuotaExhausted     []string
	ResourcesExhausted map[string]*Resources
	Scores             map[string]float64
	AllocationTime     time.Duration
	CoalescedFailures  int
}

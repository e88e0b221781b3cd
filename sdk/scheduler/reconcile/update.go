package reconcile

import (
	"bytes"
	"maps"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Versions indexes the job versions of a request by JobModifyIndex, so an
// alloc's own job can be found from its job_modify_index.
type Versions struct {
	current *schedulerpb.Job
	byIndex map[uint64]*schedulerpb.Job
}

// NewVersions indexes current and older versions of a job.
func NewVersions(current *schedulerpb.Job, older []*schedulerpb.Job) *Versions {
	v := &Versions{current: current, byIndex: make(map[uint64]*schedulerpb.Job, len(older))}
	for _, j := range older {
		v.byIndex[j.GetJobModifyIndex()] = j
	}
	return v
}

// JobOf returns the job version the alloc runs, or nil when the request
// does not carry it.
func (v *Versions) JobOf(a *schedulerpb.Allocation) *schedulerpb.Job {
	if v.current != nil && a.GetJobModifyIndex() == v.current.GetJobModifyIndex() {
		return v.current
	}
	return v.byIndex[a.GetJobModifyIndex()]
}

// Destructive reports whether moving an alloc of the named group from
// oldJob to newJob needs a new allocation rather than an in-place update:
// anything the running tasks were started with differs. An unknown old job
// is destructive, which is the safe answer.
//
// Constraints are deliberately not compared: an in-place update re-checks
// feasibility on the node, and a node that no longer fits turns it into a
// destructive update there. Affinities and spreads are, as Nomad does: they
// only score nodes, so no feasibility check would ever move an alloc placed
// by the old ones, and a changed spread (say its percentages) would never
// be reached by the allocs already running.
func Destructive(oldJob, newJob *schedulerpb.Job, group string) bool {
	oldTG, newTG := jobGroup(oldJob, group), jobGroup(newJob, group)
	if oldTG == nil || newTG == nil {
		return true
	}
	if !protoSlicesEqual(oldJob.GetSpreads(), newJob.GetSpreads()) ||
		!protoSlicesEqual(oldTG.GetSpreads(), newTG.GetSpreads()) ||
		!protoSlicesEqual(oldJob.GetAffinities(), newJob.GetAffinities()) ||
		!protoSlicesEqual(oldTG.GetAffinities(), newTG.GetAffinities()) {
		return true
	}
	if len(oldTG.GetTasks()) != len(newTG.GetTasks()) ||
		oldTG.GetEphemeralDiskMb() != newTG.GetEphemeralDiskMb() ||
		!protoSlicesEqual(oldTG.GetVolumes(), newTG.GetVolumes()) ||
		!protoSlicesEqual(oldTG.GetNetworks(), newTG.GetNetworks()) {
		// A changed volume block needs new claims, a changed network
		// block new ports: a new allocation.
		return true
	}
	for _, nt := range newTG.GetTasks() {
		ot := findTask(oldTG, nt.GetName())
		if ot == nil || taskChanged(ot, nt) || !protoSlicesEqual(ot.GetAffinities(), nt.GetAffinities()) {
			return true
		}
		if !maps.Equal(combinedMeta(oldJob, oldTG, ot), combinedMeta(newJob, newTG, nt)) {
			return true
		}
	}
	return false
}

// protoSlicesEqual reports whether a and b hold equal messages in order.
func protoSlicesEqual[M proto.Message](a, b []M) bool {
	return slices.EqualFunc(a, b, func(x, y M) bool { return proto.Equal(x, y) })
}

func findTask(tg *schedulerpb.TaskGroup, name string) *schedulerpb.Task {
	for _, t := range tg.GetTasks() {
		if t.GetName() == name {
			return t
		}
	}
	return nil
}

// taskChanged compares what a task was started with. The lifecycle hook
// is compared too: moving a task between phases restarts the group.
func taskChanged(a, b *schedulerpb.Task) bool {
	return a.GetDriver() != b.GetDriver() ||
		a.GetUser() != b.GetUser() ||
		!bytes.Equal(a.GetConfigJson(), b.GetConfigJson()) ||
		!maps.Equal(a.GetEnv(), b.GetEnv()) ||
		a.GetDispatchPayloadFile() != b.GetDispatchPayloadFile() ||
		a.GetLifecycleHook() != b.GetLifecycleHook() ||
		resourcesChanged(a.GetResources(), b.GetResources())
}

func resourcesChanged(a, b *schedulerpb.Resources) bool {
	return a.GetCpu() != b.GetCpu() ||
		a.GetMemoryMb() != b.GetMemoryMb() ||
		a.GetMemoryMaxMb() != b.GetMemoryMaxMb() ||
		a.GetDiskMb() != b.GetDiskMb() ||
		a.GetCores() != b.GetCores()
}

// combinedMeta is the metadata a task sees: job meta, overridden by group
// meta, overridden by task meta. A change at any level reaches the task's
// environment, so it is compared merged.
func combinedMeta(job *schedulerpb.Job, tg *schedulerpb.TaskGroup, t *schedulerpb.Task) map[string]string {
	n := len(job.GetMeta()) + len(tg.GetMeta()) + len(t.GetMeta())
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	maps.Copy(m, job.GetMeta())
	maps.Copy(m, tg.GetMeta())
	maps.Copy(m, t.GetMeta())
	return m
}

// UpdateLimit is how many destructive updates of tg one evaluation may
// make: the group's update max_parallel, else the job's, else no limit (-1).
func UpdateLimit(job *schedulerpb.Job, tg *schedulerpb.TaskGroup) int {
	if n := tg.GetUpdateMaxParallel(); n > 0 {
		return int(n)
	}
	if n := job.GetUpdateMaxParallel(); n > 0 {
		return int(n)
	}
	return -1
}

// EvictAndPlace picks the destructive updates to carry out now: each is
// stopped and placed again. Per group at most UpdateLimit are taken, in the
// order given; limited reports that some were held back for a later
// evaluation.
func EvictAndPlace(job *schedulerpb.Job, destructive []AllocTuple) (now []AllocTuple, limited bool) {
	taken := map[string]int{}
	for _, t := range destructive {
		name := t.TaskGroup.GetName()
		if limit := UpdateLimit(job, t.TaskGroup); limit >= 0 && taken[name] >= limit {
			limited = true
			continue
		}
		taken[name]++
		now = append(now, t)
	}
	return now, limited
}

package conformance

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Defaults of the requests a Builder makes. Exported so that a scenario's
// checks can name them.
const (
	// JobID is the ID and name of the job a Builder schedules.
	JobID = "kit"
	// Namespace is the namespace of the job, its eval and its allocs.
	Namespace = "default"
	// EvalID is the ID of the eval a Builder makes.
	EvalID = "c0ffee00-0000-4000-8000-000000000001"
	// Driver is the driver of every task a Builder makes and of every node.
	Driver = "raw_exec"
	// FirstIndex is the job_modify_index of the job's first version;
	// Builder.NewVersion adds 10.
	FirstIndex = 10
)

// Builder makes a ScheduleRequest: nodes, one job, the job's allocations
// and an eval, all consistent with each other (a live allocation counts in
// its node's used resources, an allocation of an older job version finds
// that version in job_versions). Methods change the request in place and
// return the Builder so calls chain; Request returns a copy.
//
// The zero state (NewBuilder) is a pending job-register eval of a job with
// one task group "web" of count 1, no nodes and no allocations.
type Builder struct {
	req     *schedulerpb.ScheduleRequest
	nallocs int
}

// NewBuilder starts a request for a job of type jobType.
func NewBuilder(jobType string) *Builder {
	job := &schedulerpb.Job{
		Id:             JobID,
		Name:           JobID,
		Namespace:      Namespace,
		Type:           jobType,
		Priority:       50,
		Datacenters:    []string{"dc1"},
		NodePool:       "default",
		JobModifyIndex: FirstIndex,
		TaskGroups:     []*schedulerpb.TaskGroup{newGroup("web", 1)},
	}
	return &Builder{req: &schedulerpb.ScheduleRequest{
		Eval: &schedulerpb.Evaluation{
			Id:             EvalID,
			Namespace:      Namespace,
			Priority:       50,
			Type:           jobType,
			TriggeredBy:    "job-register",
			JobId:          JobID,
			JobModifyIndex: FirstIndex,
			Status:         "pending",
		},
		Job:     job,
		Config:  &schedulerpb.SchedulerConfig{},
		Attempt: 1,
	}}
}

func newGroup(name string, count int32) *schedulerpb.TaskGroup {
	return &schedulerpb.TaskGroup{
		Name:            name,
		Count:           count,
		EphemeralDiskMb: 300,
		Tasks: []*schedulerpb.Task{{
			Name:       "main",
			Driver:     Driver,
			ConfigJson: []byte(`{"command":"/bin/sleep","args":["1000"]}`),
			Resources:  &schedulerpb.Resources{Cpu: 100, MemoryMb: 64},
		}},
	}
}

// NodeOption changes a node a Builder adds.
type NodeOption func(*schedulerpb.Node)

// Down marks a node down.
func Down() NodeOption { return func(n *schedulerpb.Node) { n.Status = "down" } }

// Ineligible marks a node ineligible for scheduling.
func Ineligible() NodeOption { return func(n *schedulerpb.Node) { n.Eligible = false } }

// Draining marks a node draining (and, as the core does, ineligible).
func Draining() NodeOption {
	return func(n *schedulerpb.Node) { n.Draining, n.Eligible = true, false }
}

// Capacity sets a node's allocatable resources.
func Capacity(cpu, memoryMB int64) NodeOption {
	return func(n *schedulerpb.Node) {
		n.Capacity = &schedulerpb.Resources{Cpu: cpu, MemoryMb: memoryMB, DiskMb: 100000}
	}
}

// Node adds a ready, eligible node with room for many allocations, or
// changes the node with that ID if there is one.
func (b *Builder) Node(id string, opts ...NodeOption) *Builder {
	n := b.node(id)
	if n == nil {
		n = &schedulerpb.Node{
			Id:            id,
			Name:          "host-" + id,
			Datacenter:    "dc1",
			NodePool:      "default",
			ComputedClass: "v1:kit",
			Status:        "ready",
			Eligible:      true,
			Attributes:    map[string]string{"kernel.name": "linux", "unique.hostname": "host-" + id},
			Drivers:       []string{Driver},
			Capacity:      &schedulerpb.Resources{Cpu: 8000, MemoryMb: 16384, DiskMb: 100000},
			Used:          &schedulerpb.Resources{},
		}
		b.req.Nodes = append(b.req.Nodes, n)
	}
	for _, o := range opts {
		o(n)
	}
	return b
}

// Nodes adds ready nodes "node-1" to "node-<n>".
func (b *Builder) Nodes(n int) *Builder {
	for i := 1; i <= n; i++ {
		b.Node(fmt.Sprintf("node-%d", i))
	}
	return b
}

// Group adds a task group with one small task, or sets the count of the
// group with that name.
func (b *Builder) Group(name string, count int32) *Builder {
	if tg := findGroup(b.req.GetJob(), name); tg != nil {
		tg.Count = count
		return b
	}
	b.req.Job.TaskGroups = append(b.req.Job.TaskGroups, newGroup(name, count))
	return b
}

// RemoveGroup drops a task group from the job.
func (b *Builder) RemoveGroup(name string) *Builder {
	var kept []*schedulerpb.TaskGroup
	for _, tg := range b.req.GetJob().GetTaskGroups() {
		if tg.GetName() != name {
			kept = append(kept, tg)
		}
	}
	b.req.Job.TaskGroups = kept
	return b
}

// AllocOption changes an allocation a Builder adds.
type AllocOption func(*schedulerpb.Allocation)

// ClientStatus sets an allocation's client status ("complete", "failed",
// "lost" make it terminal).
func ClientStatus(s string) AllocOption {
	return func(a *schedulerpb.Allocation) {
		a.ClientStatus = s
		a.RanSuccessfully = s == "complete"
	}
}

// Migrate sets the allocation's migrate transition, as a node drain does.
func Migrate() AllocOption { return func(a *schedulerpb.Allocation) { a.Migrate = true } }

// Alloc adds a running allocation of the job's current version, named
// "<job>.<group>[<index>]", on node. Its ID is "alloc-<n>" in the order
// allocations are added. A live allocation counts in its node's used
// resources.
func (b *Builder) Alloc(group, node string, index int, opts ...AllocOption) *Builder {
	b.nallocs++
	job := b.req.GetJob()
	res := &schedulerpb.Resources{}
	if tg := findGroup(job, group); tg != nil {
		res = groupResources(tg)
	}
	a := &schedulerpb.Allocation{
		Id:             fmt.Sprintf("alloc-%d", b.nallocs),
		Name:           fmt.Sprintf("%s.%s[%d]", JobID, group, index),
		NodeId:         node,
		TaskGroup:      group,
		JobId:          JobID,
		Namespace:      Namespace,
		JobModifyIndex: job.GetJobModifyIndex(),
		JobVersion:     job.GetVersion(),
		DesiredStatus:  "run",
		ClientStatus:   "running",
		Resources:      res,
		CreateIndex:    job.GetJobModifyIndex() + 1,
		ModifyIndex:    job.GetJobModifyIndex() + 1,
		EvalId:         "c0ffee00-0000-4000-8000-000000000000",
	}
	if n := b.node(node); n != nil {
		a.NodeName = n.GetName()
	}
	for _, o := range opts {
		o(a)
	}
	if n := b.node(node); n != nil && live(a) {
		n.Used = addResources(n.GetUsed(), res)
	}
	b.req.Allocs = append(b.req.Allocs, a)
	return b
}

// Running adds the allocations a scheduler of this kind would have placed
// for the job as it is now: for a per-node type, each group's count on
// every ready, eligible, non-draining node; otherwise each group's count,
// spread round-robin over those nodes.
func (b *Builder) Running(perNode bool) *Builder {
	var nodes []string
	for _, n := range b.req.GetNodes() {
		if schedulable(n) {
			nodes = append(nodes, n.GetId())
		}
	}
	if len(nodes) == 0 {
		return b
	}
	for _, tg := range b.req.GetJob().GetTaskGroups() {
		for i := range int(tg.GetCount()) {
			if !perNode {
				b.Alloc(tg.GetName(), nodes[i%len(nodes)], i)
				continue
			}
			for _, n := range nodes {
				b.Alloc(tg.GetName(), n, i)
			}
		}
	}
	return b
}

// OtherJobAlloc adds an allocation of another job to node's used resources
// and to its others list, as the core sends it when preemption is possible.
// The job being scheduled must never stop it unless preemption is enabled.
func (b *Builder) OtherJobAlloc(node, id string, priority int32, res *schedulerpb.Resources) *Builder {
	n := b.node(node)
	if n == nil {
		return b
	}
	n.Used = addResources(n.GetUsed(), res)
	n.Others = append(n.Others, &schedulerpb.NodeAlloc{
		Id: id, JobId: "other", Namespace: Namespace, JobPriority: priority,
		Resources: proto.Clone(res).(*schedulerpb.Resources), CreateIndex: 5,
	})
	return b
}

// NewVersion registers a new version of the job: the current version is
// kept in job_versions (allocations added so far run it), then the version
// and job_modify_index go up and change, if not nil, edits the new one.
func (b *Builder) NewVersion(change func(*schedulerpb.Job)) *Builder {
	old := proto.Clone(b.req.GetJob()).(*schedulerpb.Job)
	b.req.JobVersions = append(b.req.JobVersions, old)
	b.req.Job.Version++
	b.req.Job.JobModifyIndex += 10
	b.req.Eval.JobModifyIndex = b.req.Job.GetJobModifyIndex()
	if change != nil {
		change(b.req.Job)
	}
	return b
}

// DestructiveChange changes every task's config, so allocations of the
// previous version must be replaced, not updated in place.
func DestructiveChange(j *schedulerpb.Job) {
	for _, tg := range j.GetTaskGroups() {
		for _, t := range tg.GetTasks() {
			t.ConfigJson = []byte(fmt.Sprintf(`{"command":"/bin/sleep","args":["%d"]}`, 1000+j.GetVersion()))
		}
	}
}

// Stop marks the job stopped, with the job-deregister eval the core makes
// for it.
func (b *Builder) Stop() *Builder {
	b.req.Job.Stop = true
	return b.Trigger("job-deregister", "")
}

// Purge removes the job from the request, as after a purge, with a
// job-deregister eval.
func (b *Builder) Purge() *Builder {
	b.req.Job = nil
	b.req.JobVersions = nil
	return b.Trigger("job-deregister", "")
}

// Trigger sets what triggered the eval and, for node triggers, the node.
func (b *Builder) Trigger(triggeredBy, nodeID string) *Builder {
	b.req.Eval.TriggeredBy = triggeredBy
	b.req.Eval.NodeId = nodeID
	return b
}

// MaxPlacements sets the request's placement limit.
func (b *Builder) MaxPlacements(n int32) *Builder {
	b.req.MaxPlacements = n
	return b
}

// Edit hands the request to f for anything the other methods do not cover.
func (b *Builder) Edit(f func(*schedulerpb.ScheduleRequest)) *Builder {
	f(b.req)
	return b
}

// Request returns a copy of the request built so far.
func (b *Builder) Request() *schedulerpb.ScheduleRequest {
	return proto.Clone(b.req).(*schedulerpb.ScheduleRequest)
}

func (b *Builder) node(id string) *schedulerpb.Node {
	for _, n := range b.req.GetNodes() {
		if n.GetId() == id {
			return n
		}
	}
	return nil
}

func findGroup(job *schedulerpb.Job, name string) *schedulerpb.TaskGroup {
	for _, tg := range job.GetTaskGroups() {
		if tg.GetName() == name {
			return tg
		}
	}
	return nil
}

func groupResources(tg *schedulerpb.TaskGroup) *schedulerpb.Resources {
	r := &schedulerpb.Resources{DiskMb: tg.GetEphemeralDiskMb()}
	for _, t := range tg.GetTasks() {
		r = addResources(r, t.GetResources())
	}
	return r
}

func addResources(a, b *schedulerpb.Resources) *schedulerpb.Resources {
	return &schedulerpb.Resources{
		Cpu:         a.GetCpu() + b.GetCpu(),
		MemoryMb:    a.GetMemoryMb() + b.GetMemoryMb(),
		MemoryMaxMb: a.GetMemoryMaxMb() + b.GetMemoryMaxMb(),
		DiskMb:      a.GetDiskMb() + b.GetDiskMb(),
		Cores:       a.GetCores() + b.GetCores(),
	}
}

// schedulable reports whether new allocations may go to n.
func schedulable(n *schedulerpb.Node) bool {
	return n.GetStatus() == "ready" && n.GetEligible() && !n.GetDraining()
}

// live reports whether an allocation still runs or is meant to.
func live(a *schedulerpb.Allocation) bool {
	if a.GetDesiredStatus() != "" && a.GetDesiredStatus() != "run" {
		return false
	}
	switch a.GetClientStatus() {
	case "complete", "failed", "lost":
		return false
	}
	return true
}

// Package oneshot is an example third-party scheduler plugin for drover. It
// serves the job type "oneshot": each task group runs count allocations
// (the core defaults count to 1), each exactly once and to completion,
// spread over the feasible nodes.
//
// The rules, slot by slot (a slot is one allocation name, "job.group[i]"):
//
//   - an allocation that completed on its own fills its slot for good, under
//     every later version of the job: it is never placed again;
//   - one that failed fills its slot under the version it ran (a oneshot
//     that fails is failed: nothing restarts or replaces it), and frees the
//     slot when a new version is registered, which is a new try;
//   - one whose node went down is marked lost and placed again;
//   - a live allocation of an older version, or one marked for migration
//     (a drain, `alloc stop`), is stopped and placed again;
//   - a stopped or purged job, or a slot past a lowered count, has its
//     live allocations stopped.
//
// Its config block (Settings) bounds the allocations of a job per node
// (max_per_node).
//
// It imports only drover's sdk/ packages, as every third-party plugin must.
package oneshot

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/proto/basepb"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
	"github.com/drover-org/drover/sdk/scheduler/nodesched"
)

// Plugin identity and the job type served.
const (
	Name        = "scheduler-oneshot"
	JobType     = "oneshot"
	MaxAttempts = 3
)

// Descriptions of the stops the plugin plans, as `alloc status` shows them.
const (
	descJobStopped = "alloc not needed due to job stop"
	descNotNeeded  = "alloc not needed due to job update"
	descUpdated    = "alloc is being updated due to job update"
	descMigrated   = "alloc is being migrated"
	descLost       = "alloc is lost since its node is down"
)

// Settings is the plugin's config block in the agent, one Go struct whose
// tags give the schema the agent decodes the block against:
//
//	plugin "scheduler-oneshot" {
//	  config {
//	    max_per_node = 1
//	  }
//	}
type Settings struct {
	MaxPerNode int `hcl:"max_per_node,optional" doc:"The most allocations of one job on one node; a placement finding every feasible node at the bound fails (and the eval blocks) instead. 0: no bound."`
}

// ValidateSettings refuses settings outside their ranges, naming the field
// and the rule: the agent reports them at the field's position in its
// config file.
func ValidateSettings(s Settings) []*basepb.FieldError {
	if s.MaxPerNode < 0 {
		return []*basepb.FieldError{base.FieldErrorf("max_per_node", "must not be negative (0: no bound), not %d", s.MaxPerNode)}
	}
	return nil
}

// Scheduler is the oneshot scheduler. It holds no state but its settings
// and is safe for concurrent use.
type Scheduler struct {
	version string
	cfg     *base.Config[Settings]
}

var (
	_ scheduler.Scheduler = (*Scheduler)(nil)
	// Configurable is what makes scheduler.Serve serve the config
	// service; without it the agent refuses a config block for the plugin.
	_ base.Configurable = (*Scheduler)(nil)
)

// New returns the oneshot scheduler reporting version in Info, with the
// default settings (no bound per node).
func New(version string) *Scheduler {
	return &Scheduler{version: version, cfg: base.MustConfig(Settings{}, ValidateSettings)}
}

// PluginConfig is the config the agent sets before it calls Info.
func (s *Scheduler) PluginConfig() base.Settable { return s.cfg }

// Declaration is how oneshot jobs behave once placed: a task that exits 0
// is done, a task that fails fails its allocation at once, and no node
// change or allocation end evaluates the job again: only its own changes
// do (and the evals the core makes for blocked or preempted work).
func Declaration() *schedulerpb.JobTypeInfo {
	return &schedulerpb.JobTypeInfo{
		Name:             JobType,
		MaxAttempts:      MaxAttempts,
		RunsToCompletion: true,
		DefaultRestart: &schedulerpb.RestartPolicy{
			Attempts: 0, IntervalNs: int64(24 * time.Hour), DelayNs: int64(15 * time.Second), Mode: "fail",
		},
		AllowPeriodic:       true,
		AllowParameterized:  true,
		AllowMaxRunDuration: true,
		// Blocks this scheduler does not implement are refused at submit
		// time rather than silently ignored.
		RefusedBlocks: []string{"affinity", "spread", "update", "reschedule", "migrate"},
		// A node holding a oneshot alloc going down evaluates the job, so
		// its unfinished allocs there are marked lost and placed again.
		EvalOnAllocNodeChange: true,
	}
}

// Info reports the plugin's identity and its one job type.
func (s *Scheduler) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{
		Name: Name, Version: s.version, JobTypes: []*schedulerpb.JobTypeInfo{Declaration()},
	}, nil
}

// Schedule makes one scheduling attempt for one evaluation.
func (s *Scheduler) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // the core gave up on this attempt
	}
	p := &planner{
		req:        req,
		maxPerNode: s.cfg.Get().MaxPerNode,
		nodes:      map[string]*schedulerpb.Node{},
		used:       map[string]feasible.Vec{},
		ports:      feasible.NewPorts(req),
		spread:     map[string]int{},
		slots:      map[string]slot{},
		resp: &schedulerpb.ScheduleResponse{
			Plan:              &schedulerpb.Plan{DesiredTgUpdates: map[string]*schedulerpb.DesiredUpdates{}},
			FailedTgAllocs:    map[string]*schedulerpb.AllocMetric{},
			QueuedAllocations: map[string]int32{},
		},
	}
	for _, n := range req.GetNodes() {
		p.nodes[n.GetId()] = n
		p.used[n.GetId()] = feasible.VecOf(n.GetUsed())
	}
	p.reconcile()
	if job := req.GetJob(); job != nil && !job.GetStop() {
		for _, tg := range job.GetTaskGroups() {
			p.placeGroup(tg)
		}
	}
	if len(p.resp.FailedTgAllocs) > 0 {
		p.resp.BlockedEvals = []*schedulerpb.BlockedEval{p.blocked}
	}
	return p.resp, nil
}

// slot is what the existing allocations say about one allocation name.
type slot struct {
	filled bool   // done, failed under this version, or live and kept
	prev   string // the allocation a new placement replaces
}

// planner is the state of one Schedule call.
type planner struct {
	req    *schedulerpb.ScheduleRequest
	nodes  map[string]*schedulerpb.Node
	used   map[string]feasible.Vec // per node, as the plan leaves it
	ports  *feasible.Ports         // host ports per node, as the plan leaves them
	spread map[string]int          // live allocs of the job per node
	slots  map[string]slot         // by allocation name
	placed int32                   // new allocations, against max_placements
	// maxPerNode is the max_per_node setting in force (0: no bound).
	maxPerNode int
	blocked    *schedulerpb.BlockedEval
	resp       *schedulerpb.ScheduleResponse
}

// reconcile walks the job's allocations: it fills the slots they satisfy
// and plans the stops they need.
func (p *planner) reconcile() {
	job := p.req.GetJob()
	for _, a := range p.req.GetAllocs() {
		name := a.GetName()
		live := a.GetDesiredStatus() == "run" && !slices.Contains([]string{"complete", "failed", "lost"}, a.GetClientStatus())
		if !live {
			switch {
			case a.GetDesiredStatus() == "run" && a.GetClientStatus() == "complete" && a.GetRanSuccessfully():
				p.slots[name] = slot{filled: true}
			case a.GetDesiredStatus() == "run" && a.GetClientStatus() == "failed" && a.GetJobModifyIndex() == job.GetJobModifyIndex():
				p.slots[name] = slot{filled: true}
			case !p.slots[name].filled:
				p.slots[name] = slot{prev: a.GetId()}
			}
			continue
		}
		node, ok := p.nodes[a.GetNodeId()]
		tg := findGroup(job, a.GetTaskGroup())
		switch {
		case job == nil || job.GetStop():
			p.stop(a, descJobStopped, "")
		case !ok || node.GetStatus() == "down" || node.GetStatus() == "disconnected":
			p.stop(a, descLost, "lost")
		case tg == nil || allocIndex(name) < 0 || allocIndex(name) >= int(tg.GetCount()) || p.slots[name].filled:
			p.stop(a, descNotNeeded, "")
		case a.GetMigrate():
			p.stop(a, descMigrated, "")
		case a.GetJobModifyIndex() != job.GetJobModifyIndex():
			p.stop(a, descUpdated, "")
		default:
			p.slots[name] = slot{filled: true}
			p.spread[a.GetNodeId()]++
			continue
		}
		if !p.slots[name].filled {
			p.slots[name] = slot{prev: a.GetId()}
		}
	}
}

// stop plans the stop of a live allocation and frees its resources.
func (p *planner) stop(a *schedulerpb.Allocation, desc, clientStatus string) {
	p.resp.Plan.NodeUpdate = append(p.resp.Plan.NodeUpdate, &schedulerpb.AllocStop{
		AllocId: a.GetId(), NodeId: a.GetNodeId(), DesiredDescription: desc, ClientStatus: clientStatus,
	})
	p.used[a.GetNodeId()] = p.used[a.GetNodeId()].Sub(feasible.VecOf(a.GetResources()))
	p.ports.Release(a.GetId())
	p.desired(a.GetTaskGroup()).Stop++
}

func (p *planner) desired(tg string) *schedulerpb.DesiredUpdates {
	d := p.resp.Plan.DesiredTgUpdates[tg]
	if d == nil {
		d = &schedulerpb.DesiredUpdates{}
		p.resp.Plan.DesiredTgUpdates[tg] = d
	}
	return d
}

// placeGroup places every open slot of tg, up to the request's limit.
func (p *planner) placeGroup(tg *schedulerpb.TaskGroup) {
	job := p.req.GetJob()
	candidates, metric := p.feasibleNodes(tg)
	ask := feasible.GroupAsk(tg)
	for i := range int(tg.GetCount()) {
		name := fmt.Sprintf("%s.%s[%d]", job.GetId(), tg.GetName(), i)
		if p.slots[name].filled {
			p.desired(tg.GetName()).Ignore++
			continue
		}
		p.resp.QueuedAllocations[tg.GetName()]++ // the core counts placements down
		if limit := p.req.GetMaxPlacements(); limit < 0 || limit > 0 && p.placed >= limit {
			continue // left queued: the core places it with a follow-up eval
		}
		node, ports := p.pick(candidates, tg, name, ask, metric)
		if node == nil {
			if f := p.resp.FailedTgAllocs[tg.GetName()]; f != nil {
				f.CoalescedFailures++
			} else {
				p.resp.FailedTgAllocs[tg.GetName()] = metric
			}
			continue
		}
		p.used[node.GetId()] = p.used[node.GetId()].Add(ask)
		p.spread[node.GetId()]++
		p.placed++
		p.desired(tg.GetName()).Place++
		a := newAlloc(p.req, node, tg, name, p.slots[name].prev)
		a.Ports = ports
		p.ports.Hold(node, ports)
		p.resp.Plan.NodeAllocation = append(p.resp.Plan.NodeAllocation, a)
	}
}

// feasibleNodes returns the nodes that may run tg, in an order seeded from
// the eval ID, and the metric that says why the others may not. It also
// records, for a blocked eval, which node classes were found feasible.
func (p *planner) feasibleNodes(tg *schedulerpb.TaskGroup) ([]*schedulerpb.Node, *schedulerpb.AllocMetric) {
	job := p.req.GetJob()
	chain := feasible.NewGroupChain(job, tg, feasible.NewCache())
	if p.blocked == nil {
		p.blocked = &schedulerpb.BlockedEval{ClassEligibility: map[string]bool{}}
	}
	p.blocked.EscapedComputedClass = p.blocked.EscapedComputedClass || chain.Escaped
	m := &schedulerpb.AllocMetric{
		NodePool: job.GetNodePool(), NodesAvailable: map[string]int32{}, ConstraintFiltered: map[string]int32{},
		ClassFiltered: map[string]int32{}, ClassExhausted: map[string]int32{}, DimensionExhausted: map[string]int32{},
	}
	var out []*schedulerpb.Node
	for _, n := range p.req.GetNodes() {
		if !feasible.PoolMatches(job.GetNodePool(), n.GetNodePool()) {
			continue // holds an alloc of the job but left its pool
		}
		m.NodesInPool++
		if !feasible.DatacenterMatches(job.GetDatacenters(), n.GetDatacenter()) ||
			n.GetStatus() != "ready" || !n.GetEligible() || n.GetDraining() {
			continue
		}
		m.NodesAvailable[n.GetDatacenter()]++
		m.NodesEvaluated++
		ok, reason := chain.Check(n)
		class := n.GetComputedClass()
		p.blocked.ClassEligibility[class] = p.blocked.ClassEligibility[class] || ok
		if !ok {
			m.NodesFiltered++
			m.ConstraintFiltered[reason]++
			m.ClassFiltered[n.GetNodeClass()]++
			continue
		}
		out = append(out, n)
	}
	ranks := make(map[string]string, len(out))
	for _, n := range out {
		ranks[n.GetId()] = rank(p.req.GetEval().GetId(), n.GetId())
	}
	slices.SortFunc(out, func(a, b *schedulerpb.Node) int { return strings.Compare(ranks[a.GetId()], ranks[b.GetId()]) })
	return out, m
}

// pick returns the candidate with room for ask that runs the fewest
// allocations of the job, the first in seeded order among equals. With no
// room anywhere it records the exhaustion in m and returns nil. Room
// includes the group's ports (the sdk's port book picks them); the
// chosen node's are returned.
func (p *planner) pick(candidates []*schedulerpb.Node, tg *schedulerpb.TaskGroup, name string, ask feasible.Vec, m *schedulerpb.AllocMetric) (*schedulerpb.Node, []*schedulerpb.AllocatedPort) {
	var best *schedulerpb.Node
	var bestPorts []*schedulerpb.AllocatedPort
	exhausted := map[string]string{}
	for _, n := range candidates {
		if ok, dim := feasible.Fits(feasible.VecOf(n.GetCapacity()), p.used[n.GetId()], ask); !ok {
			exhausted[n.GetId()] = dim
			continue
		}
		if p.maxPerNode > 0 && p.spread[n.GetId()] >= p.maxPerNode {
			exhausted[n.GetId()] = "max_per_node"
			continue
		}
		ports, dim := p.ports.Pick(n, feasible.GroupPorts(tg), name)
		if dim != "" {
			exhausted[n.GetId()] = dim
			continue
		}
		if best == nil || p.spread[n.GetId()] < p.spread[best.GetId()] {
			best, bestPorts = n, ports
		}
	}
	if best == nil && m.NodesExhausted == 0 {
		for _, n := range candidates {
			m.NodesExhausted++
			m.DimensionExhausted[exhausted[n.GetId()]]++
			m.ClassExhausted[n.GetNodeClass()]++
		}
	}
	return best, bestPorts
}

// newAlloc is the plan entry of a new allocation of tg on node. Its ID is
// derived from the eval, the attempt, the node and the name, so the same
// request always yields the same plan.
func newAlloc(req *schedulerpb.ScheduleRequest, node *schedulerpb.Node, tg *schedulerpb.TaskGroup, name, prev string) *schedulerpb.PlacedAlloc {
	res := map[string]*schedulerpb.Resources{}
	for _, t := range tg.GetTasks() {
		r := t.GetResources()
		res[t.GetName()] = &schedulerpb.Resources{
			Cpu: r.GetCpu(), MemoryMb: r.GetMemoryMb(), MemoryMaxMb: r.GetMemoryMaxMb(), DiskMb: r.GetDiskMb(), Cores: r.GetCores(),
		}
	}
	return &schedulerpb.PlacedAlloc{
		Id:   nodesched.AllocID(req.GetEval().GetId(), req.GetAttempt(), node.GetId(), name),
		Name: name, NodeId: node.GetId(), NodeName: node.GetName(), TaskGroup: tg.GetName(),
		TaskResources: res, SharedDiskMb: tg.GetEphemeralDiskMb(), PreviousAllocation: prev,
	}
}

// rank orders nodes by a hash of the eval ID and the node ID: a different
// order for each eval (so work spreads), the same one on every replay.
func rank(seed, nodeID string) string {
	h := fnv.New64a()
	h.Write([]byte(seed + "/" + nodeID))
	return fmt.Sprintf("%016x%s", h.Sum64(), nodeID)
}

func findGroup(job *schedulerpb.Job, name string) *schedulerpb.TaskGroup {
	for _, tg := range job.GetTaskGroups() {
		if tg.GetName() == name {
			return tg
		}
	}
	return nil
}

// allocIndex is the i of an allocation named "job.group[i]", or -1.
func allocIndex(name string) int {
	open := strings.LastIndexByte(name, '[')
	if open < 0 || !strings.HasSuffix(name, "]") {
		return -1
	}
	i, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil {
		return -1
	}
	return i
}

// Package nodesched is the scheduling engine shared by the system and
// sysbatch schedulers: every ready, feasible node of the job's pool and
// datacenters runs each task group Count times, named "<job>.<group>[i]".
//
// The engine is a pure function of the ScheduleRequest. It reads no clock
// and draws no random numbers: nodes are visited in ID order and new
// allocation IDs are derived from the eval (see AllocID), so one request
// always produces the same response.
package nodesched

import (
	"errors"
	"fmt"
	"maps"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
	"github.com/drover-org/drover/sdk/scheduler/reconcile"
)

// ErrInvalidRequest is returned for a request the engine cannot read at
// all (no eval). The core should fail such an eval rather than retry it.
var ErrInvalidRequest = errors.New("invalid schedule request")

// Evaluation statuses the engine may answer with.
const (
	EvalStatusFailed = "failed"
)

// Eval trigger reasons the engine accepts.
const (
	TriggerJobRegister       = "job-register"
	TriggerNodeUpdate        = "node-update"
	TriggerFailedFollowUp    = "failed-follow-up"
	TriggerJobDeregister     = "job-deregister"
	TriggerRollingUpdate     = "rolling-update"
	TriggerPreemption        = "preemption"
	TriggerDeploymentWatcher = "deployment-watcher"
	TriggerNodeDrain         = "node-drain"
	TriggerAllocStop         = "alloc-stop"
	TriggerQueuedAllocs      = "queued-allocs"
	TriggerScaling           = "job-scaling"
	TriggerReconnect         = "reconnect"
	TriggerPeriodicJob       = "periodic-job"
)

var baseTriggers = map[string]bool{
	TriggerJobRegister: true, TriggerNodeUpdate: true, TriggerFailedFollowUp: true,
	TriggerJobDeregister: true, TriggerRollingUpdate: true, TriggerPreemption: true,
	TriggerDeploymentWatcher: true, TriggerNodeDrain: true, TriggerAllocStop: true,
	TriggerQueuedAllocs: true, TriggerScaling: true, TriggerReconnect: true,
}

// Options configure an Engine for one job type.
type Options struct {
	// Sysbatch selects the sysbatch rules: finished allocations are done
	// (not replaced while the job is unchanged), successful allocs on
	// tainted nodes are left alone, and periodic-job evals are accepted.
	Sysbatch bool
	// PreemptionEnabled reads the operator's scheduler configuration (nil
	// when the core sent none). Nil disables preemption.
	PreemptionEnabled func(*schedulerpb.SchedulerConfig) bool
	// Logger receives one debug line per evaluation; nil discards.
	Logger hclog.Logger
}

// SystemPreemption is the system scheduler's preemption switch: on unless
// the operator turned it off.
func SystemPreemption(cfg *schedulerpb.SchedulerConfig) bool {
	return cfg == nil || cfg.GetPreemptionSystem()
}

// SysbatchPreemption is the sysbatch scheduler's preemption switch: off
// unless the operator turned it on.
func SysbatchPreemption(cfg *schedulerpb.SchedulerConfig) bool {
	return cfg.GetPreemptionSysbatch()
}

// Engine schedules system-style jobs. It is stateless and safe for
// concurrent use.
type Engine struct {
	opts   Options
	logger hclog.Logger
}

// New returns an Engine.
func New(opts Options) *Engine {
	l := opts.Logger
	if l == nil {
		l = hclog.NewNullLogger()
	}
	return &Engine{opts: opts, logger: l}
}

// CanHandle reports whether the engine schedules evals of this trigger.
func (e *Engine) CanHandle(trigger string) bool {
	if trigger == TriggerPeriodicJob {
		return e.opts.Sysbatch
	}
	return baseTriggers[trigger]
}

// Outcome is the response plus diagnostics that the protocol does not
// carry but that logs and tests want.
type Outcome struct {
	Response *schedulerpb.ScheduleResponse
	// Filtered is, per group, the merged metric of the nodes that feasibility
	// checks filtered. Nomad reports these to users only when no node of the
	// group could be used; they are kept here for logs and tests.
	Filtered map[string]*schedulerpb.AllocMetric
	// UpdatesLimited is true when update max_parallel held back destructive
	// updates that a later evaluation must make.
	UpdatesLimited bool
}

// Schedule makes one scheduling attempt. The response never shares memory
// with the request, but messages inside it may be shared between entries
// (every placement's metrics are one message): treat it as read-only.
//
// The plan is always present, possibly empty; DesiredTgUpdates is always
// filled so the core can attach it whether or not the eval asked for
// annotations. New allocations carry no Job: the plan's job is the current
// one.
func (e *Engine) Schedule(req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	out, err := e.Run(req)
	if err != nil {
		return nil, err
	}
	return out.Response, nil
}

// Run makes one scheduling attempt and returns the diagnostics with it.
func (e *Engine) Run(req *schedulerpb.ScheduleRequest) (*Outcome, error) {
	if req.GetEval() == nil {
		return nil, fmt.Errorf("%w: no evaluation", ErrInvalidRequest)
	}
	eval := req.GetEval()
	if !e.CanHandle(eval.GetTriggeredBy()) {
		desc := fmt.Sprintf("scheduler cannot handle '%s' evaluation reason", eval.GetTriggeredBy())
		e.logger.Debug("evaluation refused", "eval_id", eval.GetId(), "triggered_by", eval.GetTriggeredBy())
		return &Outcome{Response: &schedulerpb.ScheduleResponse{Status: EvalStatusFailed, StatusDescription: desc}}, nil
	}
	r := newRun(e, req)
	r.schedule()
	resp := &schedulerpb.ScheduleResponse{
		Plan:              r.plan,
		FailedTgAllocs:    r.failed,
		QueuedAllocations: r.queued,
		BlockedEvals:      r.blocked,
	}
	for _, b := range resp.BlockedEvals {
		b.ClassEligibility = maps.Clone(r.classElig)
		b.EscapedComputedClass = r.escaped
	}
	e.logger.Debug("evaluation scheduled", "eval_id", eval.GetId(), "job_id", eval.GetJobId(),
		"attempt", req.GetAttempt(), "placed", r.placed, "stopped", len(r.plan.GetNodeUpdate()),
		"failed_groups", len(r.failed), "blocked", len(r.blocked), "updates_limited", r.limited,
		"left_by_max_placements", r.capped)
	return &Outcome{Response: resp, Filtered: r.filtered, UpdatesLimited: r.limited}, nil
}

// group is the per-request compiled state of one task group.
type group struct {
	tg       *schedulerpb.TaskGroup
	chain    *feasible.GroupChain
	ask      feasible.Vec
	ports    feasible.PortAsks
	existing bool // has ignored or in-place allocs: filtered-only is no failure
}

// run is the state of one scheduling attempt.
type run struct {
	e        *Engine
	req      *schedulerpb.ScheduleRequest
	job      *schedulerpb.Job
	eval     *schedulerpb.Evaluation
	stopped  bool
	preempt  bool
	versions *reconcile.Versions

	nodeByID  map[string]*schedulerpb.Node // nodes hosting the job's allocs
	ready     map[string]*schedulerpb.Node
	notReady  map[string]struct{}
	tainted   map[string]*schedulerpb.Node // reconcile.Tainted of the job's allocs
	nodesByDC map[string]int32
	groups    map[string]*group
	csi       *feasible.CSIVolumes // the request's volumes and this plan's claims
	ports     *feasible.Ports      // host ports held per node as this plan leaves them

	// adjust is the per-node change to node.used made by this plan before
	// placement: stops free resources, in-place updates change them.
	adjust map[string]feasible.Vec

	plan      *schedulerpb.Plan
	queued    map[string]int32
	failed    map[string]*schedulerpb.AllocMetric
	filtered  map[string]*schedulerpb.AllocMetric
	blocked   []*schedulerpb.BlockedEval
	classElig map[string]bool
	escaped   bool
	limited   bool
	placed    int
	capped    int                      // placements left queued by ScheduleRequest.max_placements
	idBuf     []byte                   // scratch for AllocID
	okMetric  *schedulerpb.AllocMetric // shared by successful placements
}

func newRun(e *Engine, req *schedulerpb.ScheduleRequest) *run {
	job := req.GetJob()
	r := &run{
		e:         e,
		req:       req,
		job:       job,
		eval:      req.GetEval(),
		stopped:   job == nil || job.GetStop(),
		versions:  reconcile.NewVersions(job, req.GetJobVersions()),
		nodeByID:  map[string]*schedulerpb.Node{},
		ready:     make(map[string]*schedulerpb.Node, len(req.GetNodes())),
		notReady:  map[string]struct{}{},
		nodesByDC: map[string]int32{},
		groups:    map[string]*group{},
		adjust:    map[string]feasible.Vec{},
		plan:      &schedulerpb.Plan{DesiredTgUpdates: map[string]*schedulerpb.DesiredUpdates{}},
		queued:    map[string]int32{},
		classElig: map[string]bool{},
		ports:     feasible.NewPorts(req),
	}
	if e.opts.PreemptionEnabled != nil {
		r.preempt = e.opts.PreemptionEnabled(req.GetConfig())
	}
	// Only nodes hosting an alloc of the job are ever looked up by ID (for
	// tainting); indexing all 10,000 would cost more than scheduling.
	hosting := make(map[string]struct{}, len(req.GetAllocs()))
	for _, a := range req.GetAllocs() {
		hosting[a.GetNodeId()] = struct{}{}
	}
	for _, n := range req.GetNodes() {
		if _, ok := hosting[n.GetId()]; ok {
			r.nodeByID[n.GetId()] = n
		}
	}
	if !r.stopped {
		r.readyNodes()
		cache := feasible.NewCache()
		r.csi = feasible.NewCSIVolumes(req)
		for _, tg := range job.GetTaskGroups() {
			g := &group{tg: tg, chain: feasible.NewGroupChainCSI(job, tg, cache, r.csi), ask: feasible.GroupAsk(tg), ports: feasible.GroupPorts(tg)}
			r.groups[tg.GetName()] = g
			r.escaped = r.escaped || g.chain.Escaped
		}
	}
	return r
}

// readyNodes splits the job's pool into ready candidates (in one of the
// job's datacenters) and nodes that are not ready.
func (r *run) readyNodes() {
	for _, n := range r.req.GetNodes() {
		if !feasible.PoolMatches(r.job.GetNodePool(), n.GetNodePool()) {
			continue
		}
		if !reconcile.NodeIsReady(n) {
			r.notReady[n.GetId()] = struct{}{}
			continue
		}
		if feasible.DatacenterMatches(r.job.GetDatacenters(), n.GetDatacenter()) {
			r.ready[n.GetId()] = n
			r.nodesByDC[n.GetDatacenter()]++
		}
	}
}

// schedule is computeJobAllocs: diff, apply the diff to the plan, place.
func (r *run) schedule() {
	allocs := r.req.GetAllocs()
	tainted := reconcile.Tainted(allocs, r.nodeByID)
	r.tainted = tainted
	for _, a := range reconcile.LostStops(allocs, tainted) {
		r.stop(a, DescLost, reconcile.ClientLost)
	}
	live, terminal := reconcile.Split(allocs)
	diff := reconcile.Nodes(&reconcile.Input{
		Job:      r.job,
		Sysbatch: r.e.opts.Sysbatch,
		Ready:    r.ready,
		NotReady: r.notReady,
		Tainted:  tainted,
		Live:     live,
		Terminal: terminal,
	})
	place := r.apply(diff)
	if r.stopped {
		return
	}
	for name := range r.groups {
		r.queued[name] = 0
	}
	if len(place) == 0 {
		return
	}
	for _, t := range place {
		r.queued[t.TaskGroup.GetName()]++
	}
	r.computePlacements(place)
}

// desired returns the annotation counters of a group, creating them.
func (r *run) desired(tg string) *schedulerpb.DesiredUpdates {
	d := r.plan.DesiredTgUpdates[tg]
	if d == nil {
		d = &schedulerpb.DesiredUpdates{}
		r.plan.DesiredTgUpdates[tg] = d
	}
	return d
}

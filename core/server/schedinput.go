package server

import (
	"encoding/json"
	"slices"
	"sync"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// buildRequestForJob assembles everything one scheduling decision needs
// from a state snapshot: the eval, the given version of the job (dry-run
// plans pass the submitted, unwritten one), the nodes of the job's pool
// with their usage, every alloc of the job and the job versions those
// allocs run.
func (s *Server) buildRequestForJob(snap *state.StateSnapshot, ev *structs.Evaluation, job *structs.Job, attempt int) (*pb.ScheduleRequest, error) {
	_, cfg, err := snap.SchedulerConfig()
	if err != nil {
		return nil, err
	}
	req := &pb.ScheduleRequest{
		Eval:    evalToPB(ev),
		Attempt: int32(attempt),
		// The plugins read no clock: time-based decisions (a reschedule's
		// delay) are taken against the core's.
		NowNs: s.cfg.Now().UnixNano(),
		Config: &pb.SchedulerConfig{
			PreemptionSystem:   cfg.PreemptionConfig.SystemSchedulerEnabled,
			PreemptionSysbatch: cfg.PreemptionConfig.SysBatchSchedulerEnabled,
			PreemptionBatch:    cfg.PreemptionConfig.BatchSchedulerEnabled,
			PreemptionService:  cfg.PreemptionConfig.ServiceSchedulerEnabled,
		},
	}
	allocs, err := snap.AllocsByJob(nil, ev.Namespace, ev.JobID, true)
	if err != nil {
		return nil, err
	}
	versions := map[uint64]bool{}
	if job != nil {
		req.Job = jobToPB(job)
		versions[job.JobModifyIndex] = true
	}
	allocs = dropPurgedIncarnations(allocs, job)
	req.Allocs = make([]*pb.Allocation, 0, len(allocs))
	for _, a := range allocs {
		pa := allocToPB(a)
		if err := clearSpentFollowup(snap, ev, pa); err != nil {
			return nil, err
		}
		req.Allocs = append(req.Allocs, pa)
		if a.Job != nil && !versions[a.Job.JobModifyIndex] {
			versions[a.Job.JobModifyIndex] = true
			req.JobVersions = append(req.JobVersions, jobToPB(a.Job))
		}
	}
	if req.Deployment, err = deploymentInput(snap, job); err != nil {
		return nil, err
	}
	if job == nil || job.Stop {
		// A stopped job places nothing, but the scheduler still needs the
		// nodes its allocs sit on to tell lost from stopped.
		return req, s.addAllocNodes(snap, req, allocs)
	}
	preempt := job.TypeBehavior.PreemptionEnabled(cfg)
	nodes, err := nodesOfPool(snap, job.NodePool)
	if err != nil {
		return nil, err
	}
	csi, err := buildCSIInput(snap, job)
	if err != nil {
		return nil, err
	}
	if csi != nil {
		req.CsiVolumes = csi.volumes
	}
	req.Nodes = make([]*pb.Node, 0, len(nodes))
	have := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		pn, err := s.nodeToPB(snap, n, job, preempt)
		if err != nil {
			return nil, err
		}
		pn.CsiNodePlugins = csi.nodePlugins(n)
		req.Nodes = append(req.Nodes, pn)
		have[n.ID] = true
	}
	// Nodes outside the pool that hold allocs of the job (the job moved
	// pools) are sent too, so their allocs can be stopped.
	var extra []*structs.Allocation
	for _, a := range allocs {
		if !have[a.NodeID] {
			extra = append(extra, a)
		}
	}
	return req, s.addAllocNodes(snap, req, extra)
}

func (s *Server) addAllocNodes(snap *state.StateSnapshot, req *pb.ScheduleRequest, allocs []*structs.Allocation) error {
	seen := map[string]bool{}
	for _, a := range allocs {
		if seen[a.NodeID] {
			continue
		}
		seen[a.NodeID] = true
		n, err := snap.NodeByID(nil, a.NodeID)
		if err != nil {
			return err
		}
		if n == nil {
			continue
		}
		pn, err := s.nodeToPB(snap, n, nil, false)
		if err != nil {
			return err
		}
		req.Nodes = append(req.Nodes, pn)
	}
	return nil
}

func nodesOfPool(snap *state.StateSnapshot, pool string) ([]*structs.Node, error) {
	if pool == "" || pool == structs.NodePoolAll {
		return snap.Nodes(nil)
	}
	return snap.NodesByPool(nil, pool)
}

// nodeCache keeps the static part of each node's protobuf record, keyed by
// node ID and valid while the node's ModifyIndex is unchanged, so a
// 10,000-node request does not rebuild 10,000 attribute maps.
type nodeCache struct {
	mu    sync.Mutex
	nodes map[string]cachedNode
}

type cachedNode struct {
	index uint64
	pb    *pb.Node
}

func newNodeCache() *nodeCache { return &nodeCache{nodes: map[string]cachedNode{}} }

func (c *nodeCache) get(n *structs.Node) *pb.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.nodes[n.ID]; ok && e.index == n.ModifyIndex {
		return e.pb
	}
	p := staticNodeToPB(n)
	c.nodes[n.ID] = cachedNode{index: n.ModifyIndex, pb: p}
	return p
}

func staticNodeToPB(n *structs.Node) *pb.Node {
	p := &pb.Node{
		Id: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.NodeClass, NodePool: n.NodePool,
		ComputedClass: n.ComputedClass, Status: n.Status, Draining: n.DrainStrategy != nil,
		Eligible:   n.SchedulingEligibility == structs.NodeSchedulingEligible,
		Attributes: n.Attributes, Meta: n.Meta, Capacity: resToPB(n.Capacity()),
		Network: nodeNetworkToPB(n),
	}
	for name, d := range n.Drivers {
		if d != nil && d.Detected && d.Healthy {
			p.Drivers = append(p.Drivers, name)
		}
	}
	return p
}

// nodeToPB returns the node's record with its current usage. The static
// maps are shared with the cache and must be treated as read-only.
func (s *Server) nodeToPB(snap *state.StateSnapshot, n *structs.Node, job *structs.Job, preempt bool) (*pb.Node, error) {
	st := s.nodeCache.get(n)
	p := &pb.Node{
		Id: st.Id, Name: st.Name, Datacenter: st.Datacenter, NodeClass: st.NodeClass, NodePool: st.NodePool,
		ComputedClass: st.ComputedClass, Status: st.Status, Draining: st.Draining, Eligible: st.Eligible,
		Attributes: st.Attributes, Meta: st.Meta, Drivers: st.Drivers, Capacity: st.Capacity,
		Network: st.Network,
	}
	if ds := n.DrainStrategy; ds != nil && !ds.ForceDeadline.IsZero() {
		p.DrainDeadlinePassed = !s.cfg.Now().Before(ds.ForceDeadline)
	}
	// Only the live half of the node's allocs: a node that ran thousands
	// of short jobs holds them terminal until the GC reaps them, and
	// reading them on every placement made placement slow in their number.
	allocs, err := snap.AllocsByNodeTerminal(nil, n.ID, false)
	if err != nil {
		return nil, err
	}
	var used structs.Resources
	for _, a := range allocs {
		r := a.ComparableResources()
		used.CPU += r.CPU
		used.MemoryMB += r.MemoryMB
		used.DiskMB += r.DiskMB
		var ports []int32
		if a.AllocatedResources != nil {
			for _, port := range a.AllocatedResources.Shared.Ports {
				ports = append(ports, int32(port.Value))
			}
			p.UsedPorts = append(p.UsedPorts, ports...)
		}
		if preempt && job != nil && (a.JobID != job.ID || a.Namespace != job.Namespace) {
			prio := 0
			if a.Job != nil {
				prio = a.Job.Priority
			}
			p.Others = append(p.Others, &pb.NodeAlloc{
				Id: a.ID, JobId: a.JobID, Namespace: a.Namespace, JobPriority: int32(prio),
				Resources: resToPB(r), CreateIndex: a.CreateIndex, Ports: ports,
			})
		}
	}
	slices.Sort(p.UsedPorts)
	p.Used = resToPB(used)
	return p, nil
}

func resToPB(r structs.Resources) *pb.Resources {
	return &pb.Resources{Cpu: int64(r.CPU), MemoryMb: int64(r.MemoryMB), MemoryMaxMb: int64(r.MemoryMaxMB), DiskMb: int64(r.DiskMB), Cores: int64(r.Cores)}
}

func evalToPB(ev *structs.Evaluation) *pb.Evaluation {
	return &pb.Evaluation{
		Id: ev.ID, Namespace: ev.Namespace, Priority: int32(ev.Priority), Type: ev.Type,
		TriggeredBy: ev.TriggeredBy, JobId: ev.JobID, JobModifyIndex: ev.JobModifyIndex,
		NodeId: ev.NodeID, Status: ev.Status, PreviousEval: ev.PreviousEval, AnnotatePlan: ev.AnnotatePlan,
	}
}

func constraintsToPB(cs []*structs.Constraint) []*pb.Constraint {
	if len(cs) == 0 {
		return nil
	}
	out := make([]*pb.Constraint, len(cs))
	for i, c := range cs {
		out[i] = &pb.Constraint{LTarget: c.LTarget, Operand: c.Operand, RTarget: c.RTarget}
	}
	return out
}

// affinitiesToPB converts affinity blocks; nil for none, so a job without
// any sends nothing.
func affinitiesToPB(as []*structs.Affinity) []*pb.Affinity {
	if len(as) == 0 {
		return nil
	}
	out := make([]*pb.Affinity, len(as))
	for i, a := range as {
		out[i] = &pb.Affinity{LTarget: a.LTarget, Operand: a.Operand, RTarget: a.RTarget, Weight: int32(a.Weight)}
	}
	return out
}

// spreadsToPB converts spread blocks; nil for none.
func spreadsToPB(ss []*structs.Spread) []*pb.Spread {
	if len(ss) == 0 {
		return nil
	}
	out := make([]*pb.Spread, len(ss))
	for i, s := range ss {
		p := &pb.Spread{Attribute: s.Attribute, Weight: int32(s.Weight)}
		for _, t := range s.SpreadTarget {
			p.Targets = append(p.Targets, &pb.SpreadTarget{Value: t.Value, Percent: int32(t.Percent)})
		}
		out[i] = p
	}
	return out
}

func jobToPB(j *structs.Job) *pb.Job {
	p := &pb.Job{
		Id: j.ID, Name: j.Name, Namespace: j.Namespace, Type: j.Type, Priority: int32(j.Priority),
		Datacenters: j.Datacenters, NodePool: j.NodePool, Constraints: constraintsToPB(j.Constraints),
		Meta: j.Meta, Stop: j.Stop, JobModifyIndex: j.JobModifyIndex, Version: j.Version,
		AllAtOnce: j.AllAtOnce, ParentId: j.ParentID,
		Affinities: affinitiesToPB(j.Affinities), Spreads: spreadsToPB(j.Spreads),
	}
	if j.Update != nil {
		p.UpdateMaxParallel = int32(j.Update.MaxParallel)
	}
	for _, tg := range j.TaskGroups {
		g := &pb.TaskGroup{
			Name: tg.Name, Count: int32(tg.Count), Constraints: constraintsToPB(tg.Constraints), Meta: tg.Meta,
			Volumes: volumesToPB(tg.Volumes), ReschedulePolicy: reschedulePolicyToPB(tg.ReschedulePolicy),
			Affinities: affinitiesToPB(tg.Affinities), Spreads: spreadsToPB(tg.Spreads),
			Networks: networksToPB(tg.Networks),
		}
		if m := tg.Migrate; m != nil {
			g.MigrateMaxParallel = int32(m.MaxParallel)
			g.Migrate = &pb.MigrateStrategy{
				MaxParallel: int32(m.MaxParallel), HealthCheck: m.HealthCheck,
				MinHealthyTimeNs: int64(m.MinHealthyTime), HealthyDeadlineNs: int64(m.HealthyDeadline),
			}
		}
		if tg.EphemeralDisk != nil {
			g.EphemeralDiskMb = int64(tg.EphemeralDisk.SizeMB)
		}
		if tg.Update != nil {
			g.UpdateMaxParallel = int32(tg.Update.MaxParallel)
		}
		g.Update = updateToPB(tg.Update)
		for _, t := range tg.Tasks {
			cfg, _ := json.Marshal(t.Config) // map keys are sorted: canonical
			pt := &pb.Task{
				Name: t.Name, Driver: t.Driver, User: t.User, ConfigJson: cfg, Env: t.Env, Meta: t.Meta,
				Constraints: constraintsToPB(t.Constraints), Affinities: affinitiesToPB(t.Affinities),
			}
			if t.Resources != nil {
				pt.Resources = resToPB(*t.Resources)
			}
			if t.DispatchPayload != nil {
				pt.DispatchPayloadFile = t.DispatchPayload.File
			}
			if t.Lifecycle != nil {
				pt.LifecycleHook = t.Lifecycle.Hook
			}
			g.Tasks = append(g.Tasks, pt)
		}
		p.TaskGroups = append(p.TaskGroups, g)
	}
	return p
}

func allocToPB(a *structs.Allocation) *pb.Allocation {
	p := &pb.Allocation{
		Id: a.ID, Name: a.Name, NodeId: a.NodeID, NodeName: a.NodeName, TaskGroup: a.TaskGroup,
		JobId: a.JobID, Namespace: a.Namespace, DesiredStatus: a.DesiredStatus, ClientStatus: a.ClientStatus,
		Migrate: a.DesiredTransition.ShouldMigrate(), RanSuccessfully: a.RanSuccessfully(),
		Resources: resToPB(a.ComparableResources()), CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex,
		EvalId: a.EvalID, FollowupEvalId: a.FollowupEvalID, NextAllocation: a.NextAllocation,
		ModifyTimeNs:    allocChangeTime(a),
		ForceReschedule: a.DesiredTransition.ForceReschedule != nil && *a.DesiredTransition.ForceReschedule,
		Reschedule:      a.DesiredTransition.Reschedule != nil && *a.DesiredTransition.Reschedule,
		Ports:           allocPortsToPB(a),
	}
	if a.Job != nil {
		p.JobModifyIndex, p.JobVersion = a.Job.JobModifyIndex, a.Job.Version
	}
	if a.RescheduleTracker != nil && len(a.RescheduleTracker.Events) > 0 {
		p.RescheduleEvents = make([]*pb.RescheduleEvent, 0, len(a.RescheduleTracker.Events))
		for _, e := range a.RescheduleTracker.Events {
			if e == nil {
				continue
			}
			p.RescheduleEvents = append(p.RescheduleEvents, &pb.RescheduleEvent{
				RescheduleTimeNs: e.RescheduleTime, PrevAllocId: e.PrevAllocID, PrevNodeId: e.PrevNodeID, DelayNs: int64(e.Delay),
			})
		}
	}
	allocDeploymentToPB(a, p)
	return p
}

// clearSpentFollowup leaves out an alloc's follow-up eval once that eval
// finished without replacing it (its placement failed, say, and a blocked
// eval took over): it never will, so the scheduler must decide for the
// alloc afresh rather than wait for it. The eval being scheduled is never
// spent.
func clearSpentFollowup(snap *state.StateSnapshot, ev *structs.Evaluation, pa *pb.Allocation) error {
	if pa.FollowupEvalId == "" || pa.FollowupEvalId == ev.ID || pa.NextAllocation != "" {
		return nil
	}
	fe, err := snap.EvalByID(nil, pa.FollowupEvalId)
	if err != nil {
		return err
	}
	if fe == nil || fe.TerminalStatus() {
		pa.FollowupEvalId = ""
	}
	return nil
}

// allocChangeTime is when the client last changed the alloc: for one that
// finished, the latest finish time of its tasks (the failure time a
// reschedule delay counts from), else its ModifyTime.
func allocChangeTime(a *structs.Allocation) int64 {
	var latest int64
	for _, ts := range a.TaskStates {
		if ts != nil && !ts.FinishedAt.IsZero() {
			latest = max(latest, ts.FinishedAt.UnixNano())
		}
	}
	if latest == 0 {
		return a.ModifyTime
	}
	return latest
}

func reschedulePolicyToPB(rp *structs.ReschedulePolicy) *pb.ReschedulePolicy {
	if rp == nil {
		return nil
	}
	return &pb.ReschedulePolicy{
		Attempts: int32(rp.Attempts), IntervalNs: int64(rp.Interval), DelayNs: int64(rp.Delay),
		DelayFunction: rp.DelayFunction, MaxDelayNs: int64(rp.MaxDelay), Unlimited: rp.Unlimited,
	}
}

// dropPurgedIncarnations leaves out the finished allocs of an earlier job
// that had the same ID and was purged (its allocs outlive it until GC): a
// job registered anew is a new job, as in Nomad, whose allocs neither chain
// to those (PreviousAllocation) nor count them as work done. Live allocs of
// an earlier incarnation stay, so that the scheduler stops them. A nil job
// (deregistered) keeps every alloc.
func dropPurgedIncarnations(allocs []*structs.Allocation, job *structs.Job) []*structs.Allocation {
	if job == nil {
		return allocs
	}
	out := allocs[:0:0]
	for _, a := range allocs {
		if a.Job != nil && a.Job.CreateIndex != job.CreateIndex && a.TerminalStatus() {
			continue
		}
		out = append(out, a)
	}
	return out
}

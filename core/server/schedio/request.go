// Package schedio translates between the core and the scheduler plugins:
// it builds a plugin's ScheduleRequest from a state snapshot, and turns the
// plugin's response into the core's plan, checking everything the plugin
// sends. Every function is pure: it reads the snapshot it is given, takes
// the time as an argument and returns values; the server's worker does the
// I/O (calling the plugin, submitting the plan, recording the eval).
package schedio

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// BuildRequest assembles everything one scheduling decision needs from a
// state snapshot: the eval, the given version of the job (dry-run plans
// pass the submitted, unwritten one), the nodes of the job's pool with
// their usage, every alloc of the job and the job versions those allocs
// run. cache keeps the static part of node records between requests (nil:
// none); now is the core's clock, the only one the plugins read.
func BuildRequest(snap RequestState, cache *NodeCache, ev *structs.Evaluation, job *structs.Job, attempt int, now time.Time) (*pb.ScheduleRequest, error) {
	_, cfg, err := snap.SchedulerConfig()
	if err != nil {
		return nil, err
	}
	req := &pb.ScheduleRequest{
		Eval:    evalToPB(ev),
		Attempt: int32(attempt),
		// The plugins read no clock: time-based decisions (a reschedule's
		// delay) are taken against the core's.
		NowNs: now.UnixNano(),
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
	preempt := job != nil && job.TypeBehavior.PreemptionEnabled(cfg)
	nodes := nodeInput{snap: snap, cache: cache, now: now}
	if err := nodes.add(req, job, allocs, preempt); err != nil {
		return nil, err
	}
	return req, nil
}

// clearSpentFollowup leaves out an alloc's follow-up eval once that eval
// finished without replacing it (its placement failed, say, and a blocked
// eval took over): it never will, so the scheduler must decide for the
// alloc afresh rather than wait for it. The eval being scheduled is never
// spent.
func clearSpentFollowup(snap RequestState, ev *structs.Evaluation, pa *pb.Allocation) error {
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

// deploymentInput returns the job's latest deployment of its current
// incarnation, active or not, for a type that declares deployments.
func deploymentInput(snap RequestState, job *structs.Job) (*pb.Deployment, error) {
	if job == nil || job.TypeBehavior == nil || !job.TypeBehavior.Deployments {
		return nil, nil
	}
	d, err := snap.LatestDeploymentByJob(nil, job.Namespace, job.ID)
	if err != nil || d == nil || d.JobCreateIndex != job.CreateIndex {
		return nil, err
	}
	return deploymentToPB(d), nil
}

// The job's and its allocs' records in the plugin protocol's types. These
// read nothing but their argument.

func evalToPB(ev *structs.Evaluation) *pb.Evaluation {
	return &pb.Evaluation{
		Id: ev.ID, Namespace: ev.Namespace, Priority: int32(ev.Priority), Type: ev.Type,
		TriggeredBy: ev.TriggeredBy, JobId: ev.JobID, JobModifyIndex: ev.JobModifyIndex,
		NodeId: ev.NodeID, Status: ev.Status, PreviousEval: ev.PreviousEval, AnnotatePlan: ev.AnnotatePlan,
	}
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

func reschedulePolicyToPB(rp *structs.ReschedulePolicy) *pb.ReschedulePolicy {
	if rp == nil {
		return nil
	}
	return &pb.ReschedulePolicy{
		Attempts: int32(rp.Attempts), IntervalNs: int64(rp.Interval), DelayNs: int64(rp.Delay),
		DelayFunction: rp.DelayFunction, MaxDelayNs: int64(rp.MaxDelay), Unlimited: rp.Unlimited,
	}
}

func resToPB(r structs.Resources) *pb.Resources {
	return &pb.Resources{Cpu: int64(r.CPU), MemoryMb: int64(r.MemoryMB), MemoryMaxMb: int64(r.MemoryMaxMB), DiskMb: int64(r.DiskMB), Cores: int64(r.Cores)}
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

func networksToPB(ns []*structs.NetworkResource) []*pb.NetworkAsk {
	if len(ns) == 0 {
		return nil
	}
	out := make([]*pb.NetworkAsk, 0, len(ns))
	for _, n := range ns {
		if n == nil {
			continue
		}
		a := &pb.NetworkAsk{Mode: n.Mode, Settings: networkSettings(n)}
		for _, p := range n.ReservedPorts {
			a.ReservedPorts = append(a.ReservedPorts, portAskToPB(p))
		}
		for _, p := range n.DynamicPorts {
			a.DynamicPorts = append(a.DynamicPorts, portAskToPB(p))
		}
		out = append(out, a)
	}
	return out
}

// networkSettings digests the network's hostname, dns block and cni args
// (NetworkAsk.settings), empty when none is set.
func networkSettings(n *structs.NetworkResource) string {
	if n.Hostname == "" && n.DNS == nil && n.CNI == nil {
		return ""
	}
	raw, err := json.Marshal(struct {
		Hostname string
		DNS      *structs.DNSConfig
		CNI      *structs.CNIConfig
	}{n.Hostname, n.DNS, n.CNI})
	if err != nil {
		// Plain strings and maps: cannot happen.
		return "unencodable"
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

func portAskToPB(p structs.Port) *pb.PortAsk {
	return &pb.PortAsk{Label: p.Label, Value: int32(p.Value), To: int32(p.To), HostNetwork: p.HostNetwork}
}

// allocPortsToPB is the ports a live alloc holds; none once it is terminal.
func allocPortsToPB(a *structs.Allocation) []*pb.AllocatedPort {
	if a.AllocatedResources == nil || len(a.AllocatedResources.Shared.Ports) == 0 || a.TerminalStatus() {
		return nil
	}
	out := make([]*pb.AllocatedPort, 0, len(a.AllocatedResources.Shared.Ports))
	for _, p := range a.AllocatedResources.Shared.Ports {
		out = append(out, &pb.AllocatedPort{Label: p.Label, Value: int32(p.Value), To: int32(p.To), HostIp: p.HostIP})
	}
	return out
}

// volumesToPB is a group's volume blocks, sorted by name.
func volumesToPB(vs map[string]*structs.VolumeRequest) []*pb.VolumeRequest {
	if len(vs) == 0 {
		return nil
	}
	out := make([]*pb.VolumeRequest, 0, len(vs))
	for name, v := range vs {
		if v == nil {
			continue
		}
		n := v.Name
		if n == "" {
			n = name
		}
		out = append(out, &pb.VolumeRequest{
			Name: n, Type: v.Type, Source: v.Source, ReadOnly: v.ReadOnly,
			AccessMode: string(v.AccessMode), AttachmentMode: string(v.AttachmentMode), PerAlloc: v.PerAlloc,
		})
	}
	slices.SortFunc(out, func(a, b *pb.VolumeRequest) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// updateToPB is a group's update block; nil when it has none (the Nomad
// API client sends an empty block for every job).
func updateToPB(u *structs.UpdateStrategy) *pb.UpdateStrategy {
	if u.IsEmpty() {
		return nil
	}
	return &pb.UpdateStrategy{
		MaxParallel: int32(u.MaxParallel), HealthCheck: u.HealthCheck, MinHealthyTimeNs: int64(u.MinHealthyTime),
		HealthyDeadlineNs: int64(u.HealthyDeadline), ProgressDeadlineNs: int64(u.ProgressDeadline),
		AutoRevert: u.AutoRevert, AutoPromote: u.AutoPromote, Canary: int32(u.Canary), StaggerNs: int64(u.Stagger),
	}
}

// allocDeploymentToPB fills an alloc's deployment fields.
func allocDeploymentToPB(a *structs.Allocation, p *pb.Allocation) {
	p.DeploymentId = a.DeploymentID
	p.Canary = a.DeploymentStatus.IsCanary()
	switch {
	case a.DeploymentStatus.IsHealthy():
		p.Healthy = pb.AllocHealth_ALLOC_HEALTH_HEALTHY
	case a.DeploymentStatus.IsUnhealthy():
		p.Healthy = pb.AllocHealth_ALLOC_HEALTH_UNHEALTHY
	}
}

func deploymentToPB(d *structs.Deployment) *pb.Deployment {
	p := &pb.Deployment{
		Id: d.ID, JobVersion: d.JobVersion, JobModifyIndex: d.JobModifyIndex, JobCreateIndex: d.JobCreateIndex,
		Status: d.Status, StatusDescription: d.StatusDescription, CreateIndex: d.CreateIndex, ModifyIndex: d.ModifyIndex,
		TaskGroups: make(map[string]*pb.DeploymentGroupState, len(d.TaskGroups)),
	}
	for name, s := range d.TaskGroups {
		g := &pb.DeploymentGroupState{
			Promoted: s.Promoted, DesiredCanaries: int32(s.DesiredCanaries), DesiredTotal: int32(s.DesiredTotal),
			PlacedCanaries: s.PlacedCanaries, PlacedAllocs: int32(s.PlacedAllocs), HealthyAllocs: int32(s.HealthyAllocs),
			UnhealthyAllocs: int32(s.UnhealthyAllocs), AutoRevert: s.AutoRevert, AutoPromote: s.AutoPromote,
			ProgressDeadlineNs: int64(s.ProgressDeadline),
		}
		if !s.RequireProgressBy.IsZero() {
			g.RequireProgressByNs = s.RequireProgressBy.UnixNano()
		}
		p.TaskGroups[name] = g
	}
	return p
}

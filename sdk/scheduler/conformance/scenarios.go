package conformance

import (
	"fmt"
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// scenarios are the kit's own, in the order they run.
var scenarios = []Scenario{
	{
		Name: RulePortHeld,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			return t.Cluster().Edit(func(req *schedulerpb.ScheduleRequest) {
				for _, tg := range req.GetJob().GetTaskGroups() {
					tg.Networks = []*schedulerpb.NetworkAsk{{Mode: "host",
						ReservedPorts: []*schedulerpb.PortAsk{{Label: "http", Value: 8080}},
						DynamicPorts:  []*schedulerpb.PortAsk{{Label: "admin"}}}}
				}
				for _, n := range req.GetNodes() {
					n.Network = &schedulerpb.NodeNetwork{Ip: "10.0.0.1", MinDynamicPort: 20000, MaxDynamicPort: 20100}
					if n.GetId() == "node-1" {
						n.UsedPorts = []int32{8080}
					}
				}
			}).Request()
		},
		Expect: func(_ Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			var out []string
			for _, p := range read(req, resp).fresh {
				if p.GetNodeId() == "node-1" {
					out = append(out, fmt.Sprintf("%s is placed on node-1, which already holds its static port 8080; a port is held once per node", p.GetId()))
				}
			}
			return out
		},
	},
	{
		Name:    RuleRegister,
		Request: func(t Target) *schedulerpb.ScheduleRequest { return t.Cluster().Request() },
		Expect:  converged,
	},
	{
		Name: RuleStop,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			return t.Cluster().Running(t.PerNode()).Stop().Request()
		},
		Expect: func(_ Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			return allStopped("a stopped job", read(req, resp))
		},
	},
	{
		Name: RulePurge,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			return t.Cluster().Running(t.PerNode()).Purge().Request()
		},
		Expect: func(_ Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			return allStopped("a purged job (absent from the request)", read(req, resp))
		},
	},
	{
		Name: RuleNodeDown,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			return t.Cluster().Running(t.PerNode()).Node("node-1", Down()).Trigger("node-update", "node-1").Request()
		},
		Expect: func(t Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			o := read(req, resp)
			var out []string
			if ids := o.liveKept(onNode("node-1")); len(ids) > 0 {
				out = append(out, fmt.Sprintf("%d allocations on down node node-1 are left running (%s); allocations on a down node must be stopped and marked lost",
					len(ids), strings.Join(ids, ", ")))
			}
			return append(out, converged(t, req, resp)...)
		},
	},
	{
		Name: RuleNodeDrain,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			b := t.Cluster().Running(t.PerNode()).Node("node-3", Draining()).Trigger("node-drain", "node-3")
			return b.Edit(func(req *schedulerpb.ScheduleRequest) {
				for _, a := range req.GetAllocs() {
					if a.GetNodeId() == "node-3" {
						a.Migrate = true
					}
				}
			}).Request()
		},
		Expect: func(t Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			o := read(req, resp)
			var out []string
			if ids := o.liveKept(func(a *schedulerpb.Allocation) bool { return a.GetNodeId() == "node-3" && a.GetMigrate() }); len(ids) > 0 {
				out = append(out, fmt.Sprintf("%d allocations marked for migration on draining node node-3 are left running (%s); the drainer's migrate marks must be acted on",
					len(ids), strings.Join(ids, ", ")))
			}
			return append(out, converged(t, req, resp)...)
		},
	},
	{
		Name: RuleGroupRemoved,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			return t.Cluster().Running(t.PerNode()).NewVersion(func(j *schedulerpb.Job) {
				var kept []*schedulerpb.TaskGroup
				for _, tg := range j.GetTaskGroups() {
					if tg.GetName() != "db" {
						kept = append(kept, tg)
					}
				}
				j.TaskGroups = kept
			}).Request()
		},
		Expect: func(t Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			o := read(req, resp)
			var out []string
			if ids := o.liveKept(func(a *schedulerpb.Allocation) bool { return a.GetTaskGroup() == "db" }); len(ids) > 0 {
				out = append(out, fmt.Sprintf("%d allocations of task group \"db\", which the job no longer has, are left running (%s); a removed group's allocations must be stopped",
					len(ids), strings.Join(ids, ", ")))
			}
			return append(out, converged(t, req, resp)...)
		},
	},
	{
		Name: RuleNewVersion,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			return t.Cluster().Running(t.PerNode()).NewVersion(DestructiveChange).Request()
		},
		Expect: func(t Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			o := read(req, resp)
			updated := map[string]bool{}
			for _, p := range o.inPlace {
				updated[p.GetId()] = true
			}
			cur := req.GetJob().GetJobModifyIndex()
			var out []string
			if ids := o.liveKept(func(a *schedulerpb.Allocation) bool { return a.GetJobModifyIndex() != cur && !updated[a.GetId()] }); len(ids) > 0 {
				first := o.existing[ids[0]]
				out = append(out, fmt.Sprintf("%d allocations keep running an older job version (%s: version %d, job_modify_index %d) after version %d (job_modify_index %d) was registered (%s); each must be updated in place or stopped and replaced",
					len(ids), first.GetId(), first.GetJobVersion(), first.GetJobModifyIndex(), req.GetJob().GetVersion(), cur, strings.Join(ids, ", ")))
			}
			return append(out, converged(t, req, resp)...)
		},
	},
	{
		Name: RuleNoFeasibleNode,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			// Each node has 50 MHz, each task asks for 100.
			return NewBuilder(t.JobType).Nodes(3).
				Node("node-1", Capacity(50, 32)).Node("node-2", Capacity(50, 32)).Node("node-3", Capacity(50, 32)).
				Group("web", t.Count()).Request()
		},
		Expect: func(_ Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			o := read(req, resp)
			var out []string
			if len(o.fresh) > 0 {
				out = append(out, fmt.Sprintf("placed %d allocations though no node has room; with no feasible node nothing is placed", len(o.fresh)))
			}
			for _, tg := range req.GetJob().GetTaskGroups() {
				if _, ok := resp.GetFailedTgAllocs()[tg.GetName()]; !ok {
					out = append(out, fmt.Sprintf("group %q could not be placed but is not in failed_tg_allocs; a group that cannot be placed is reported there with its metric", tg.GetName()))
				}
			}
			if len(resp.GetBlockedEvals()) == 0 {
				out = append(out, "no blocked eval for a job that could not be placed; ask for one (blocked_evals) so the job is placed when room appears")
			}
			return out
		},
	},
	{
		// Every node is full of a low-priority job's allocations and the
		// configuration enables no preemption: the job must leave them.
		Name: RuleOtherJobs,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			b := NewBuilder(t.JobType).Nodes(3).Group("web", t.Count())
			for i := 1; i <= 3; i++ {
				b.OtherJobAlloc(fmt.Sprintf("node-%d", i), fmt.Sprintf("other-%d", i), 10,
					&schedulerpb.Resources{Cpu: 8000, MemoryMb: 16384})
			}
			return b.Edit(func(r *schedulerpb.ScheduleRequest) {
				r.Job.Priority, r.Eval.Priority = 90, 90
			}).Request()
		},
	},
	{
		// The only node is full: of a priority-10 job's allocation and a
		// priority-85 one; the job (priority 90) may preempt the first
		// only. With its type's switch on, a type that declares one must.
		Name: RulePreempts,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			b := NewBuilder(t.JobType).Node("node-1").Group("web", 1).
				OtherJobAlloc("node-1", "other-low", 10, &schedulerpb.Resources{Cpu: 7950, MemoryMb: 16000}).
				OtherJobAlloc("node-1", "other-near", 85, &schedulerpb.Resources{Cpu: 50, MemoryMb: 384})
			return b.Edit(func(r *schedulerpb.ScheduleRequest) {
				r.Job.Priority, r.Eval.Priority = 90, 90
				r.Config = switchOn(t.Info.GetPreemptionSwitch())
			}).Request()
		},
		Expect: func(t Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			if t.Info.GetPreemptionSwitch() == "" {
				return nil
			}
			o := read(req, resp)
			if len(o.fresh) == 0 || !o.preempted["other-low"] {
				return []string{fmt.Sprintf("placed %d allocations, preempted other-low %v on a node full of a job 80 priority points lower, with %s on; a type declaring a preemption switch preempts when it is on",
					len(o.fresh), o.preempted["other-low"], t.Info.GetPreemptionSwitch())}
			}
			return nil
		},
	},
	{
		Name: RuleMaxPlacements,
		Request: func(t Target) *schedulerpb.ScheduleRequest {
			return t.Cluster().MaxPlacements(1).Request()
		},
		Expect: func(_ Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			if n := len(read(req, resp).fresh); n == 0 {
				return []string{"placed nothing with max_placements 1 and room on three nodes; a limited plan still places up to its limit"}
			}
			return nil
		},
	},
}

func onNode(id string) func(*schedulerpb.Allocation) bool {
	return func(a *schedulerpb.Allocation) bool { return a.GetNodeId() == id }
}

// allStopped wants every live allocation stopped and nothing placed.
func allStopped(what string, o *outcome) []string {
	var out []string
	if ids := o.liveKept(func(*schedulerpb.Allocation) bool { return true }); len(ids) > 0 {
		out = append(out, fmt.Sprintf("%s keeps %d allocations running (%s); %s must have every allocation stopped",
			what, len(ids), strings.Join(ids, ", "), what))
	}
	if n := len(o.fresh) + len(o.inPlace); n > 0 {
		out = append(out, fmt.Sprintf("%s got %d placements; %s gets none", what, n, what))
	}
	return out
}

// converged wants the job as its type runs it once the plan is applied:
// for a per-node type, each group's count of current-version allocations on
// every schedulable node; otherwise each group's count in total, on nodes
// that are not down.
func converged(t Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
	o := read(req, resp)
	type key struct{ group, node string }
	have := map[key]int{}
	for _, r := range o.after() {
		n := o.nodes[r.node]
		if !r.current || n == nil || n.GetStatus() != "ready" {
			continue
		}
		k := key{group: r.group}
		if t.PerNode() {
			if !schedulable(n) {
				continue
			}
			k.node = r.node
		}
		have[k]++
	}
	var out []string
	for _, tg := range req.GetJob().GetTaskGroups() {
		want := int(tg.GetCount())
		if !t.PerNode() {
			if got := have[key{group: tg.GetName()}]; got != want {
				out = append(out, fmt.Sprintf("group %q has %d allocations of the current version after the plan, want its count %d", tg.GetName(), got, want))
			}
			continue
		}
		for _, n := range req.GetNodes() {
			if !schedulable(n) {
				continue
			}
			if got := have[key{tg.GetName(), n.GetId()}]; got != want {
				out = append(out, fmt.Sprintf("group %q has %d allocations of the current version on feasible node %s after the plan, want %d; a per-node type runs each group's count on every feasible node",
					tg.GetName(), got, n.GetId(), want))
			}
		}
	}
	return out
}

// switchOn is a scheduler configuration with only the named preemption
// switch on (none for "").
func switchOn(name string) *schedulerpb.SchedulerConfig {
	c := &schedulerpb.SchedulerConfig{}
	switch name {
	case "SystemSchedulerEnabled":
		c.PreemptionSystem = true
	case "SysBatchSchedulerEnabled":
		c.PreemptionSysbatch = true
	case "BatchSchedulerEnabled":
		c.PreemptionBatch = true
	case "ServiceSchedulerEnabled":
		c.PreemptionService = true
	}
	return c
}

package conformance

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// outcome is a response read against its request: what the plan stops,
// what it places, and which of the job's allocations run afterwards.
type outcome struct {
	req       *schedulerpb.ScheduleRequest
	resp      *schedulerpb.ScheduleResponse
	nodes     map[string]*schedulerpb.Node
	existing  map[string]*schedulerpb.Allocation
	others    map[string]*schedulerpb.NodeAlloc // other jobs' allocs by ID
	otherNode map[string]string                 // other alloc ID -> node ID
	stopped   map[string]bool
	preempted map[string]bool
	fresh     []*schedulerpb.PlacedAlloc // new allocations
	inPlace   []*schedulerpb.PlacedAlloc // in-place updates of existing ones
}

func read(req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) *outcome {
	o := &outcome{
		req: req, resp: resp,
		nodes:    map[string]*schedulerpb.Node{},
		existing: map[string]*schedulerpb.Allocation{},
		others:   map[string]*schedulerpb.NodeAlloc{}, otherNode: map[string]string{},
		stopped: map[string]bool{}, preempted: map[string]bool{},
	}
	for _, n := range req.GetNodes() {
		o.nodes[n.GetId()] = n
		for _, a := range n.GetOthers() {
			o.others[a.GetId()] = a
			o.otherNode[a.GetId()] = n.GetId()
		}
	}
	for _, a := range req.GetAllocs() {
		o.existing[a.GetId()] = a
	}
	plan := resp.GetPlan()
	for _, s := range plan.GetNodeUpdate() {
		o.stopped[s.GetAllocId()] = true
	}
	for _, p := range plan.GetNodePreemptions() {
		o.preempted[p.GetAllocId()] = true
	}
	for _, p := range plan.GetNodeAllocation() {
		for _, id := range p.GetPreemptedAllocations() {
			o.preempted[id] = true
		}
		if p.GetInPlace() {
			o.inPlace = append(o.inPlace, p)
		} else {
			o.fresh = append(o.fresh, p)
		}
	}
	return o
}

// running is one allocation of the job that runs after the plan.
type running struct {
	id, name, node, group string
	current               bool // runs the job's current version
	placed                bool // placed or updated by this plan
}

// after lists the job's allocations that run once the plan is applied.
func (o *outcome) after() []running {
	var out []running
	updated := map[string]*schedulerpb.PlacedAlloc{}
	for _, p := range o.inPlace {
		updated[p.GetId()] = p
	}
	for _, a := range o.req.GetAllocs() {
		if !live(a) || o.stopped[a.GetId()] {
			continue
		}
		_, up := updated[a.GetId()]
		out = append(out, running{
			id: a.GetId(), name: a.GetName(), node: a.GetNodeId(), group: a.GetTaskGroup(),
			current: up || a.GetJobModifyIndex() == o.req.GetJob().GetJobModifyIndex(), placed: up,
		})
	}
	for _, p := range o.fresh {
		out = append(out, running{id: p.GetId(), name: p.GetName(), node: p.GetNodeId(), group: p.GetTaskGroup(), current: true, placed: true})
	}
	return out
}

// liveKept lists the IDs of live allocations matching keep that the plan
// leaves running.
func (o *outcome) liveKept(keep func(*schedulerpb.Allocation) bool) []string {
	var ids []string
	for _, a := range o.req.GetAllocs() {
		if live(a) && !o.stopped[a.GetId()] && keep(a) {
			ids = append(ids, a.GetId())
		}
	}
	return ids
}

// Invariants checks the rules every response keeps, whatever the request:
// known-group, feasible-node, alloc-id, alloc-name, other-jobs, fits,
// followups and max-placements. Check applies them to every scenario; call it directly
// to hold a response from a test of your own to them.
func Invariants(t Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []Failure {
	o := read(req, resp)
	var out []Failure
	fail := func(rule, format string, args ...any) {
		out = append(out, Failure{Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
	job := req.GetJob()

	// known-group
	for _, p := range append(append([]*schedulerpb.PlacedAlloc{}, o.fresh...), o.inPlace...) {
		switch {
		case job == nil:
			fail(RuleKnownGroup, "placed %s for group %q, but the job is gone; a job that is not in the request gets no placements", p.GetId(), p.GetTaskGroup())
		case findGroup(job, p.GetTaskGroup()) == nil:
			fail(RuleKnownGroup, "placed %s for task group %q, which the job does not have; placements only for the job's task groups", p.GetId(), p.GetTaskGroup())
		}
	}

	// feasible-node
	for _, p := range o.fresh {
		n, ok := o.nodes[p.GetNodeId()]
		switch {
		case !ok:
			fail(RuleFeasibleNode, "placed %s on node %q, which is not in the request; new allocations only on the request's nodes", p.GetId(), p.GetNodeId())
		case n.GetStatus() != "ready":
			fail(RuleFeasibleNode, "placed %s on node %s, which is %s; new allocations only on ready nodes", p.GetId(), n.GetId(), n.GetStatus())
		case n.GetDraining():
			fail(RuleFeasibleNode, "placed %s on node %s, which is draining; nothing new goes to a draining node", p.GetId(), n.GetId())
		case !n.GetEligible():
			fail(RuleFeasibleNode, "placed %s on node %s, which is ineligible; new allocations only on eligible nodes", p.GetId(), n.GetId())
		}
	}
	for _, p := range o.inPlace {
		if a, ok := o.existing[p.GetId()]; ok && a.GetNodeId() != p.GetNodeId() {
			fail(RuleFeasibleNode, "updates %s in place on node %q, but it runs on %s; an in-place update stays on its node", p.GetId(), p.GetNodeId(), a.GetNodeId())
		}
	}

	// alloc-id
	seen := map[string]int{}
	for _, p := range o.fresh {
		id := p.GetId()
		seen[id]++
		switch {
		case id == "":
			fail(RuleAllocID, "placed an allocation (%s on %s) with an empty ID; every new allocation needs a fresh ID", p.GetName(), p.GetNodeId())
		case seen[id] == 2:
			fail(RuleAllocID, "placed more than one allocation with ID %q; new allocation IDs must be unique", id)
		case o.existing[id] != nil:
			fail(RuleAllocID, "placed a new allocation with ID %q, the ID of an existing allocation of the job; new IDs must be fresh (an update of an existing allocation sets in_place)", id)
		case o.others[id] != nil:
			fail(RuleAllocID, "placed a new allocation with ID %q, the ID of another job's allocation; new IDs must be fresh", id)
		}
	}
	for _, p := range o.inPlace {
		if a, ok := o.existing[p.GetId()]; !ok || !live(a) {
			fail(RuleAllocID, "updates %q in place, which is not a live allocation of the job; in_place names an existing allocation", p.GetId())
		} else if a.GetTaskGroup() != p.GetTaskGroup() {
			fail(RuleAllocID, "updates %s of group %q in place as group %q; an in-place update keeps its group", p.GetId(), a.GetTaskGroup(), p.GetTaskGroup())
		}
	}

	// alloc-name
	if job != nil {
		for _, p := range append(append([]*schedulerpb.PlacedAlloc{}, o.fresh...), o.inPlace...) {
			tg := findGroup(job, p.GetTaskGroup())
			if tg == nil {
				continue // known-group says so
			}
			if msg := checkName(job, tg, p.GetName()); msg != "" {
				fail(RuleAllocName, "placed %s named %q: %s", p.GetId(), p.GetName(), msg)
			}
		}
		type key struct{ name, node string }
		byKey := map[key][]running{}
		for _, r := range o.after() {
			k := key{name: r.name}
			if t.PerNode() {
				k.node = r.node
			}
			byKey[k] = append(byKey[k], r)
		}
		keys := make([]key, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].name+keys[i].node < keys[j].name+keys[j].node })
		for _, k := range keys {
			rs := byKey[k]
			if len(rs) < 2 || !anyPlaced(rs) {
				continue
			}
			var ids []string
			for _, r := range rs {
				ids = append(ids, r.id)
			}
			where, scope := "", "within the job"
			if t.PerNode() {
				where, scope = " on node "+k.node, "on one node"
			}
			fail(RuleAllocName, "after the plan %d live allocations are named %q%s (%s); names are unique %s",
				len(rs), k.name, where, strings.Join(ids, ", "), scope)
		}
	}

	// other-jobs
	for _, s := range resp.GetPlan().GetNodeUpdate() {
		if o.existing[s.GetAllocId()] == nil {
			fail(RuleOtherJobs, "stops %q, which is not an allocation of the job; a plan stops only the job's own allocations", s.GetAllocId())
		}
	}
	allowed := preemptionAllowed(t, req.GetConfig())
	for id := range sortedKeys(o.preempted) {
		switch {
		case o.others[id] == nil:
			fail(RuleOtherJobs, "preempts %q, which no node lists among its other allocations; preempt only what the request offers", id)
		case !allowed:
			fail(RuleOtherJobs, "preempts %s of job %q, but the scheduler configuration does not enable preemption for %q; never touch other jobs' allocations then",
				id, o.others[id].GetJobId(), t.JobType)
		case req.GetJob().GetPriority()-o.others[id].GetJobPriority() < preemptPriorityDelta:
			fail(RuleOtherJobs, "preempts %s of job %q at priority %d, less than %d below the job's %d; only allocations of jobs at least %d lower may be preempted",
				id, o.others[id].GetJobId(), o.others[id].GetJobPriority(), preemptPriorityDelta, req.GetJob().GetPriority(), preemptPriorityDelta)
		}
	}
	for _, m := range o.preemptionRecords() {
		fail(RuleOtherJobs, "%s", m)
	}

	// fits
	out = append(out, o.fits()...)

	// ports
	for _, m := range o.ports() {
		fail(RulePorts, "%s", m)
	}

	// followups
	for _, f := range o.followups(resp) {
		fail(RuleFollowups, "%s", f)
	}

	// max-placements
	if m := req.GetMaxPlacements(); m != 0 {
		limit := max(m, 0)
		if n := len(o.fresh); n > int(limit) {
			fail(RuleMaxPlacements, "placed %d new allocations with max_placements %d; a plan places at most max_placements (the rest are queued)", n, m)
		}
	}
	return out
}

// sortedKeys yields a set's keys in order, so failures come out stable.
func sortedKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !yield(k) {
				return
			}
		}
	}
}

func anyPlaced(rs []running) bool {
	for _, r := range rs {
		if r.placed {
			return true
		}
	}
	return false
}

// checkName returns what is wrong with an allocation name, or "".
func checkName(job *schedulerpb.Job, tg *schedulerpb.TaskGroup, name string) string {
	var rest string
	var ok bool
	for _, prefix := range []string{job.GetId(), job.GetName()} {
		if prefix == "" {
			continue
		}
		if rest, ok = strings.CutPrefix(name, prefix+"."+tg.GetName()+"["); ok {
			break
		}
	}
	want := fmt.Sprintf("want %q with 0 ≤ index < %d", job.GetId()+"."+tg.GetName()+"[<index>]", tg.GetCount())
	if !ok {
		return want
	}
	digits, ok := strings.CutSuffix(rest, "]")
	idx, err := strconv.Atoi(digits)
	if !ok || err != nil || idx < 0 || idx >= int(tg.GetCount()) {
		return want
	}
	return ""
}

// preemptionAllowed reads the operator's switch the type declares.
func preemptionAllowed(t Target, cfg *schedulerpb.SchedulerConfig) bool {
	switch t.Info.GetPreemptionSwitch() {
	case "SystemSchedulerEnabled":
		return cfg.GetPreemptionSystem()
	case "SysBatchSchedulerEnabled":
		return cfg.GetPreemptionSysbatch()
	case "BatchSchedulerEnabled":
		return cfg.GetPreemptionBatch()
	case "ServiceSchedulerEnabled":
		return cfg.GetPreemptionService()
	}
	return false
}

// fits checks CPU and memory of every node the plan places on.
func (o *outcome) fits() []Failure {
	type usage struct{ cpu, mem int64 }
	delta := map[string]*usage{}
	at := func(node string) *usage {
		if delta[node] == nil {
			delta[node] = &usage{}
		}
		return delta[node]
	}
	touched := map[string]bool{}
	for id := range o.stopped {
		if a := o.existing[id]; a != nil && live(a) {
			u := at(a.GetNodeId())
			u.cpu -= a.GetResources().GetCpu()
			u.mem -= a.GetResources().GetMemoryMb()
		}
	}
	for id := range o.preempted {
		if a := o.others[id]; a != nil {
			u := at(o.otherNode[id])
			u.cpu -= a.GetResources().GetCpu()
			u.mem -= a.GetResources().GetMemoryMb()
		}
	}
	add := func(p *schedulerpb.PlacedAlloc, sign int64) {
		u := at(p.GetNodeId())
		for _, r := range p.GetTaskResources() {
			u.cpu += sign * r.GetCpu()
			u.mem += sign * r.GetMemoryMb()
		}
	}
	for _, p := range o.fresh {
		add(p, 1)
		touched[p.GetNodeId()] = true
	}
	for _, p := range o.inPlace {
		add(p, 1)
		if a := o.existing[p.GetId()]; a != nil && !o.stopped[a.GetId()] {
			u := at(a.GetNodeId())
			u.cpu -= a.GetResources().GetCpu()
			u.mem -= a.GetResources().GetMemoryMb()
		}
		touched[p.GetNodeId()] = true
	}
	var out []Failure
	for node := range sortedKeys(touched) {
		n := o.nodes[node]
		if n == nil {
			continue // feasible-node says so
		}
		cpu := n.GetUsed().GetCpu() + delta[node].cpu
		mem := n.GetUsed().GetMemoryMb() + delta[node].mem
		if cpu > n.GetCapacity().GetCpu() || mem > n.GetCapacity().GetMemoryMb() {
			out = append(out, Failure{Rule: RuleFits, Message: fmt.Sprintf(
				"node %s is over capacity after the plan: cpu %d of %d MHz, memory %d of %d MB; placements must fit the node's free resources",
				node, cpu, n.GetCapacity().GetCpu(), mem, n.GetCapacity().GetMemoryMb())})
		}
	}
	return out
}

// canonicalUUID is the form the core accepts for a follow-up eval's ID.
var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// followups says what is wrong with the response's follow-up evals, alloc
// follow-ups and previous_allocation links.
func (o *outcome) followups(resp *schedulerpb.ScheduleResponse) []string {
	var out []string
	evals := map[string]bool{}
	for i, fe := range resp.GetFollowupEvals() {
		switch id := fe.GetId(); {
		case !canonicalUUID.MatchString(id):
			out = append(out, fmt.Sprintf("followup_evals[%d] has ID %q; a follow-up eval's ID is a lowercase UUID (derive it from the eval, e.g. reschedule.FollowupEvalID)", i, id))
		case evals[id]:
			out = append(out, fmt.Sprintf("followup_evals[%d] repeats ID %s; follow-up eval IDs are distinct", i, id))
		case fe.GetWaitUntilNs() <= 0:
			out = append(out, fmt.Sprintf("follow-up eval %s has no wait_until_ns; a follow-up eval says when it is due", id))
		}
		evals[fe.GetId()] = true
	}
	marked := map[string]bool{}
	for _, m := range resp.GetPlan().GetAllocFollowups() {
		a := o.existing[m.GetAllocId()]
		switch {
		case a == nil:
			out = append(out, fmt.Sprintf("marks %q with a follow-up eval, but it is not an allocation of the job", m.GetAllocId()))
		case live(a):
			out = append(out, fmt.Sprintf("marks %s with a follow-up eval while it is live; only a finished allocation waits for one", a.GetId()))
		case marked[a.GetId()]:
			out = append(out, fmt.Sprintf("marks %s twice; an allocation waits for one follow-up eval", a.GetId()))
		case !evals[m.GetFollowupEvalId()]:
			out = append(out, fmt.Sprintf("marks %s with follow-up eval %q, which is not in followup_evals", a.GetId(), m.GetFollowupEvalId()))
		}
		marked[m.GetAllocId()] = true
	}
	for _, p := range o.fresh {
		if prev := p.GetPreviousAllocation(); prev != "" && o.existing[prev] == nil {
			out = append(out, fmt.Sprintf("placed %s replacing %q, which is not an allocation of the job; previous_allocation names one of the job's", p.GetId(), prev))
		}
	}
	return out
}

// preemptPriorityDelta is Nomad's preemption delta: only allocations of
// jobs at least this much lower in priority may be preempted.
const preemptPriorityDelta = 10

// preemptionRecords checks that every preemption names the new allocation
// of the plan that causes it, on the victim's node, and that the new
// allocation lists it among its preempted_allocations (and the reverse),
// as the core records both on the allocations.
func (o *outcome) preemptionRecords() []string {
	var out []string
	byID := map[string]*schedulerpb.PlacedAlloc{}
	for _, p := range o.fresh {
		byID[p.GetId()] = p
	}
	recorded := map[string]string{} // victim -> preempting alloc
	for _, pr := range o.resp.GetPlan().GetNodePreemptions() {
		id, by := pr.GetAllocId(), pr.GetPreemptedByAllocation()
		recorded[id] = by
		p := byID[by]
		switch {
		case p == nil:
			out = append(out, fmt.Sprintf("preemption of %q names preempted_by_allocation %q, which is no new allocation of the plan", id, by))
		case p.GetNodeId() != pr.GetNodeId() || (o.otherNode[id] != "" && o.otherNode[id] != pr.GetNodeId()):
			out = append(out, fmt.Sprintf("preemption of %q is on node %q, its victim on %q and the preempting %q on %q; preempt only on the node placed on",
				id, pr.GetNodeId(), o.otherNode[id], by, p.GetNodeId()))
		case !slices.Contains(p.GetPreemptedAllocations(), id):
			out = append(out, fmt.Sprintf("preemption of %q by %q is not in that allocation's preempted_allocations", id, by))
		}
	}
	for _, p := range o.fresh {
		for _, id := range p.GetPreemptedAllocations() {
			if recorded[id] != p.GetId() {
				out = append(out, fmt.Sprintf("allocation %q lists %q in preempted_allocations, but node_preemptions does not record it preempted by it", p.GetId(), id))
			}
		}
	}
	return out
}

package schedio

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// ConvertPlan turns a plugin's plan into the core's plan, checked against
// snap, the snapshot the request was built from. It returns the set of
// alloc IDs that are new (not in-place updates). A plan that names
// allocations the job does not have, or task groups its job does not
// have, is refused whole with an ErrInvalid naming them: dropping those
// entries would commit a plan the plugin did not make.
// job is the version the request was built for (nil once purged); now
// stamps the allocations' and the deployment's times.
func ConvertPlan(snap PlanState, ev *structs.Evaluation, token string, job *structs.Job, p *pb.Plan, now time.Time) (*structs.Plan, map[string]bool, error) {
	c := &planConverter{snap: snap, ev: ev, job: job, now: now.UnixNano(), plan: emptyPlan(snap, ev, token, job), newAllocs: map[string]bool{}}
	if p == nil {
		return c.plan, c.newAllocs, nil
	}
	if err := checkRescheduleEvents(ev.JobID, p); err != nil {
		return nil, nil, err
	}
	if err := c.addStops(p.NodeUpdate); err != nil {
		return nil, nil, err
	}
	if err := c.addPlacements(p.NodeAllocation, metricFromPB(p.PlacementMetric)); err != nil {
		return nil, nil, err
	}
	if err := c.addPreemptions(p.NodePreemptions); err != nil {
		return nil, nil, err
	}
	if err := c.bad.err(ev.JobID); err != nil {
		return nil, nil, err
	}
	if err := convertPlanDeployment(snap, ev, job, p, c.plan, c.newAllocs, now); err != nil {
		return nil, nil, err
	}
	for k, v := range c.plan.NodeUpdate {
		if len(v) == 0 {
			delete(c.plan.NodeUpdate, k)
		}
	}
	c.plan.Annotations = annotationsFromPB(p.DesiredTgUpdates)
	return c.plan, c.newAllocs, nil
}

// emptyPlan is the core's plan for the eval before any of the plugin's
// entries are added.
func emptyPlan(snap PlanState, ev *structs.Evaluation, token string, job *structs.Job) *structs.Plan {
	plan := &structs.Plan{
		EvalID: ev.ID, EvalToken: token, Priority: ev.Priority, Job: job,
		NodeUpdate: map[string][]*structs.Allocation{}, NodeAllocation: map[string][]*structs.Allocation{},
		NodePreemptions: map[string][]*structs.Allocation{}, SnapshotIndex: snap.LatestIndex(),
	}
	if job != nil {
		plan.AllAtOnce = job.AllAtOnce
	}
	return plan
}

// planConverter carries one plan's conversion: the plan built so far, the
// new allocations in it, and what the plugin named that does not exist.
// A read error of the snapshot ends the conversion at once; a bad entry is
// collected, so that the refusal names all of them.
type planConverter struct {
	snap      PlanState
	ev        *structs.Evaluation
	job       *structs.Job
	now       int64
	plan      *structs.Plan
	newAllocs map[string]bool
	bad       planProblems
}

// jobAlloc reads an alloc the plan stops, updates or replaces; it must be
// one of the eval's job, else it is recorded as bad and nil returned.
func (c *planConverter) jobAlloc(id string) (*structs.Allocation, error) {
	a, err := c.snap.AllocByID(nil, id)
	if err != nil {
		return nil, fmt.Errorf("read alloc %q: %w", id, err)
	}
	if a == nil || a.Namespace != c.ev.Namespace || a.JobID != c.ev.JobID {
		c.bad.allocs = append(c.bad.allocs, id)
		return nil, nil
	}
	return a, nil
}

// addStops adds the allocs the plugin stops, as stop records of the
// stored allocs (the plugin chooses only the statuses and the follow-up).
func (c *planConverter) addStops(stops []*pb.AllocStop) error {
	for _, st := range stops {
		a, err := c.jobAlloc(st.AllocId)
		if err != nil {
			return err
		}
		if a == nil {
			continue
		}
		stop := &structs.Allocation{
			ID: a.ID, Namespace: a.Namespace, EvalID: c.ev.ID, Name: a.Name, NodeID: a.NodeID, JobID: a.JobID,
			TaskGroup: a.TaskGroup, DesiredStatus: structs.AllocDesiredStatusStop,
			DesiredDescription: st.DesiredDescription, ClientStatus: st.ClientStatus, FollowupEvalID: st.FollowupEvalId,
			ModifyTime: c.now,
		}
		c.plan.NodeUpdate[a.NodeID] = append(c.plan.NodeUpdate[a.NodeID], stop)
	}
	return nil
}

// addPlacements adds the plugin's placements: in-place updates of the
// job's allocs and new allocs, each of the latter with the placement's
// metrics or else the plan's shared ones.
func (c *planConverter) addPlacements(placed []*pb.PlacedAlloc, shared *structs.AllocMetric) error {
	for _, pa := range placed {
		var a *structs.Allocation
		var err error
		if pa.InPlace {
			a, err = c.inPlaceUpdate(pa)
		} else {
			a, err = c.newAlloc(pa, shared)
		}
		if err != nil {
			return err
		}
		if a == nil {
			continue
		}
		if pa.ClientStatus != "" {
			a.ClientStatus = pa.ClientStatus
		}
		a.ModifyTime = c.now
		c.plan.NodeAllocation[a.NodeID] = append(c.plan.NodeAllocation[a.NodeID], a)
	}
	return nil
}

// inPlaceUpdate is the stored alloc with the placement's resources; nil
// when the alloc is not the job's.
func (c *planConverter) inPlaceUpdate(pa *pb.PlacedAlloc) (*structs.Allocation, error) {
	old, err := c.jobAlloc(pa.Id)
	if err != nil || old == nil {
		return nil, err
	}
	a := old.Copy()
	a.Job = nil
	a.EvalID = c.ev.ID
	if len(pa.TaskResources) > 0 {
		// An in-place update keeps the ports the alloc holds, whatever
		// the plugin sends.
		var shared structs.AllocatedSharedResources
		if old.AllocatedResources != nil {
			shared = old.AllocatedResources.Shared
		}
		a.AllocatedResources = allocatedFromPB(pa)
		a.AllocatedResources.Shared.Networks, a.AllocatedResources.Shared.Ports = shared.Networks, shared.Ports
	}
	return a, nil
}

// newAlloc is a new alloc of the placement's group with the ports the
// plugin picked; nil when the group, its ports or the alloc it replaces
// are not the job's.
func (c *planConverter) newAlloc(pa *pb.PlacedAlloc, shared *structs.AllocMetric) (*structs.Allocation, error) {
	var tg *structs.TaskGroup
	if c.job != nil {
		tg = c.job.LookupTaskGroup(pa.TaskGroup)
	}
	if tg == nil {
		c.bad.groups = append(c.bad.groups, pa.TaskGroup)
		return nil, nil
	}
	nets, ports, err := placedPorts(tg, pa.Ports)
	if err != nil {
		c.bad.ports = append(c.bad.ports, err.Error())
		return nil, nil
	}
	if pa.PreviousAllocation != "" {
		// The state store links the previous alloc to this one: it must
		// be the job's.
		prev, err := c.jobAlloc(pa.PreviousAllocation)
		if err != nil || prev == nil {
			return nil, err
		}
	}
	a := &structs.Allocation{
		ID: pa.Id, Namespace: c.ev.Namespace, EvalID: c.ev.ID, Name: pa.Name, NodeID: pa.NodeId,
		NodeName: pa.NodeName, JobID: c.ev.JobID, TaskGroup: pa.TaskGroup,
		AllocatedResources: allocatedFromPB(pa), Metrics: shared,
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
		PreviousAllocation: pa.PreviousAllocation, PreemptedAllocations: pa.PreemptedAllocations,
		RescheduleTracker: rescheduleTrackerFromPB(pa.RescheduleEvents), CreateTime: c.now,
	}
	if pa.Metrics != nil {
		a.Metrics = metricFromPB(pa.Metrics)
	}
	a.AllocatedResources.Shared.Networks, a.AllocatedResources.Shared.Ports = nets, ports
	c.newAllocs[a.ID] = true
	return a, nil
}

// addPreemptions adds the evictions the plugin's placements need; a victim
// may be any job's, but it must exist.
func (c *planConverter) addPreemptions(preempted []*pb.Preemption) error {
	for _, pr := range preempted {
		victim, err := c.snap.AllocByID(nil, pr.AllocId)
		if err != nil {
			return fmt.Errorf("read alloc %q: %w", pr.AllocId, err)
		}
		if victim == nil {
			c.bad.allocs = append(c.bad.allocs, pr.AllocId)
			continue
		}
		c.plan.NodePreemptions[pr.NodeId] = append(c.plan.NodePreemptions[pr.NodeId], &structs.Allocation{
			ID: pr.AllocId, JobID: pr.JobId, Namespace: pr.Namespace, NodeID: pr.NodeId,
			DesiredStatus: structs.AllocDesiredStatusEvict, PreemptedByAllocation: pr.PreemptedByAllocation,
			DesiredDescription: "Preempted by alloc ID " + pr.PreemptedByAllocation, ModifyTime: c.now,
		})
	}
	return nil
}

// annotationsFromPB is the plan's per-group summary; nil without one.
func annotationsFromPB(updates map[string]*pb.DesiredUpdates) *structs.PlanAnnotations {
	if len(updates) == 0 {
		return nil
	}
	ann := &structs.PlanAnnotations{DesiredTGUpdates: make(map[string]*structs.DesiredUpdates, len(updates))}
	for tg, d := range updates {
		ann.DesiredTGUpdates[tg] = &structs.DesiredUpdates{
			Ignore: d.Ignore, Place: d.Place, Migrate: d.Migrate, Stop: d.Stop, InPlaceUpdate: d.InPlaceUpdate,
			DestructiveUpdate: d.DestructiveUpdate, Canary: d.Canary, Preemptions: d.Preemptions,
			Disconnect: d.Disconnect, Reconnect: d.Reconnect, RescheduleNow: d.RescheduleNow, RescheduleLater: d.RescheduleLater,
		}
	}
	return ann
}

// planProblems collects what a plugin's plan names that does not exist.
type planProblems struct {
	allocs []string // alloc IDs unknown, or not of the eval's job
	groups []string // task groups not in the job
	ports  []string // ports that are not the groups' asks
}

func (b *planProblems) err(jobID string) error {
	if len(b.allocs) == 0 && len(b.groups) == 0 && len(b.ports) == 0 {
		return nil
	}
	var parts []string
	if len(b.allocs) > 0 {
		parts = append(parts, "allocations that are not the job's: "+listSome(b.allocs))
	}
	if len(b.groups) > 0 {
		parts = append(parts, "task groups the job does not have: "+listSome(b.groups))
	}
	if len(b.ports) > 0 {
		parts = append(parts, "ports the groups do not ask for: "+listSome(b.ports))
	}
	return structs.NewError(structs.ErrInvalid, "scheduler plugin's plan for job %q names %s",
		jobID, strings.Join(parts, "; "))
}

// listSome quotes up to five distinct entries of xs and counts the rest, so
// a plan naming 10,000 bad entries still gives a readable error.
func listSome(xs []string) string {
	slices.Sort(xs)
	xs = slices.Compact(xs)
	const show = 5
	quoted := make([]string, 0, show)
	for i, x := range xs {
		if i == show {
			break
		}
		quoted = append(quoted, strconv.Quote(x))
	}
	out := strings.Join(quoted, ", ")
	if len(xs) > show {
		out += fmt.Sprintf(" and %d more", len(xs)-show)
	}
	return out
}

func allocatedFromPB(pa *pb.PlacedAlloc) *structs.AllocatedResources {
	ar := &structs.AllocatedResources{
		Tasks:  make(map[string]*structs.AllocatedTaskResources, len(pa.TaskResources)),
		Shared: structs.AllocatedSharedResources{DiskMB: pa.SharedDiskMb},
	}
	for name, r := range pa.TaskResources {
		ar.Tasks[name] = &structs.AllocatedTaskResources{
			Cpu:    structs.AllocatedCpuResources{CpuShares: r.Cpu},
			Memory: structs.AllocatedMemoryResources{MemoryMB: r.MemoryMb, MemoryMaxMB: r.MemoryMaxMb},
		}
	}
	return ar
}

// MetricsFromPB is the placement metrics of the groups that failed to place.
func MetricsFromPB(m map[string]*pb.AllocMetric) map[string]*structs.AllocMetric {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*structs.AllocMetric, len(m))
	for k, v := range m {
		out[k] = metricFromPB(v)
	}
	return out
}

func intMap(m map[string]int32) map[string]int {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

func metricFromPB(m *pb.AllocMetric) *structs.AllocMetric {
	if m == nil {
		return nil
	}
	return &structs.AllocMetric{
		NodesEvaluated: int(m.NodesEvaluated), NodesFiltered: int(m.NodesFiltered), NodesInPool: int(m.NodesInPool),
		NodePool: m.NodePool, NodesAvailable: intMap(m.NodesAvailable), ClassFiltered: intMap(m.ClassFiltered),
		ConstraintFiltered: intMap(m.ConstraintFiltered), NodesExhausted: int(m.NodesExhausted),
		ClassExhausted: intMap(m.ClassExhausted), DimensionExhausted: intMap(m.DimensionExhausted),
		CoalescedFailures: int(m.CoalescedFailures), AllocationTime: time.Duration(m.AllocationTimeNs),
		Scores: m.Scores,
	}
}

// placedPorts turns the ports a plugin picked for a new alloc of tg into
// the alloc's shared networks and port mappings. The plugin must hand out
// exactly the group's labels, static ones at their value, every port in
// range; anything else is refused as a bad plan.
func placedPorts(tg *structs.TaskGroup, ports []*pb.AllocatedPort) ([]*structs.NetworkResource, []structs.AllocatedPortMapping, error) {
	asked := map[string]structs.Port{}
	var mode string
	for _, n := range tg.Networks {
		if n == nil {
			continue
		}
		mode = n.Mode
		for _, p := range n.ReservedPorts {
			asked[p.Label] = p
		}
		for _, p := range n.DynamicPorts {
			asked[p.Label] = p
		}
	}
	if len(ports) != len(asked) {
		return nil, nil, fmt.Errorf("group %q asks for %d ports, the plan gives %d", tg.Name, len(asked), len(ports))
	}
	if len(asked) == 0 {
		return nil, nil, nil
	}
	net := &structs.NetworkResource{Mode: mode}
	mappings := make([]structs.AllocatedPortMapping, 0, len(ports))
	given := map[string]bool{}
	for _, p := range ports {
		ask, ok := asked[p.Label]
		switch {
		case !ok || given[p.Label]:
			return nil, nil, fmt.Errorf("group %q: port %q is not asked for, or given twice", tg.Name, p.Label)
		case p.Value < structs.MinPort || p.Value > structs.MaxPort:
			return nil, nil, fmt.Errorf("group %q: port %q value %d is outside %d-%d", tg.Name, p.Label, p.Value, structs.MinPort, structs.MaxPort)
		case ask.Value != 0 && int(p.Value) != ask.Value:
			return nil, nil, fmt.Errorf("group %q: static port %q is %d, the plan gives %d", tg.Name, p.Label, ask.Value, p.Value)
		}
		given[p.Label] = true
		net.IP = p.HostIp
		port := structs.Port{Label: p.Label, Value: int(p.Value), To: ask.To, HostNetwork: ask.HostNetwork}
		if ask.Value != 0 {
			net.ReservedPorts = append(net.ReservedPorts, port)
		} else {
			net.DynamicPorts = append(net.DynamicPorts, port)
		}
		mappings = append(mappings, structs.AllocatedPortMapping{Label: p.Label, Value: int(p.Value), To: ask.To, HostIP: p.HostIp})
	}
	return []*structs.NetworkResource{net}, mappings, nil
}

// checkRescheduleEvents bounds the trackers of a plan's new allocs: a
// tracker only grows by one per reschedule, so one longer than the limit
// is a plugin that never prunes it.
func checkRescheduleEvents(jobID string, p *pb.Plan) error {
	for i, pa := range p.GetNodeAllocation() {
		if n := len(pa.GetRescheduleEvents()); n > MaxRescheduleEvents {
			return structs.NewError(structs.ErrInvalid,
				"scheduler plugin's plan for job %q: node_allocation[%d] (%q) has %d reschedule_events, more than the %d allowed",
				jobID, i, pa.GetName(), n, MaxRescheduleEvents)
		}
	}
	return nil
}

// MaxRescheduleEvents is the longest reschedule tracker a new alloc may
// carry: a plugin keeps only the events within the policy's interval (or a
// few, when unlimited), which a valid policy's attempts bound.
const MaxRescheduleEvents = structs.MaxRescheduleAttempts

// rescheduleTrackerFromPB is the tracker of a new alloc; nil without
// events.
func rescheduleTrackerFromPB(events []*pb.RescheduleEvent) *structs.RescheduleTracker {
	if len(events) == 0 {
		return nil
	}
	t := &structs.RescheduleTracker{Events: make([]*structs.RescheduleEvent, 0, len(events))}
	for _, e := range events {
		if e == nil {
			continue
		}
		t.Events = append(t.Events, &structs.RescheduleEvent{
			RescheduleTime: e.GetRescheduleTimeNs(), PrevAllocID: e.GetPrevAllocId(), PrevNodeID: e.GetPrevNodeId(),
			Delay: time.Duration(e.GetDelayNs()),
		})
	}
	return t
}

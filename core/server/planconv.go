package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// convertPlan turns a plugin's plan into the core's plan. It returns the
// set of alloc IDs that are new (not in-place updates). A plan that names
// allocations the job does not have, or task groups its job does not
// have, is refused whole with an ErrInvalid naming them: dropping those
// entries would commit a plan the plugin did not make.
// job is the version the request was built for (nil once purged).
func (s *Server) convertPlan(snap *state.StateSnapshot, ev *structs.Evaluation, token string, job *structs.Job, p *pb.Plan) (*structs.Plan, map[string]bool, error) {
	plan := &structs.Plan{
		EvalID: ev.ID, EvalToken: token, Priority: ev.Priority, Job: job,
		NodeUpdate: map[string][]*structs.Allocation{}, NodeAllocation: map[string][]*structs.Allocation{},
		NodePreemptions: map[string][]*structs.Allocation{}, SnapshotIndex: snap.LatestIndex(),
	}
	if job != nil {
		plan.AllAtOnce = job.AllAtOnce
	}
	newAllocs := map[string]bool{}
	if p == nil {
		return plan, newAllocs, nil
	}
	if err := checkRescheduleEvents(ev.JobID, p); err != nil {
		return nil, nil, err
	}
	var bad planProblems
	// jobAlloc reads an alloc the plan stops or updates; it must be one of
	// the eval's job.
	jobAlloc := func(id string) (*structs.Allocation, error) {
		a, err := snap.AllocByID(nil, id)
		if err != nil {
			return nil, fmt.Errorf("read alloc %q: %w", id, err)
		}
		if a == nil || a.Namespace != ev.Namespace || a.JobID != ev.JobID {
			bad.allocs = append(bad.allocs, id)
			return nil, nil
		}
		return a, nil
	}
	now := s.cfg.Now().UnixNano()
	shared := metricFromPB(p.PlacementMetric)
	for _, st := range p.NodeUpdate {
		a, err := jobAlloc(st.AllocId)
		if err != nil {
			return nil, nil, err
		}
		if a == nil {
			continue
		}
		stop := &structs.Allocation{
			ID: a.ID, Namespace: a.Namespace, EvalID: ev.ID, Name: a.Name, NodeID: a.NodeID, JobID: a.JobID,
			TaskGroup: a.TaskGroup, DesiredStatus: structs.AllocDesiredStatusStop,
			DesiredDescription: st.DesiredDescription, ClientStatus: st.ClientStatus, FollowupEvalID: st.FollowupEvalId,
			ModifyTime: now,
		}
		plan.NodeUpdate[a.NodeID] = append(plan.NodeUpdate[a.NodeID], stop)
	}
	for _, pa := range p.NodeAllocation {
		var a *structs.Allocation
		if pa.InPlace {
			old, err := jobAlloc(pa.Id)
			if err != nil {
				return nil, nil, err
			}
			if old == nil {
				continue
			}
			a = old.Copy()
			a.Job = nil
			a.EvalID = ev.ID
			if len(pa.TaskResources) > 0 {
				// An in-place update keeps the ports the alloc holds,
				// whatever the plugin sends.
				var shared structs.AllocatedSharedResources
				if old.AllocatedResources != nil {
					shared = old.AllocatedResources.Shared
				}
				a.AllocatedResources = allocatedFromPB(pa)
				a.AllocatedResources.Shared.Networks, a.AllocatedResources.Shared.Ports = shared.Networks, shared.Ports
			}
		} else {
			var tg *structs.TaskGroup
			if job != nil {
				tg = job.LookupTaskGroup(pa.TaskGroup)
			}
			if tg == nil {
				bad.groups = append(bad.groups, pa.TaskGroup)
				continue
			}
			nets, ports, err := placedPorts(tg, pa.Ports)
			if err != nil {
				bad.ports = append(bad.ports, err.Error())
				continue
			}
			if pa.PreviousAllocation != "" {
				// The state store links the previous alloc to this one:
				// it must be the job's.
				prev, err := jobAlloc(pa.PreviousAllocation)
				if err != nil {
					return nil, nil, err
				}
				if prev == nil {
					continue
				}
			}
			a = &structs.Allocation{
				ID: pa.Id, Namespace: ev.Namespace, EvalID: ev.ID, Name: pa.Name, NodeID: pa.NodeId,
				NodeName: pa.NodeName, JobID: ev.JobID, TaskGroup: pa.TaskGroup,
				AllocatedResources: allocatedFromPB(pa), Metrics: shared,
				DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
				PreviousAllocation: pa.PreviousAllocation, PreemptedAllocations: pa.PreemptedAllocations,
				RescheduleTracker: rescheduleTrackerFromPB(pa.RescheduleEvents), CreateTime: now,
			}
			if pa.Metrics != nil {
				a.Metrics = metricFromPB(pa.Metrics)
			}
			a.AllocatedResources.Shared.Networks, a.AllocatedResources.Shared.Ports = nets, ports
			newAllocs[a.ID] = true
		}
		if pa.ClientStatus != "" {
			a.ClientStatus = pa.ClientStatus
		}
		a.ModifyTime = now
		plan.NodeAllocation[a.NodeID] = append(plan.NodeAllocation[a.NodeID], a)
	}
	for _, pr := range p.NodePreemptions {
		victim, err := snap.AllocByID(nil, pr.AllocId)
		if err != nil {
			return nil, nil, fmt.Errorf("read alloc %q: %w", pr.AllocId, err)
		}
		if victim == nil {
			bad.allocs = append(bad.allocs, pr.AllocId)
			continue
		}
		plan.NodePreemptions[pr.NodeId] = append(plan.NodePreemptions[pr.NodeId], &structs.Allocation{
			ID: pr.AllocId, JobID: pr.JobId, Namespace: pr.Namespace, NodeID: pr.NodeId,
			DesiredStatus: structs.AllocDesiredStatusEvict, PreemptedByAllocation: pr.PreemptedByAllocation,
			DesiredDescription: "Preempted by alloc ID " + pr.PreemptedByAllocation, ModifyTime: now,
		})
	}
	if err := bad.err(ev.JobID); err != nil {
		return nil, nil, err
	}
	if err := s.convertPlanDeployment(snap, ev, job, p, plan, newAllocs); err != nil {
		return nil, nil, err
	}
	for k, v := range plan.NodeUpdate {
		if len(v) == 0 {
			delete(plan.NodeUpdate, k)
		}
	}
	if len(p.DesiredTgUpdates) > 0 {
		plan.Annotations = &structs.PlanAnnotations{DesiredTGUpdates: map[string]*structs.DesiredUpdates{}}
		for tg, d := range p.DesiredTgUpdates {
			plan.Annotations.DesiredTGUpdates[tg] = &structs.DesiredUpdates{
				Ignore: d.Ignore, Place: d.Place, Migrate: d.Migrate, Stop: d.Stop, InPlaceUpdate: d.InPlaceUpdate,
				DestructiveUpdate: d.DestructiveUpdate, Canary: d.Canary, Preemptions: d.Preemptions,
				Disconnect: d.Disconnect, Reconnect: d.Reconnect, RescheduleNow: d.RescheduleNow, RescheduleLater: d.RescheduleLater,
			}
		}
	}
	return plan, newAllocs, nil
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

func metricsFromPB(m map[string]*pb.AllocMetric) map[string]*structs.AllocMetric {
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

package conformance_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
	"github.com/drover-org/drover/sdk/scheduler/nodesched"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The two engines the plugins ship, built as plugins/scheduler-system and
// plugins/scheduler-sysbatch build them (sdk may not import plugins/).
func systemSched() scheduler.Scheduler {
	return nodesched.NewPlugin(nodesched.Identity{
		Name: "scheduler-system", Version: "test", JobType: "system", MaxAttempts: 5,
		Declares: &schedulerpb.JobTypeInfo{MaxGroupCount: 1, PreemptionSwitch: "SystemSchedulerEnabled"},
	}, nodesched.Options{PreemptionEnabled: nodesched.SystemPreemption})
}

func sysbatchSched() scheduler.Scheduler {
	return nodesched.NewPlugin(nodesched.Identity{
		Name: "scheduler-sysbatch", Version: "test", JobType: "sysbatch", MaxAttempts: 2,
		Declares: &schedulerpb.JobTypeInfo{RunsToCompletion: true, PreemptionSwitch: "SysBatchSchedulerEnabled"},
	}, nodesched.Options{Sysbatch: true, PreemptionEnabled: nodesched.SysbatchPreemption})
}

// ignoresStop schedules a stopped job as if it ran.
type ignoresStop struct{ scheduler.Scheduler }

func (s ignoresStop) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	if req.GetJob().GetStop() {
		req = proto.Clone(req).(*schedulerpb.ScheduleRequest)
		req.Job.Stop = false
		req.Eval.TriggeredBy = "job-register"
	}
	return s.Scheduler.Schedule(ctx, req)
}

// greedyPreempt also preempts, for the first placement on a node, every
// other allocation the node lists, recorded on both sides.
type greedyPreempt struct{ scheduler.Scheduler }

func (s greedyPreempt) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	resp, err := s.Scheduler.Schedule(ctx, req)
	if err != nil || len(resp.GetPlan().GetNodeAllocation()) == 0 {
		return resp, err
	}
	resp = proto.Clone(resp).(*schedulerpb.ScheduleResponse)
	done := map[string]bool{}
	for _, p := range resp.GetPlan().GetNodeAllocation() {
		if done[p.GetNodeId()] {
			continue
		}
		done[p.GetNodeId()] = true
		for _, n := range req.GetNodes() {
			if n.GetId() != p.GetNodeId() {
				continue
			}
			for _, o := range n.GetOthers() {
				if slices.Contains(p.PreemptedAllocations, o.GetId()) {
					continue
				}
				p.PreemptedAllocations = append(p.PreemptedAllocations, o.GetId())
				resp.Plan.NodePreemptions = append(resp.Plan.NodePreemptions, &schedulerpb.Preemption{
					AllocId: o.GetId(), NodeId: n.GetId(), JobId: o.GetJobId(), Namespace: o.GetNamespace(),
					PreemptedByAllocation: p.GetId(),
				})
			}
		}
	}
	return resp, nil
}

// halfRecorded drops the plan's node_preemptions, leaving them only in
// the placements' preempted_allocations.
type halfRecorded struct{ scheduler.Scheduler }

func (s halfRecorded) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	resp, err := s.Scheduler.Schedule(ctx, req)
	if err != nil || len(resp.GetPlan().GetNodePreemptions()) == 0 {
		return resp, err
	}
	resp = proto.Clone(resp).(*schedulerpb.ScheduleResponse)
	resp.Plan.NodePreemptions = nil
	return resp, nil
}

// ghostGroup adds, to every plan that places something, two placements
// with one ID for a task group the job does not have.
type ghostGroup struct{ scheduler.Scheduler }

func (s ghostGroup) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	resp, err := s.Scheduler.Schedule(ctx, req)
	placed := resp.GetPlan().GetNodeAllocation()
	if err != nil || len(placed) == 0 || req.GetMaxPlacements() != 0 {
		return resp, err
	}
	resp = proto.Clone(resp).(*schedulerpb.ScheduleResponse)
	node := placed[0]
	for i := range 2 {
		resp.Plan.NodeAllocation = append(resp.Plan.NodeAllocation, &schedulerpb.PlacedAlloc{
			Id: "ghost-alloc", Name: fmt.Sprintf("%s.ghost[%d]", req.GetJob().GetId(), i),
			NodeId: node.GetNodeId(), NodeName: node.GetNodeName(), TaskGroup: "ghost",
		})
	}
	return resp, nil
}

// badFollowups adds to every response a follow-up eval whose ID is no
// UUID and a mark of an allocation the job does not have.
type badFollowups struct{ scheduler.Scheduler }

func (s badFollowups) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	resp, err := s.Scheduler.Schedule(ctx, req)
	if err != nil || resp.GetPlan() == nil {
		return resp, err
	}
	resp = proto.Clone(resp).(*schedulerpb.ScheduleResponse)
	resp.FollowupEvals = append(resp.FollowupEvals, &schedulerpb.FollowupEval{Id: "later", WaitUntilNs: 1})
	resp.Plan.AllocFollowups = append(resp.Plan.AllocFollowups, &schedulerpb.AllocFollowup{AllocId: "ghost-alloc", FollowupEvalId: "later"})
	return resp, nil
}

// notPerNode declares its per-node engine count-based.
type notPerNode struct{ scheduler.Scheduler }

func (s notPerNode) Info(ctx context.Context) (*schedulerpb.InfoResponse, error) {
	info, err := s.Scheduler.Info(ctx)
	if err != nil {
		return nil, err
	}
	info = proto.Clone(info).(*schedulerpb.InfoResponse)
	for _, jt := range info.GetJobTypes() {
		jt.PerNode = false
	}
	return info, nil
}

// empty answers every request with an empty plan.
type empty struct{ scheduler.Scheduler }

func (empty) Schedule(context.Context, *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	return &schedulerpb.ScheduleResponse{Plan: &schedulerpb.Plan{}}, nil
}

func rules(fs []conformance.Failure) []string {
	var out []string
	for _, f := range fs {
		if !slices.Contains(out, f.Rule) {
			out = append(out, f.Rule)
		}
	}
	slices.Sort(out)
	return out
}

func TestRealSchedulersConform(t *testing.T) {
	for name, s := range map[string]scheduler.Scheduler{
		"system": systemSched(), "sysbatch": sysbatchSched(), "count-based": countSched{},
	} {
		t.Run(name, func(t *testing.T) {
			for _, f := range conformance.Check(s, conformance.Options{}) {
				t.Error(f)
			}
		})
	}
}

func TestBrokenSchedulersFail(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    scheduler.Scheduler
		want []string // exactly the rules broken
		msg  string   // a substring of some failure
	}{
		{"ignores stop", ignoresStop{systemSched()}, []string{conformance.RuleStop},
			"rule stop: a stopped job keeps 6 allocations running"},
		{"count-based ignores stop", ignoresStop{countSched{}}, []string{conformance.RuleStop},
			"rule stop: a stopped job keeps 4 allocations running"},
		{"ghost group with duplicate IDs", ghostGroup{systemSched()},
			[]string{conformance.RuleAllocID, conformance.RuleKnownGroup}, `for task group "ghost", which the job does not have`},
		{"bad follow-ups", badFollowups{systemSched()}, []string{conformance.RuleFollowups},
			`followup_evals[0] has ID "later"; a follow-up eval's ID is a lowercase UUID`},
		{"per-node engine declared count-based", notPerNode{systemSched()},
			[]string{conformance.RuleAllocName, conformance.RuleGroupRemoved, conformance.RuleNewVersion,
				conformance.RuleNodeDown, conformance.RuleNodeDrain, conformance.RuleRegister},
			`rule register: group "web" has 3 allocations of the current version after the plan, want its count 1`},
		{"always empty", empty{systemSched()},
			[]string{conformance.RuleGroupRemoved, conformance.RuleMaxPlacements, conformance.RuleNewVersion,
				conformance.RuleNoFeasibleNode, conformance.RuleNodeDown, conformance.RuleNodeDrain,
				conformance.RulePreempts, conformance.RulePurge, conformance.RuleRegister, conformance.RuleStop},
			"rule register: group \"web\" has 0 allocations of the current version on feasible node node-1"},
		{"preempts within the priority delta", greedyPreempt{systemSched()}, []string{conformance.RuleOtherJobs},
			`preempts other-near of job "other" at priority 85, less than 10 below the job's 90`},
		{"preemption recorded on one side only", halfRecorded{systemSched()}, []string{conformance.RuleOtherJobs},
			`lists "other-low" in preempted_allocations, but node_preemptions does not record it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := conformance.Check(tc.s, conformance.Options{})
			var all []string
			for _, f := range fs {
				all = append(all, f.String())
			}
			if got := rules(fs); !slices.Equal(got, tc.want) {
				t.Errorf("broken rules = %q, want %q; failures:\n%s", got, tc.want, strings.Join(all, "\n"))
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.msg) {
				t.Errorf("no failure says %q; failures:\n%s", tc.msg, strings.Join(all, "\n"))
			}
		})
	}
}

// samePort gives every new placement static port 8080 only.
type samePort struct{ scheduler.Scheduler }

func (s samePort) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	resp, err := s.Scheduler.Schedule(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, p := range resp.GetPlan().GetNodeAllocation() {
		if len(p.GetPorts()) > 0 && !p.GetInPlace() {
			p.Ports = []*schedulerpb.AllocatedPort{{Label: "http", Value: 8080}, {Label: "admin", Value: 8080}}
		}
	}
	return resp, nil
}

func TestPortsInvariant(t *testing.T) {
	fs := conformance.Check(samePort{systemSched()}, conformance.Options{})
	var all []string
	for _, f := range fs {
		all = append(all, f.String())
	}
	if got := rules(fs); !slices.Equal(got, []string{conformance.RulePorts}) {
		t.Errorf("broken rules = %q, want only %q; failures:\n%s", got, conformance.RulePorts, strings.Join(all, "\n"))
	}
	if want := "holds dynamic port \"admin\" at 8080, outside the node's range 20000-20100"; !strings.Contains(strings.Join(all, "\n"), want) {
		t.Errorf("no failure says %q; failures:\n%s", want, strings.Join(all, "\n"))
	}
}

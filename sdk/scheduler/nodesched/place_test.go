package nodesched

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func others(os ...*schedulerpb.NodeAlloc) func(*schedulerpb.Node) {
	return func(n *schedulerpb.Node) { n.Others = os }
}

func other(id string, prio int32, cpu int64, create uint64) *schedulerpb.NodeAlloc {
	return &schedulerpb.NodeAlloc{Id: id, JobId: "job-" + id, Namespace: "default", JobPriority: prio,
		Resources: &schedulerpb.Resources{Cpu: cpu}, CreateIndex: create}
}

func used(cpu int64) func(*schedulerpb.Node) {
	return func(n *schedulerpb.Node) { n.Used = &schedulerpb.Resources{Cpu: cpu} }
}

// TestPlacementAccounting pins how one plan's own changes to a node are
// seen by later decisions on that node.
func TestPlacementAccounting(t *testing.T) {
	runCases(t, []engineCase{
		{name: "second index on a node sees the first one's resources", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob("sysbatch")
				j.TaskGroups[0].Count = 3 // 3 x 400 MHz on a 1000 MHz node
				return tReq(j, []*schedulerpb.Node{tNode("n1")})
			},
			placed: []string{"n1/j.g[0]", "n1/j.g[1]"}, blocked: []string{"n1"}, failed: []string{"g"},
			queued: map[string]int32{"g": 3}},
		{name: "a stop frees room for a placement on the same node", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob("sysbatch"), []*schedulerpb.Node{tNode("n1", used(900))},
					tAlloc("wrong", "n1", func(a *schedulerpb.Allocation) { a.Name = "j.g[9]"; a.Resources.Cpu = 500 }))
			},
			placed: []string{"n1/j.g[0]"}, stopped: []string{"wrong:" + DescNotNeeded}},
		{name: "in-place update keeps the alloc", engine: systemEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob("system")
				return withVersions(tReq(j, []*schedulerpb.Node{tNode("n1", used(400))}, tAlloc("a1", "n1", at(10))), tOld(j, false))
			},
			placed: []string{"n1/j.g[0] in-place"}},
		{name: "in-place update on a node the job's constraint now excludes is destructive and filtered", engine: systemEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob("system")
				j.Constraints[0].RTarget = "windows"
				return withVersions(tReq(j, []*schedulerpb.Node{tNode("n1")}, tAlloc("a1", "n1", at(10))), tOld(j, false))
			},
			stopped: []string{"a1:" + DescUpdating}, failed: []string{"g"}, queued: map[string]int32{"g": 0}},
		{name: "system replaces a failed alloc with a chained one", engine: systemEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob("system"), []*schedulerpb.Node{tNode("n1")}, tAlloc("a1", "n1", client("failed")))
			},
			placed: []string{"n1/j.g[0]<-a1"}},
		{name: "node outside the job's datacenters: alloc stopped", engine: systemEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob("system"), []*schedulerpb.Node{tNode("n1", func(n *schedulerpb.Node) { n.Datacenter = "dc2" })},
					tAlloc("a1", "n1"))
			},
			stopped: []string{"a1:" + DescNotNeeded}},
		{name: "disconnected node: running alloc becomes unknown", engine: systemEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob("system"), []*schedulerpb.Node{tNode("n1", func(n *schedulerpb.Node) { n.Status = "disconnected" })},
					tAlloc("a1", "n1"))
			},
			placed: []string{"n1/j.g[0] in-place unknown"}},
	})
}

func TestInPlaceNotFitting(t *testing.T) {
	j := tJob("system")
	old := tOld(j, false)
	j.TaskGroups[0].Tasks[0].Resources.Cpu = 400
	// The old alloc recorded 300 MHz; the node has 1000 in use, so only
	// 300 are free for the new version's 400.
	req := withVersions(tReq(j, []*schedulerpb.Node{tNode("n1", used(1000))},
		tAlloc("a1", "n1", at(10), func(a *schedulerpb.Allocation) { a.Resources.Cpu = 300 })), old)
	out := runEngine(t, systemEngine(), req)
	expect(t, "stopped", stopped(out), []string{"a1:" + DescUpdating})
	// The stop frees 300 MHz, which is still not enough: exhausted, blocked.
	expect(t, "placed", placed(out), nil)
	expect(t, "blocked", blockedOn(out), []string{"n1"})
	if d := out.Response.GetPlan().GetDesiredTgUpdates()["g"]; d.GetDestructiveUpdate() != 1 || d.GetInPlaceUpdate() != 0 {
		t.Errorf("desired = %v", d)
	}
}

func TestPreemption(t *testing.T) {
	enabled := New(Options{Sysbatch: true, PreemptionEnabled: func(*schedulerpb.SchedulerConfig) bool { return true }})
	fullNode := func(os ...*schedulerpb.NodeAlloc) []*schedulerpb.Node {
		return []*schedulerpb.Node{tNode("n1", used(1000), others(os...))}
	}
	victims := func(out *Outcome) []string {
		var s []string
		for _, p := range out.Response.GetPlan().GetNodePreemptions() {
			s = append(s, p.GetAllocId())
		}
		return s
	}
	cases := []struct {
		name    string
		engine  *Engine
		config  *schedulerpb.SchedulerConfig
		count   int32
		others  []*schedulerpb.NodeAlloc
		victims []string
	}{
		{"priority exactly 10 lower is a candidate", enabled, nil, 1,
			[]*schedulerpb.NodeAlloc{other("p40", 40, 1000, 1)}, []string{"p40"}},
		{"priority 9 lower is not", enabled, nil, 1,
			[]*schedulerpb.NodeAlloc{other("p41", 41, 1000, 1)}, nil},
		{"lowest priority first, then newest, just enough", enabled, nil, 1,
			[]*schedulerpb.NodeAlloc{other("p30old", 30, 300, 1), other("p30new", 30, 300, 9), other("p10", 10, 300, 5)},
			[]string{"p10", "p30new"}},
		{"a large victim alone spares the small ones picked before it", enabled, nil, 1,
			[]*schedulerpb.NodeAlloc{other("p10", 10, 100, 5), other("p20", 20, 900, 5)},
			[]string{"p20"}},
		{"two placements on one node never evict the same alloc twice", enabled, nil, 2,
			[]*schedulerpb.NodeAlloc{other("a", 10, 400, 1), other("b", 10, 400, 2)},
			[]string{"b", "a"}},
		{"not enough to evict: nothing evicted", enabled, nil, 1,
			[]*schedulerpb.NodeAlloc{other("small", 10, 100, 1)}, nil},
		{"sysbatch default: off", sysbatchEngine(), nil, 1,
			[]*schedulerpb.NodeAlloc{other("p10", 10, 1000, 1)}, nil},
		{"sysbatch config on", sysbatchEngine(), &schedulerpb.SchedulerConfig{PreemptionSysbatch: true}, 1,
			[]*schedulerpb.NodeAlloc{other("p10", 10, 1000, 1)}, []string{"p10"}},
		{"system default: on", systemEngine(), nil, 1,
			[]*schedulerpb.NodeAlloc{other("p10", 10, 1000, 1)}, []string{"p10"}},
		{"system config off", systemEngine(), &schedulerpb.SchedulerConfig{PreemptionSysbatch: true}, 1,
			[]*schedulerpb.NodeAlloc{other("p10", 10, 1000, 1)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := tJob("sysbatch")
			j.TaskGroups[0].Count = c.count
			req := tReq(j, fullNode(c.others...))
			req.Config = c.config
			out := runEngine(t, c.engine, req)
			expect(t, "victims", victims(out), c.victims)
			if len(c.victims) > 0 {
				if len(placed(out)) != int(c.count) || len(out.Response.GetBlockedEvals()) != 0 {
					t.Errorf("placed %v, blocked %v", placed(out), blockedOn(out))
				}
				by := out.Response.GetPlan().GetNodePreemptions()[0].GetPreemptedByAllocation()
				if by != out.Response.GetPlan().GetNodeAllocation()[0].GetId() {
					t.Errorf("preempted_by_allocation %q does not name the placement", by)
				}
			} else if len(blockedOn(out)) != 1 {
				t.Errorf("want a blocked eval, got %v", blockedOn(out))
			}
		})
	}
}

func TestClassEligibilityAndEscape(t *testing.T) {
	j := tJob("sysbatch")
	req := tReq(j, []*schedulerpb.Node{
		tNode("n1", used(1000)),
		tNode("n2", func(n *schedulerpb.Node) { n.ComputedClass = "c2"; n.Attributes["kernel.name"] = "darwin" }),
	})
	out := runEngine(t, sysbatchEngine(), req)
	b := out.Response.GetBlockedEvals()
	if len(b) != 1 || !b[0].GetClassEligibility()["c1"] || b[0].GetClassEligibility()["c2"] || b[0].GetEscapedComputedClass() {
		t.Fatalf("blocked = %v", b)
	}
	j.Constraints = append(j.Constraints, &schedulerpb.Constraint{LTarget: "${node.unique.name}", Operand: "!=", RTarget: "x"})
	out = runEngine(t, sysbatchEngine(), tReq(j, []*schedulerpb.Node{tNode("n1", used(1000))}))
	if b := out.Response.GetBlockedEvals(); len(b) != 1 || !b[0].GetEscapedComputedClass() {
		t.Fatalf("blocked = %v, want escaped", b)
	}
}

// The request belongs to the caller: scheduling must not modify it.
func TestRequestUntouched(t *testing.T) {
	j := tJob("system")
	req := withVersions(tReq(j, []*schedulerpb.Node{tNode("n1"), tNode("n2", used(1000)), tNode("n3")},
		tAlloc("a1", "n1", at(10)), tAlloc("a3", "n3", client("failed"))), tOld(j, true))
	before := proto.CloneOf(req)
	resp1 := runEngine(t, systemEngine(), req).Response
	if !proto.Equal(req, before) {
		t.Fatal("request modified")
	}
	if resp2 := runEngine(t, systemEngine(), req).Response; !proto.Equal(resp1, resp2) {
		t.Fatal("same request, different responses")
	}
}

// TestMaxPlacements: the core's per-eval limit stops placing, and what is
// left stays queued for the core's follow-up eval rather than failing.
func TestMaxPlacements(t *testing.T) {
	nodes := func() []*schedulerpb.Node {
		return []*schedulerpb.Node{tNode("n1"), tNode("n2"), tNode("n3")}
	}
	limited := func(max int32) func() *schedulerpb.ScheduleRequest {
		return func() *schedulerpb.ScheduleRequest {
			r := tReq(tJob("sysbatch"), nodes())
			r.MaxPlacements = max
			return r
		}
	}
	runCases(t, []engineCase{
		{name: "two of three placed, the third queued", engine: sysbatchEngine(), req: limited(2),
			placed: []string{"n1/j.g[0]", "n2/j.g[0]"}, queued: map[string]int32{"g": 3}},
		{name: "zero means no limit", engine: sysbatchEngine(), req: limited(0),
			placed: []string{"n1/j.g[0]", "n2/j.g[0]", "n3/j.g[0]"}, queued: map[string]int32{"g": 3}},
		{name: "negative places nothing", engine: sysbatchEngine(), req: limited(-1),
			queued: map[string]int32{"g": 3}},
	})
}

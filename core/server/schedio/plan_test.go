package schedio

import (
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// planFixture is a snapshot with one job ("web", one group with a static
// and a dynamic port) running one alloc on a node, and another job's alloc
// on the same node.
type planFixture struct {
	f              *fixture
	job, otherJob  *structs.Job
	node           *structs.Node
	running, other *structs.Allocation
	ev             *structs.Evaluation
}

func newPlanFixture(t *testing.T) *planFixture {
	f := newFixture(t)
	p := &planFixture{f: f, node: testNode("a")}
	p.job = testJob("web", "service")
	p.job.Namespace = structs.DefaultNamespace
	p.job.TaskGroups[0].Networks = []*structs.NetworkResource{{Mode: "host",
		ReservedPorts: []structs.Port{{Label: "http", Value: 8080}}, DynamicPorts: []structs.Port{{Label: "admin", To: 9000}}}}
	p.otherJob = testJob("other", "batch")
	p.otherJob.Namespace = structs.DefaultNamespace
	f.nodes(p.node)
	f.jobs(p.job, p.otherJob)
	alloc := func(id string, job *structs.Job) *structs.Allocation {
		return &structs.Allocation{ID: id, Namespace: job.Namespace, JobID: job.ID, Job: job, NodeID: p.node.ID,
			TaskGroup: "g", Name: job.ID + ".g[0]", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning,
			AllocatedResources: &structs.AllocatedResources{
				Tasks:  map[string]*structs.AllocatedTaskResources{"t": {Cpu: structs.AllocatedCpuResources{CpuShares: 100}}},
				Shared: structs.AllocatedSharedResources{Ports: []structs.AllocatedPortMapping{{Label: "http", Value: 8080, HostIP: "10.0.0.1"}}},
			}}
	}
	p.running = alloc("00000000-0000-0000-0000-00000000000a", p.job)
	p.other = alloc("00000000-0000-0000-0000-00000000000b", p.otherJob)
	f.allocs(p.running, p.other)
	p.ev = &structs.Evaluation{ID: "00000000-0000-0000-0000-0000000000e1", Namespace: p.job.Namespace, JobID: p.job.ID, Type: p.job.Type, Priority: 70}
	return p
}

// TestConvertPlan: each step of the conversion, one table row per kind of
// plan entry: what the core's plan holds for a valid entry, and the
// ErrInvalid naming a bad one (the whole plan is refused).
func TestConvertPlan(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	ports := []*pb.AllocatedPort{{Label: "http", Value: 8080, HostIp: "10.0.0.2"}, {Label: "admin", Value: 25000, HostIp: "10.0.0.2"}}
	const newID = "00000000-0000-0000-0000-0000000000c1"
	cases := []struct {
		name  string
		plan  func(p *planFixture) *pb.Plan
		check func(t *testing.T, p *planFixture, plan *structs.Plan, newAllocs map[string]bool)
		want  string // substring of the ErrInvalid; "" = accepted
	}{
		{"no plan", func(*planFixture) *pb.Plan { return nil }, func(t *testing.T, p *planFixture, plan *structs.Plan, newAllocs map[string]bool) {
			if !plan.IsNoOp() || len(newAllocs) != 0 || plan.EvalID != p.ev.ID || plan.EvalToken != "tok" || plan.Priority != 70 || plan.Job != p.job {
				t.Errorf("plan = %+v", plan)
			}
		}, ""},
		{"stop", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodeUpdate: []*pb.AllocStop{{AllocId: p.running.ID, DesiredDescription: "alloc not needed",
				ClientStatus: structs.AllocClientStatusLost, FollowupEvalId: "fe"}}}
		}, func(t *testing.T, p *planFixture, plan *structs.Plan, _ map[string]bool) {
			stops := plan.NodeUpdate[p.node.ID]
			want := structs.Allocation{ID: p.running.ID, Namespace: p.job.Namespace, EvalID: p.ev.ID, Name: p.running.Name,
				NodeID: p.node.ID, JobID: p.job.ID, TaskGroup: "g", DesiredStatus: structs.AllocDesiredStatusStop,
				DesiredDescription: "alloc not needed", ClientStatus: structs.AllocClientStatusLost, FollowupEvalID: "fe", ModifyTime: now.UnixNano()}
			if len(stops) != 1 || stops[0].ID != want.ID || stops[0].DesiredStatus != want.DesiredStatus || stops[0].DesiredDescription != want.DesiredDescription ||
				stops[0].ClientStatus != want.ClientStatus || stops[0].FollowupEvalID != want.FollowupEvalID || stops[0].ModifyTime != want.ModifyTime ||
				stops[0].EvalID != want.EvalID || stops[0].Job != nil || stops[0].AllocatedResources != nil {
				t.Errorf("stops = %+v, want %+v", stops, want)
			}
		}, ""},
		{"in-place update keeps the alloc's ports", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodeAllocation: []*pb.PlacedAlloc{{Id: p.running.ID, NodeId: p.node.ID, TaskGroup: "g", InPlace: true,
				TaskResources: map[string]*pb.Resources{"t": {Cpu: 300, MemoryMb: 128}}, Ports: ports}}}
		}, func(t *testing.T, p *planFixture, plan *structs.Plan, newAllocs map[string]bool) {
			a := plan.NodeAllocation[p.node.ID]
			if len(a) != 1 || newAllocs[p.running.ID] || a[0].Job != nil || a[0].EvalID != p.ev.ID || a[0].ModifyTime != now.UnixNano() {
				t.Fatalf("update = %+v, new %v", a, newAllocs)
			}
			r := a[0].AllocatedResources
			if r.Tasks["t"].Cpu.CpuShares != 300 || r.Tasks["t"].Memory.MemoryMB != 128 || len(r.Shared.Ports) != 1 || r.Shared.Ports[0].HostIP != "10.0.0.1" {
				t.Errorf("resources = %+v", r)
			}
			if p.running.AllocatedResources.Tasks["t"].Cpu.CpuShares != 100 {
				t.Errorf("the stored alloc was modified")
			}
		}, ""},
		{"new alloc", func(p *planFixture) *pb.Plan {
			return &pb.Plan{
				PlacementMetric: &pb.AllocMetric{NodesEvaluated: 3},
				NodeAllocation: []*pb.PlacedAlloc{{Id: newID, Name: "web.g[1]", NodeId: p.node.ID, NodeName: "a", TaskGroup: "g",
					TaskResources: map[string]*pb.Resources{"t": {Cpu: 100}}, SharedDiskMb: 10, Ports: ports,
					PreviousAllocation: p.running.ID, ClientStatus: structs.AllocClientStatusPending}},
			}
		}, func(t *testing.T, p *planFixture, plan *structs.Plan, newAllocs map[string]bool) {
			a := plan.NodeAllocation[p.node.ID]
			if len(a) != 1 || !newAllocs[newID] {
				t.Fatalf("placements = %+v, new %v", a, newAllocs)
			}
			n := a[0]
			if n.Namespace != p.job.Namespace || n.JobID != p.job.ID || n.DesiredStatus != structs.AllocDesiredStatusRun ||
				n.PreviousAllocation != p.running.ID || n.CreateTime != now.UnixNano() || n.Metrics.NodesEvaluated != 3 ||
				n.AllocatedResources.Shared.DiskMB != 10 {
				t.Errorf("new alloc = %+v", n)
			}
			sh := n.AllocatedResources.Shared
			if len(sh.Ports) != 2 || sh.Ports[1] != (structs.AllocatedPortMapping{Label: "admin", Value: 25000, To: 9000, HostIP: "10.0.0.2"}) ||
				len(sh.Networks) != 1 || sh.Networks[0].Mode != "host" {
				t.Errorf("ports = %+v, networks %+v", sh.Ports, sh.Networks)
			}
		}, ""},
		{"preemption of another job's alloc", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodePreemptions: []*pb.Preemption{{AllocId: p.other.ID, JobId: "other", Namespace: p.other.Namespace,
				NodeId: p.node.ID, PreemptedByAllocation: newID}}}
		}, func(t *testing.T, p *planFixture, plan *structs.Plan, _ map[string]bool) {
			v := plan.NodePreemptions[p.node.ID]
			if len(v) != 1 || v[0].DesiredStatus != structs.AllocDesiredStatusEvict || v[0].PreemptedByAllocation != newID ||
				v[0].DesiredDescription != "Preempted by alloc ID "+newID || v[0].ModifyTime != now.UnixNano() {
				t.Errorf("preemptions = %+v", v)
			}
		}, ""},
		{"annotations", func(*planFixture) *pb.Plan {
			return &pb.Plan{DesiredTgUpdates: map[string]*pb.DesiredUpdates{"g": {Place: 2, Stop: 1, RescheduleLater: 3}}}
		}, func(t *testing.T, _ *planFixture, plan *structs.Plan, _ map[string]bool) {
			if plan.Annotations == nil {
				t.Fatal("no annotations")
			}
			d := plan.Annotations.DesiredTGUpdates["g"]
			if d == nil || d.Place != 2 || d.Stop != 1 || d.RescheduleLater != 3 {
				t.Errorf("annotations = %+v", plan.Annotations)
			}
		}, ""},
		{"stop of another job's alloc", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodeUpdate: []*pb.AllocStop{{AllocId: p.other.ID}}}
		}, nil, "allocations that are not the job's: \"" + "00000000-0000-0000-0000-00000000000b"},
		{"update of an unknown alloc", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodeAllocation: []*pb.PlacedAlloc{{Id: "nope", InPlace: true}}}
		}, nil, `allocations that are not the job's: "nope"`},
		{"unknown group", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodeAllocation: []*pb.PlacedAlloc{{Id: newID, NodeId: p.node.ID, TaskGroup: "db"}}}
		}, nil, `task groups the job does not have: "db"`},
		{"ports not asked for", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodeAllocation: []*pb.PlacedAlloc{{Id: newID, NodeId: p.node.ID, TaskGroup: "g", Ports: ports[:1]}}}
		}, nil, "ports the groups do not ask for"},
		{"previous alloc of another job", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodeAllocation: []*pb.PlacedAlloc{{Id: newID, NodeId: p.node.ID, TaskGroup: "g", Ports: ports, PreviousAllocation: p.other.ID}}}
		}, nil, "allocations that are not the job's"},
		{"unknown preemption victim", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodePreemptions: []*pb.Preemption{{AllocId: "gone", NodeId: p.node.ID}}}
		}, nil, `allocations that are not the job's: "gone"`},
		{"every problem named at once", func(p *planFixture) *pb.Plan {
			return &pb.Plan{NodeUpdate: []*pb.AllocStop{{AllocId: "x"}},
				NodeAllocation: []*pb.PlacedAlloc{{Id: newID, TaskGroup: "db"}}}
		}, nil, `allocations that are not the job's: "x"; task groups the job does not have: "db"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanFixture(t)
			snap := p.f.snapshot()
			plan, newAllocs, err := ConvertPlan(snap, p.ev, "tok", p.job, tc.plan(p), now)
			if tc.want != "" {
				if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if plan.SnapshotIndex != snap.LatestIndex() {
				t.Errorf("snapshot index = %d, want %d", plan.SnapshotIndex, snap.LatestIndex())
			}
			tc.check(t, p, plan, newAllocs)
		})
	}
}

// TestListSome: a plan naming thousands of bad entries still gives a
// readable error.
func TestListSome(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"b", "a", "b"}, `"a", "b"`},
		{[]string{"1", "2", "3", "4", "5", "6", "7"}, `"1", "2", "3", "4", "5" and 2 more`},
	}
	for _, tc := range cases {
		if got := listSome(tc.in); got != tc.want {
			t.Errorf("listSome(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestPlacedPorts: the ports a plugin hands out become the alloc's
// networks and mappings, and ports the group did not ask for are refused.
func TestPlacedPorts(t *testing.T) {
	tg := &structs.TaskGroup{Name: "g", Networks: []*structs.NetworkResource{{Mode: "host",
		ReservedPorts: []structs.Port{{Label: "http", Value: 8080, To: 80}}, DynamicPorts: []structs.Port{{Label: "dyn"}}}}}
	ok := []*pb.AllocatedPort{{Label: "http", Value: 8080, HostIp: "10.0.0.1"}, {Label: "dyn", Value: 23456, HostIp: "10.0.0.1"}}
	nets, maps, err := placedPorts(tg, ok)
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) != 1 || nets[0].IP != "10.0.0.1" || nets[0].ReservedPorts[0].To != 80 || nets[0].DynamicPorts[0].Value != 23456 {
		t.Errorf("networks = %+v", nets[0])
	}
	if len(maps) != 2 || maps[0] != (structs.AllocatedPortMapping{Label: "http", Value: 8080, To: 80, HostIP: "10.0.0.1"}) {
		t.Errorf("mappings = %+v", maps)
	}
	bad := []struct {
		name  string
		ports []*pb.AllocatedPort
		want  string
	}{
		{"missing", ok[:1], "asks for 2 ports, the plan gives 1"},
		{"unknown label", []*pb.AllocatedPort{ok[0], {Label: "x", Value: 1}}, `port "x" is not asked for`},
		{"given twice", []*pb.AllocatedPort{ok[0], ok[0]}, `port "http" is not asked for, or given twice`},
		{"out of range", []*pb.AllocatedPort{ok[0], {Label: "dyn", Value: 70000}}, "value 70000 is outside 1-65535"},
		{"static moved", []*pb.AllocatedPort{{Label: "http", Value: 81}, ok[1]}, `static port "http" is 8080, the plan gives 81`},
	}
	for _, tc := range bad {
		if _, _, err := placedPorts(tg, tc.ports); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

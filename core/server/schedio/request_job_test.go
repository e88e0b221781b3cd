package schedio

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// Affinities, spreads and migrate.max_parallel reach the scheduler at every
// level they are written at, and stay unset for a job without them, so the
// requests of such jobs do not change.
func TestJobToPBPlacementBlocks(t *testing.T) {
	cases := []struct {
		name string
		edit func(*structs.Job)
		want func(*pb.Job)
	}{
		{"none", func(*structs.Job) {}, func(*pb.Job) {}},
		{"job level", func(j *structs.Job) {
			j.Affinities = []*structs.Affinity{{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Weight: -50}}
			j.Spreads = []*structs.Spread{{Attribute: "${node.datacenter}", Weight: 70, SpreadTarget: []*structs.SpreadTarget{{Value: "dc1", Percent: 70}, {Value: "dc2", Percent: 30}}}}
		}, func(p *pb.Job) {
			p.Affinities = []*pb.Affinity{{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Weight: -50}}
			p.Spreads = []*pb.Spread{{Attribute: "${node.datacenter}", Weight: 70, Targets: []*pb.SpreadTarget{{Value: "dc1", Percent: 70}, {Value: "dc2", Percent: 30}}}}
		}},
		{"group and task level", func(j *structs.Job) {
			tg := j.TaskGroups[0]
			tg.Affinities = []*structs.Affinity{{LTarget: "${meta.rack}", Operand: "set_contains", RTarget: "r1,r2", Weight: 100}}
			tg.Spreads = []*structs.Spread{{Attribute: "${meta.rack}", Weight: 50}}
			tg.Migrate = &structs.MigrateStrategy{MaxParallel: 2}
			tg.Tasks[0].Affinities = []*structs.Affinity{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux", Weight: 10}}
		}, func(p *pb.Job) {
			g := p.TaskGroups[0]
			g.Affinities = []*pb.Affinity{{LTarget: "${meta.rack}", Operand: "set_contains", RTarget: "r1,r2", Weight: 100}}
			g.Spreads = []*pb.Spread{{Attribute: "${meta.rack}", Weight: 50}}
			g.MigrateMaxParallel = 2
			g.Migrate = &pb.MigrateStrategy{MaxParallel: 2}
			g.Tasks[0].Affinities = []*pb.Affinity{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux", Weight: 10}}
		}},
		{"migrate block without max_parallel", func(j *structs.Job) {
			j.TaskGroups[0].Migrate = &structs.MigrateStrategy{}
		}, func(p *pb.Job) { p.TaskGroups[0].Migrate = &pb.MigrateStrategy{} }},
	}
	base := func() *structs.Job {
		return &structs.Job{ID: "web", Name: "web", Namespace: "default", Type: "service", TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}},
		}}}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := base()
			c.edit(j)
			want := jobToPB(base())
			c.want(want)
			if got := jobToPB(j); !proto.Equal(got, want) {
				t.Errorf("jobToPB =\n%v\nwant\n%v", got, want)
			}
		})
	}
}

// TestRescheduleInputToPB: the request carries the group's policy and
// each alloc's tracker, links and change time (the latest task finish when
// there is one).
func TestRescheduleInputToPB(t *testing.T) {
	job := testJob("in", "batch")
	job.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{
		Attempts: 2, Interval: time.Hour, Delay: time.Second, DelayFunction: "fibonacci", MaxDelay: time.Minute, Unlimited: true,
	}
	gp := jobToPB(job).TaskGroups[0].ReschedulePolicy
	wantP := &pb.ReschedulePolicy{Attempts: 2, IntervalNs: int64(time.Hour), DelayNs: int64(time.Second), DelayFunction: "fibonacci", MaxDelayNs: int64(time.Minute), Unlimited: true}
	if gp.String() != wantP.String() {
		t.Fatalf("policy = %v, want %v", gp, wantP)
	}
	job.TaskGroups[0].ReschedulePolicy = nil
	if jobToPB(job).TaskGroups[0].ReschedulePolicy != nil {
		t.Fatal("a group without a policy must send none")
	}
	finished := time.Unix(0, 700)
	cases := []struct {
		name  string
		alloc *structs.Allocation
		want  int64
	}{
		{"no task states: modify time", &structs.Allocation{ModifyTime: 900}, 900},
		{"latest task finish", &structs.Allocation{ModifyTime: 900, TaskStates: map[string]*structs.TaskState{
			"a": {FinishedAt: time.Unix(0, 500)}, "b": {FinishedAt: finished}, "c": {}}}, 700},
		{"no task finished: modify time", &structs.Allocation{ModifyTime: 900, TaskStates: map[string]*structs.TaskState{"a": {}}}, 900},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := allocToPB(tc.alloc).ModifyTimeNs; got != tc.want {
				t.Fatalf("modify_time_ns = %d, want %d", got, tc.want)
			}
		})
	}
	a := &structs.Allocation{ID: "a", FollowupEvalID: "f", NextAllocation: "n", RescheduleTracker: &structs.RescheduleTracker{
		Events: []*structs.RescheduleEvent{{RescheduleTime: 1, PrevAllocID: "p", PrevNodeID: "pn", Delay: 3}},
	}}
	p := allocToPB(a)
	if p.FollowupEvalId != "f" || p.NextAllocation != "n" || len(p.RescheduleEvents) != 1 ||
		p.RescheduleEvents[0].String() != (&pb.RescheduleEvent{RescheduleTimeNs: 1, PrevAllocId: "p", PrevNodeId: "pn", DelayNs: 3}).String() {
		t.Fatalf("alloc = %v", p)
	}
}

// TestAllocPortsToPB: a live alloc's ports are held; a finished one's are
// free again.
func TestAllocPortsToPB(t *testing.T) {
	held := func(client string) *structs.Allocation {
		return &structs.Allocation{DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: client,
			AllocatedResources: &structs.AllocatedResources{Shared: structs.AllocatedSharedResources{
				Ports: []structs.AllocatedPortMapping{{Label: "http", Value: 8080, To: 80, HostIP: "10.0.0.1"}}}}}
	}
	cases := []struct {
		name  string
		alloc *structs.Allocation
		want  int
	}{
		{"running", held(structs.AllocClientStatusRunning), 1},
		{"pending", held(structs.AllocClientStatusPending), 1},
		{"complete", held(structs.AllocClientStatusComplete), 0},
		{"no resources", &structs.Allocation{ClientStatus: structs.AllocClientStatusRunning}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := allocPortsToPB(tc.alloc)
			if len(got) != tc.want {
				t.Fatalf("ports = %v, want %d", got, tc.want)
			}
			if tc.want == 1 && got[0].String() != (&pb.AllocatedPort{Label: "http", Value: 8080, To: 80, HostIp: "10.0.0.1"}).String() {
				t.Errorf("port = %v", got[0])
			}
		})
	}
}

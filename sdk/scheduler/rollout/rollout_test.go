package rollout

import (
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

const (
	oldIndex = 5  // job_modify_index of the previous version
	newIndex = 10 // job_modify_index of the current version
)

func job(count, maxParallel, canary int32) *pb.Job {
	tg := &pb.TaskGroup{Name: "web", Count: count}
	if maxParallel >= 0 {
		tg.Update = &pb.UpdateStrategy{MaxParallel: maxParallel, Canary: canary}
	}
	return &pb.Job{Id: "web", Version: 2, JobModifyIndex: newIndex, TaskGroups: []*pb.TaskGroup{tg}}
}

func dep(status string, st *pb.DeploymentGroupState) *pb.Deployment {
	return &pb.Deployment{Id: "d2", JobVersion: 2, JobModifyIndex: newIndex, Status: status,
		TaskGroups: map[string]*pb.DeploymentGroupState{"web": st}}
}

// alloc: version is oldIndex or newIndex; deployment "" or an ID.
func alloc(id string, version uint64, client string, deployment string, canary bool, h pb.AllocHealth) *pb.Allocation {
	return &pb.Allocation{Id: id, Name: "web.web[0]", TaskGroup: "web", JobModifyIndex: version, DesiredStatus: "run",
		ClientStatus: client, DeploymentId: deployment, Canary: canary, Healthy: h}
}

var (
	unset     = pb.AllocHealth_ALLOC_HEALTH_UNSET
	healthy   = pb.AllocHealth_ALLOC_HEALTH_HEALTHY
	unhealthy = pb.AllocHealth_ALLOC_HEALTH_UNHEALTHY
)

// marked sets the deployment watcher's mark (reschedule) on a.
func marked(a *pb.Allocation) *pb.Allocation { a.Reschedule = true; return a }

// replaced links a to a replacement.
func replaced(a *pb.Allocation) *pb.Allocation { a.NextAllocation = "next"; return a }

func old(n int) []*pb.Allocation {
	var out []*pb.Allocation
	for i := range n {
		out = append(out, alloc("old"+string(rune('0'+i)), oldIndex, "running", "", false, unset))
	}
	return out
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		g    Group
		want Answer
	}{
		{
			name: "no update block: not managed",
			g:    Group{Job: job(3, -1, 0), Allocs: old(3), Destructive: 3},
			want: Answer{},
		},
		{
			name: "max_parallel 0 (all at once): not managed",
			g:    Group{Job: job(3, 0, 0), Allocs: old(3), Destructive: 3},
			want: Answer{},
		},
		{
			name: "destructive change, canaries: create with desired canaries, place them, replace nothing",
			g:    Group{Job: job(3, 1, 1), Allocs: old(3), Destructive: 3},
			want: Answer{Managed: true, Create: &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1}, Canaries: 1},
		},
		{
			name: "canary larger than count is bounded by the count",
			g:    Group{Job: job(2, 1, 5), Allocs: old(2), Destructive: 2},
			want: Answer{Managed: true, Create: &pb.DeploymentGroupState{DesiredTotal: 2, DesiredCanaries: 2}, Canaries: 2},
		},
		{
			name: "destructive change, no canaries: create and replace max_parallel",
			g:    Group{Job: job(3, 2, 0), Allocs: old(3), Destructive: 3},
			want: Answer{Managed: true, Create: &pb.DeploymentGroupState{DesiredTotal: 3}, Promoted: true, Limit: 2},
		},
		{
			name: "new job: create without canaries",
			g:    Group{Job: job(3, 1, 1)},
			want: Answer{Managed: true, Create: &pb.DeploymentGroupState{DesiredTotal: 3}, Promoted: true, Limit: 1},
		},
		{
			name: "in-place update: no deployment",
			g:    Group{Job: job(3, 1, 1), Allocs: old(3)},
			want: Answer{Managed: true, Promoted: true, Limit: 1},
		},
		{
			name: "all finished at an older version, placed again: new deployment",
			g:    Group{Job: job(1, 1, 0), Allocs: []*pb.Allocation{alloc("a", oldIndex, "failed", "", false, unset)}},
			want: Answer{Managed: true, Create: &pb.DeploymentGroupState{DesiredTotal: 1}, Promoted: true, Limit: 1},
		},
		{
			name: "finished at this version: no second deployment",
			g:    Group{Job: job(1, 1, 0), Allocs: []*pb.Allocation{alloc("a", newIndex, "failed", "", false, unset)}},
			want: Answer{Managed: true, Promoted: true, Limit: 1},
		},
		{
			name: "deployment of an older version: a new one is proposed",
			g: Group{Job: job(3, 1, 0), Allocs: old(3), Destructive: 3,
				Deployment: &pb.Deployment{Id: "d1", JobVersion: 1, JobModifyIndex: oldIndex, Status: StatusSuccessful}},
			want: Answer{Managed: true, Create: &pb.DeploymentGroupState{DesiredTotal: 3}, Promoted: true, Limit: 1},
		},
		{
			name: "canary placed, not promoted: nothing else moves",
			g: Group{Job: job(3, 1, 1), Destructive: 3,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1, PlacedCanaries: []string{"c"}}),
				Allocs:     append(old(3), alloc("c", newIndex, "running", "d2", true, healthy))},
			want: Answer{Managed: true, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1, PlacedCanaries: []string{"c"}})},
		},
		{
			name: "one of two canaries placed: one more",
			g: Group{Job: job(3, 1, 2), Destructive: 3,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 2}),
				Allocs:     append(old(3), alloc("c", newIndex, "pending", "d2", true, unset))},
			want: Answer{Managed: true, Canaries: 1, InFlight: 1, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 2})},
		},
		{
			name: "promoted, canary healthy: replace max_parallel",
			g: Group{Job: job(3, 1, 1), Destructive: 3,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1, Promoted: true, PlacedCanaries: []string{"c"}}),
				Allocs:     append(old(3), alloc("c", newIndex, "running", "d2", false, healthy))},
			want: Answer{Managed: true, Promoted: true, Limit: 1, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1, Promoted: true, PlacedCanaries: []string{"c"}})},
		},
		{
			name: "two placed, not healthy yet (running): nothing more starts",
			g: Group{Job: job(4, 2, 0), Destructive: 2,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4}),
				Allocs: append(old(2), alloc("n0", newIndex, "running", "d2", false, unset),
					alloc("n1", newIndex, "pending", "d2", false, unset))},
			want: Answer{Managed: true, Promoted: true, InFlight: 2, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4})},
		},
		{
			name: "one of two healthy: one more starts",
			g: Group{Job: job(4, 2, 0), Destructive: 2,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4}),
				Allocs: append(old(2), alloc("n0", newIndex, "running", "d2", false, healthy),
					alloc("n1", newIndex, "running", "d2", false, unset))},
			want: Answer{Managed: true, Promoted: true, Limit: 1, InFlight: 1, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4})},
		},
		{
			name: "both healthy: the next two; finished and old-version allocs are not in flight",
			g: Group{Job: job(4, 2, 0), Destructive: 2,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4}),
				Allocs: append(old(2), alloc("n0", newIndex, "running", "d2", false, healthy),
					alloc("n1", newIndex, "running", "d2", false, healthy),
					alloc("gone", newIndex, "complete", "d2", false, unset),
					alloc("other", oldIndex, "running", "d1", false, unset))},
			want: Answer{Managed: true, Promoted: true, Limit: 2, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4})},
		},
		{
			name: "unhealthy counts as not healthy",
			g: Group{Job: job(4, 1, 0), Destructive: 2,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4}),
				Allocs:     append(old(2), alloc("n0", newIndex, "running", "d2", false, unhealthy))},
			want: Answer{Managed: true, Promoted: true, InFlight: 1, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4})},
		},
		{
			name: "a live unhealthy alloc of the deployment: nothing more starts, whatever max_parallel",
			g: Group{Job: job(4, 3, 0), Destructive: 2,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4}),
				Allocs:     append(old(2), alloc("n0", newIndex, "running", "d2", false, unhealthy))},
			want: Answer{Managed: true, Promoted: true, InFlight: 1, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4})},
		},
		{
			name: "a failed unhealthy alloc not marked for replacement: nothing more starts",
			g: Group{Job: job(4, 2, 0), Destructive: 2,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4}),
				Allocs:     append(old(2), alloc("n0", newIndex, "failed", "d2", false, unhealthy))},
			want: Answer{Managed: true, Promoted: true, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4})},
		},
		{
			name: "a failed unhealthy alloc marked for replacement, or replaced: the rollout goes on",
			g: Group{Job: job(4, 2, 0), Destructive: 2,
				Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4}),
				Allocs: append(old(2), marked(alloc("n0", newIndex, "failed", "d2", false, unhealthy)),
					replaced(alloc("n1", newIndex, "failed", "d2", false, unhealthy)))},
			want: Answer{Managed: true, Promoted: true, Limit: 2, Deployment: dep(StatusRunning, &pb.DeploymentGroupState{DesiredTotal: 4})},
		},
		{
			name: "failed deployment: the rollout stops, no new deployment",
			g: Group{Job: job(3, 1, 0), Destructive: 2,
				Deployment: dep(StatusFailed, &pb.DeploymentGroupState{DesiredTotal: 3}),
				Allocs:     append(old(2), alloc("n0", newIndex, "running", "d2", false, healthy))},
			want: Answer{Managed: true, Halted: true, Promoted: true, Deployment: dep(StatusFailed, &pb.DeploymentGroupState{DesiredTotal: 3})},
		},
		{
			name: "failed after promotion: halted, the canaries still promoted",
			g: Group{Job: job(3, 1, 1), Destructive: 1,
				Deployment: dep(StatusFailed, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1, Promoted: true}),
				Allocs:     append(old(1), alloc("c", newIndex, "running", "d2", false, healthy))},
			want: Answer{Managed: true, Halted: true, Promoted: true,
				Deployment: dep(StatusFailed, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1, Promoted: true})},
		},
		{
			name: "paused deployment: nothing moves",
			g: Group{Job: job(3, 1, 1), Destructive: 3, Allocs: old(3),
				Deployment: dep(StatusPaused, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1})},
			want: Answer{Managed: true, Halted: true, Deployment: dep(StatusPaused, &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1})},
		},
		{
			name: "cancelled deployment of this version: nothing moves",
			g: Group{Job: job(3, 1, 0), Destructive: 3, Allocs: old(3),
				Deployment: dep(StatusCancelled, &pb.DeploymentGroupState{DesiredTotal: 3})},
			want: Answer{Managed: true, Halted: true, Promoted: true, Deployment: dep(StatusCancelled, &pb.DeploymentGroupState{DesiredTotal: 3})},
		},
		{
			name: "deployment of this version without the group: paced by max_parallel alone",
			g: Group{Job: job(3, 2, 0), Destructive: 3, Allocs: old(3),
				Deployment: &pb.Deployment{Id: "d2", JobVersion: 2, JobModifyIndex: newIndex, Status: StatusRunning}},
			want: Answer{Managed: true, Promoted: true, Limit: 2,
				Deployment: &pb.Deployment{Id: "d2", JobVersion: 2, JobModifyIndex: newIndex, Status: StatusRunning}},
		},
		{
			name: "stopped job: not managed",
			g:    Group{Job: func() *pb.Job { j := job(3, 1, 0); j.Stop = true; return j }(), Allocs: old(3), Destructive: 3},
			want: Answer{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.g.TaskGroup = tt.g.Job.TaskGroups[0]
			got := Decide(tt.g)
			if !proto.Equal(got.Create, tt.want.Create) || !proto.Equal(got.Deployment, tt.want.Deployment) {
				t.Errorf("Create = %v, Deployment = %v; want %v, %v", got.Create, got.Deployment, tt.want.Create, tt.want.Deployment)
			}
			got.Create, got.Deployment, tt.want.Create, tt.want.Deployment = nil, nil, nil, nil
			if got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestProposal(t *testing.T) {
	if d := Proposal(map[string]Answer{"a": {Managed: true}}); d != nil {
		t.Errorf("no group creates: Proposal = %v, want nil", d)
	}
	got := Proposal(map[string]Answer{
		"a": {Managed: true, Create: &pb.DeploymentGroupState{DesiredTotal: 3, DesiredCanaries: 1}},
		"b": {Managed: true},
		"c": {Managed: true, Create: &pb.DeploymentGroupState{DesiredTotal: 2}},
	})
	want := &pb.Deployment{TaskGroups: map[string]*pb.DeploymentGroupState{
		"a": {DesiredTotal: 3, DesiredCanaries: 1}, "c": {DesiredTotal: 2},
	}}
	if !proto.Equal(got, want) {
		t.Errorf("Proposal = %v, want %v", got, want)
	}
}

func TestCurrentAndCanary(t *testing.T) {
	j := job(3, 1, 1)
	d := dep(StatusRunning, &pb.DeploymentGroupState{PlacedCanaries: []string{"promoted"}})
	if Current(j, d) != d {
		t.Error("deployment of the job's version is not current")
	}
	if Current(j, &pb.Deployment{JobVersion: 2, JobModifyIndex: oldIndex}) != nil {
		t.Error("deployment of a purged and re-registered job (same version, other index) is current")
	}
	if Current(j, nil) != nil || Current(nil, d) != nil {
		t.Error("Current of nil is not nil")
	}
	tests := []struct {
		a    *pb.Allocation
		want bool
	}{
		{alloc("c", newIndex, "running", "d2", true, unset), true},
		{alloc("c", newIndex, "running", "d1", true, unset), false},
		{alloc("c", newIndex, "running", "d2", false, unset), false},
		{alloc("c", newIndex, "failed", "d2", true, unset), false},
		{&pb.Allocation{Canary: true, DeploymentId: "d2", DesiredStatus: "stop", ClientStatus: "running"}, false},
		// Promotion clears the mark; placed_canaries still names it.
		{alloc("promoted", newIndex, "running", "d2", false, healthy), true},
		{alloc("promoted", newIndex, "running", "d1", false, healthy), false},
	}
	for i, tt := range tests {
		if got := IsCanary(tt.a, d); got != tt.want {
			t.Errorf("%d: IsCanary = %v, want %v", i, got, tt.want)
		}
	}
}

// The package is shared arithmetic for every scheduler plugin: it imports
// the protocol and the standard library only.
func TestImportsOnlyProtoAndStdlib(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if strings.Contains(first, ".") && p != "github.com/drover-org/drover/sdk/proto/schedulerpb" {
			t.Errorf("sdk/scheduler/rollout imports %s; it may import only sdk/proto/schedulerpb and the standard library", p)
		}
	}
}

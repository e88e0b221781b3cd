package drainer

import (
	"reflect"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

var (
	t0       = time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	deadline = t0.Add(time.Hour)
	service  = &structs.Job{ID: "svc", TypeBehavior: &structs.JobTypeBehavior{}}
	sysbatch = &structs.Job{ID: "sb", TypeBehavior: &structs.JobTypeBehavior{RunsToCompletion: true}}
	system   = &structs.Job{ID: "sys", TypeBehavior: &structs.JobTypeBehavior{DrainLast: true}}
)

func alloc(id string, job *structs.Job, client string, migrating bool) *structs.Allocation {
	a := &structs.Allocation{ID: id, JobID: job.ID, Namespace: structs.DefaultNamespace, Job: job,
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: client}
	if migrating {
		yes := true
		a.DesiredTransition.Migrate = &yes
	}
	return a
}

func running(id string, job *structs.Job) *structs.Allocation {
	return alloc(id, job, structs.AllocClientStatusRunning, false)
}

func draining(ignoreSystem bool) *structs.Node {
	return &structs.Node{ID: "n", DrainStrategy: &structs.DrainStrategy{
		DrainSpec: structs.DrainSpec{Deadline: time.Hour, IgnoreSystemJobs: ignoreSystem}, ForceDeadline: deadline}}
}

// TestDecide: what a drain needs, by the job types of the allocations
// left on the node, before and past the deadline.
func TestDecide(t *testing.T) {
	past := deadline.Add(time.Minute)
	cases := []struct {
		name      string
		node      *structs.Node
		allocs    []*structs.Allocation
		now       time.Time
		actedPast time.Time
		// want lists the IDs to migrate.
		want              []string
		complete          bool
		forced, forcedNow bool
	}{
		{name: "nothing on the node: complete", node: draining(false), now: t0, complete: true},
		{name: "only terminal allocs: complete", node: draining(false), now: t0, complete: true,
			allocs: []*structs.Allocation{alloc("done", service, structs.AllocClientStatusComplete, false)}},
		{name: "service allocs go at once, system waits", node: draining(false), now: t0, want: []string{"s1"},
			allocs: []*structs.Allocation{running("s1", service), running("sys", system)}},
		{name: "already migrating: not marked again", node: draining(false), now: t0,
			allocs: []*structs.Allocation{alloc("s1", service, structs.AllocClientStatusRunning, true), running("sys", system)}},
		{name: "sysbatch left to finish before the deadline", node: draining(false), now: t0,
			allocs: []*structs.Allocation{running("sb", sysbatch), running("sys", system)}},
		{name: "system last: goes once nothing else is left", node: draining(false), now: t0, want: []string{"sys"},
			allocs: []*structs.Allocation{running("sys", system)}},
		{name: "system ignored: stays, and the drain completes", node: draining(true), now: t0, complete: true,
			allocs: []*structs.Allocation{running("sys", system)}},
		{name: "past the deadline: everything goes, marked ones again", node: draining(false), now: past,
			forced: true, forcedNow: true, want: []string{"sb", "m", "sys"},
			allocs: []*structs.Allocation{running("sb", sysbatch), alloc("m", service, structs.AllocClientStatusRunning, true), running("sys", system)}},
		{name: "past a deadline already acted past: marked ones stay marked", node: draining(false), now: past, actedPast: deadline,
			forced: true, want: []string{"sb", "sys"},
			allocs: []*structs.Allocation{running("sb", sysbatch), alloc("m", service, structs.AllocClientStatusRunning, true), running("sys", system)}},
		{name: "acted past an earlier deadline: this one is new", node: draining(false), now: past, actedPast: t0,
			forced: true, forcedNow: true, want: []string{"m"},
			allocs: []*structs.Allocation{alloc("m", service, structs.AllocClientStatusRunning, true)}},
		{name: "no deadline: never forced", now: past.Add(24 * time.Hour),
			node:   &structs.Node{ID: "n", DrainStrategy: &structs.DrainStrategy{}},
			allocs: []*structs.Allocation{running("sb", sysbatch)}},
		{name: "alloc without a job: drained as a service", node: draining(false), now: t0, want: []string{"x"},
			allocs: []*structs.Allocation{{ID: "x", ClientStatus: structs.AllocClientStatusRunning, DesiredStatus: structs.AllocDesiredStatusRun}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.node, tc.allocs, tc.now, tc.actedPast)
			var got []string
			for _, a := range d.Migrate {
				got = append(got, a.ID)
			}
			if !reflect.DeepEqual(got, tc.want) || d.Complete != tc.complete || d.Forced != tc.forced || d.ForcedNow != tc.forcedNow {
				t.Fatalf("Decide = migrate %v complete %t forced %t/%t; want migrate %v complete %t forced %t/%t",
					got, d.Complete, d.Forced, d.ForcedNow, tc.want, tc.complete, tc.forced, tc.forcedNow)
			}
		})
	}
}

package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// A high-priority job of a count-placed type (service, batch) preempts a
// lower-priority job's alloc end to end when its type's preemption switch
// is on, through the real scheduler plugins: the victim is marked evict
// with "Preempted by alloc ID <new>" and PreemptedByAllocation, the new
// alloc is placed and lists it, and the victim's job gets a preemption
// eval. With the switch off nothing is preempted and the job is queued.
func TestCountTypesPreemptEndToEnd(t *testing.T) {
	cases := []struct {
		typ    string
		on     structs.PreemptionConfig
		others structs.PreemptionConfig // every other switch on
	}{
		{"service", structs.PreemptionConfig{ServiceSchedulerEnabled: true},
			structs.PreemptionConfig{SystemSchedulerEnabled: true, SysBatchSchedulerEnabled: true, BatchSchedulerEnabled: true}},
		{"batch", structs.PreemptionConfig{BatchSchedulerEnabled: true},
			structs.PreemptionConfig{SystemSchedulerEnabled: true, SysBatchSchedulerEnabled: true, ServiceSchedulerEnabled: true}},
	}
	for _, c := range cases {
		for _, enabled := range []bool{true, false} {
			name := c.typ + "/switch_off"
			if enabled {
				name = c.typ + "/switch_on"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := testServer(t, nil)
				ctx := context.Background()
				cfg := c.others
				if enabled {
					cfg = c.on
				}
				if _, _, err := s.Operator().SetSchedulerConfig(ctx, &structs.SchedulerConfiguration{PreemptionConfig: cfg}, false, 0); err != nil {
					t.Fatal(err)
				}
				n := testNode("a")
				registerNodes(t, s, n)

				low := testJob("low", "service")
				low.Priority = 20
				low.TaskGroups[0].Tasks[0].Resources.CPU = 3500
				victim := runJobOn(t, s, low, n, structs.AllocClientStatusRunning)

				high := testJob("high", c.typ)
				high.Priority = 50
				high.TaskGroups[0].Tasks[0].Resources.CPU = 1000
				resp := registerJob(t, s, high)
				ev := waitEvalTerminal(t, s, resp.EvalID)
				if ev.Status != structs.EvalStatusComplete {
					t.Fatalf("eval of high: %s %s", ev.Status, ev.StatusDescription)
				}
				placed := allocsOn(t, s, "high", n.ID)
				got, err := s.State().AllocByID(nil, victim.ID)
				if err != nil || got == nil {
					t.Fatalf("victim alloc: %v %v", got, err)
				}

				if !enabled {
					if len(placed) != 0 {
						t.Fatalf("switch off: %d allocs of high placed, want none", len(placed))
					}
					if got.DesiredStatus != structs.AllocDesiredStatusRun || got.PreemptedByAllocation != "" {
						t.Fatalf("switch off: victim desired %q preempted by %q; want left running", got.DesiredStatus, got.PreemptedByAllocation)
					}
					if ev.QueuedAllocations["g"] != 1 || ev.BlockedEval == "" {
						t.Fatalf("switch off: queued %v, blocked eval %q; want 1 queued behind a blocked eval", ev.QueuedAllocations, ev.BlockedEval)
					}
					return
				}

				if len(placed) != 1 {
					t.Fatalf("%d allocs of high placed, want 1", len(placed))
				}
				p := placed[0]
				if p.DesiredStatus != structs.AllocDesiredStatusRun || !slices.Equal(p.PreemptedAllocations, []string{victim.ID}) {
					t.Fatalf("new alloc desired %q, preempted %v; want run, [%s]", p.DesiredStatus, p.PreemptedAllocations, victim.ID)
				}
				if got.DesiredStatus != structs.AllocDesiredStatusEvict ||
					got.DesiredDescription != "Preempted by alloc ID "+p.ID || got.PreemptedByAllocation != p.ID {
					t.Fatalf("victim desired %q %q, preempted by %q; want evict by %s", got.DesiredStatus, got.DesiredDescription, got.PreemptedByAllocation, p.ID)
				}
				waitFor(t, 30*time.Second, "a preemption eval for the victim's job", func() bool {
					evs, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, "low")
					for _, e := range evs {
						if e.TriggeredBy == structs.EvalTriggerPreemption {
							return true
						}
					}
					return false
				})
			})
		}
	}
}

// A service job asking for a static port another job's alloc holds
// preempts that alloc when it is at least 10 priority points lower, with
// ServiceSchedulerEnabled on: the request lists the victim's ports, the
// plugin frees the port by preempting it, and the applier accepts the new
// alloc on the port the evicted one held.
func TestServicePreemptsForStaticPort(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	if _, _, err := s.Operator().SetSchedulerConfig(ctx, &structs.SchedulerConfiguration{
		PreemptionConfig: structs.PreemptionConfig{ServiceSchedulerEnabled: true},
	}, false, 0); err != nil {
		t.Fatal(err)
	}
	n := testNode("a")
	n.NodeResources.Networks = []*structs.NetworkResource{{Mode: "host", Device: "eth0", IP: "10.0.0.1"}}
	registerNodes(t, s, n)
	withStatic := func(j *structs.Job) *structs.Job {
		j.TaskGroups[0].Networks = []*structs.NetworkResource{{Mode: "host",
			ReservedPorts: []structs.Port{{Label: "http", Value: 8080}}}}
		return j
	}
	low := withStatic(testJob("low", "service"))
	low.Priority = 20
	victim := runJobOn(t, s, low, n, structs.AllocClientStatusRunning)
	if victim.AllocatedResources == nil || len(victim.AllocatedResources.Shared.Ports) != 1 {
		t.Fatalf("low alloc holds ports %+v, want 8080", victim.AllocatedResources)
	}

	high := withStatic(testJob("high", "service"))
	high.Priority = 50
	ev := waitEvalTerminal(t, s, registerJob(t, s, high).EvalID)
	if ev.Status != structs.EvalStatusComplete {
		t.Fatalf("eval of high: %s %s", ev.Status, ev.StatusDescription)
	}
	placed := allocsOn(t, s, "high", n.ID)
	if len(placed) != 1 {
		t.Fatalf("%d allocs of high placed, want 1 (failed: %v)", len(placed), ev.FailedTGAllocs)
	}
	p := placed[0]
	if p.AllocatedResources == nil || len(p.AllocatedResources.Shared.Ports) != 1 || p.AllocatedResources.Shared.Ports[0].Value != 8080 {
		t.Fatalf("new alloc ports %+v, want 8080", p.AllocatedResources)
	}
	got, err := s.State().AllocByID(nil, victim.ID)
	if err != nil || got == nil {
		t.Fatalf("victim alloc: %v %v", got, err)
	}
	if got.DesiredStatus != structs.AllocDesiredStatusEvict || got.PreemptedByAllocation != p.ID ||
		!slices.Equal(p.PreemptedAllocations, []string{victim.ID}) {
		t.Fatalf("victim desired %q preempted by %q, new alloc preempted %v; want evict by %s", got.DesiredStatus, got.PreemptedByAllocation, p.PreemptedAllocations, p.ID)
	}
}

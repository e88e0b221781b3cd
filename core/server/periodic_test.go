package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // time_zone tests must not depend on the host's zoneinfo

	"github.com/drover-org/drover/core/structs"
)

// fakeClock is a Config.Now the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(at time.Time) *fakeClock { return &fakeClock{now: at} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(at time.Time) {
	c.mu.Lock()
	c.now = at
	c.mu.Unlock()
}

func periodicJob(id, spec string, overlap bool) *structs.Job {
	j := testJob(id, "sysbatch")
	j.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: spec, ProhibitOverlap: overlap}
	return j
}

func childrenOf(t *testing.T, s *Server, parent string) []*structs.Job {
	t.Helper()
	jobs, err := s.State().JobsByParent(nil, structs.DefaultNamespace, parent)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// nextLaunch is the dispatcher's next launch time for a job, or zero.
func nextLaunch(s *Server, id string) time.Time {
	return s.periodic.NextLaunch(structs.DefaultNamespace, id)
}

func TestPeriodicRegisterAndForce(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 10, 30, 0, 0, time.UTC)
	clock := newFakeClock(t0)
	s := testServer(t, func(c *Config) { c.Now = clock.Now })
	ctx := context.Background()
	registerNodes(t, s, testNode("a"))

	resp := registerJob(t, s, periodicJob("pj", "0 * * * *", false))
	if resp.EvalID != "" || resp.Index == 0 {
		t.Fatalf("periodic register = %+v: want a write and no eval", resp)
	}
	if evs, _ := s.State().EvalsByJob(nil, "default", "pj"); len(evs) != 0 {
		t.Fatalf("periodic parent got %d evals", len(evs))
	}
	waitFor(t, 5*time.Second, "dispatcher tracks the job", func() bool {
		return nextLaunch(s, "pj").Equal(time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC))
	})

	fr, err := s.Jobs().ForcePeriodic(ctx, "", "pj")
	if err != nil {
		t.Fatal(err)
	}
	childID := fmt.Sprintf("pj/periodic-%d", t0.Unix())
	ev := waitEvalTerminal(t, s, fr.EvalID)
	if ev.JobID != childID || ev.TriggeredBy != structs.EvalTriggerPeriodicJob || ev.Type != "sysbatch" ||
		ev.Status != structs.EvalStatusComplete || fr.EvalCreateIndex == 0 {
		t.Fatalf("forced eval = %+v", ev)
	}
	child, _ := s.State().JobByID(nil, "default", childID)
	if child == nil || child.ParentID != "pj" || child.Name != childID || child.Periodic != nil {
		t.Fatalf("child = %+v", child)
	}
	if allocs, _ := s.State().AllocsByJob(nil, "default", childID, true); len(allocs) != 1 {
		t.Fatalf("child allocs = %d", len(allocs))
	}

	// A second force within the same second gets the next free ID.
	fr2, err := s.Jobs().ForcePeriodic(ctx, "", "pj")
	if err != nil {
		t.Fatal(err)
	}
	ev2, _ := s.State().EvalByID(nil, fr2.EvalID)
	if want := fmt.Sprintf("pj/periodic-%d", t0.Unix()+1); ev2 == nil || ev2.JobID != want {
		t.Fatalf("second forced child = %+v, want %s", ev2, want)
	}

	// Refusals.
	registerJob(t, s, testJob("plain", "sysbatch"))
	for _, tc := range []struct {
		id   string
		kind error
	}{{"plain", structs.ErrInvalid}, {"nope", structs.ErrNotFound}} {
		if _, err := s.Jobs().ForcePeriodic(ctx, "", tc.id); !errors.Is(err, tc.kind) {
			t.Fatalf("force %s: %v, want %v", tc.id, err, tc.kind)
		}
	}
	if _, err := s.Jobs().Deregister(ctx, "", "pj", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Jobs().ForcePeriodic(ctx, "", "pj"); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("force stopped parent: %v", err)
	}
	waitFor(t, 5*time.Second, "stopped parent untracked", func() bool { return nextLaunch(s, "pj").IsZero() })
}

func TestPeriodicProhibitOverlap(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 10, 30, 0, 0, time.UTC)
	clock := newFakeClock(t0)
	s := testServer(t, func(c *Config) { c.Now = clock.Now })
	ctx := context.Background()
	node := testNode("a")
	registerNodes(t, s, node)
	registerJob(t, s, periodicJob("po", "0 * * * *", true))
	waitFor(t, 5*time.Second, "dispatcher tracks the job", func() bool { return !nextLaunch(s, "po").IsZero() })

	fr, err := s.Jobs().ForcePeriodic(ctx, "", "po")
	if err != nil {
		t.Fatal(err)
	}
	waitEvalTerminal(t, s, fr.EvalID)
	first := childrenOf(t, s, "po")
	if len(first) != 1 {
		t.Fatalf("children after force = %d", len(first))
	}
	running, _ := s.State().AllocsByJob(nil, "default", first[0].ID, true)
	if len(running) != 1 {
		t.Fatalf("first child allocs = %d", len(running))
	}

	// 11:00 is due while the first child's alloc is still pending: skipped.
	skipped := time.Date(2030, 1, 1, 11, 0, 5, 0, time.UTC)
	clock.Set(skipped)
	s.periodic.Wake()
	waitFor(t, 5*time.Second, "11:00 launch consumed", func() bool {
		return nextLaunch(s, "po").Equal(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	})

	// Force ignores the overlap rule. (The clock moves on first, so the
	// forced child's ID cannot be mistaken for the skipped launch's.)
	clock.Set(time.Date(2030, 1, 1, 11, 10, 0, 0, time.UTC))
	fr, err = s.Jobs().ForcePeriodic(ctx, "", "po")
	if err != nil || fr.EvalID == "" {
		t.Fatalf("forced launch during overlap: %+v %v", fr, err)
	}
	waitEvalTerminal(t, s, fr.EvalID)
	if n := len(childrenOf(t, s, "po")); n != 2 {
		t.Fatalf("children after second force = %d", n)
	}

	// Once every child finished, the 12:00 launch happens. The dispatcher
	// handles launches in order, so when it has, the 11:00 decision was
	// final.
	for _, c := range childrenOf(t, s, "po") {
		allocs, _ := s.State().AllocsByJob(nil, "default", c.ID, true)
		var done []*structs.Allocation
		for _, a := range allocs {
			u := a.Copy()
			u.ClientStatus = structs.AllocClientStatusComplete
			done = append(done, u)
		}
		if err := s.Nodes().UpdateAllocs(ctx, node.ID, node.SecretID, done); err != nil {
			t.Fatal(err)
		}
	}
	clock.Set(time.Date(2030, 1, 1, 12, 0, 1, 0, time.UTC))
	s.periodic.Wake()
	// Children are named after their scheduled time, not the clock's.
	scheduled := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	want := fmt.Sprintf("po/periodic-%d", scheduled.Unix())
	waitFor(t, 10*time.Second, "12:00 launch", func() bool {
		j, _ := s.State().JobByID(nil, "default", want)
		return j != nil
	})
	if j, _ := s.State().JobByID(nil, "default", fmt.Sprintf("po/periodic-%d", skipped.Truncate(time.Hour).Unix())); j != nil {
		t.Fatal("the overlapping 11:00 launch was not skipped")
	}
	if n := len(childrenOf(t, s, "po")); n != 3 {
		t.Fatalf("children = %d, want 3", n)
	}
}

func TestPeriodicDispatcherHonoursTimeZone(t *testing.T) {
	clock := newFakeClock(time.Date(2030, 1, 15, 12, 0, 0, 0, time.UTC))
	s := testServer(t, func(c *Config) { c.Now = clock.Now })
	j := periodicJob("tz", "0 9 * * *", false)
	j.Periodic.TimeZone = "America/New_York"
	registerJob(t, s, j)
	want := time.Date(2030, 1, 15, 14, 0, 0, 0, time.UTC) // 09:00 EST
	waitFor(t, 5*time.Second, "next launch in New York time", func() bool { return nextLaunch(s, "tz").Equal(want) })
	plan, err := s.Jobs().Plan(context.Background(), j, false)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.NextPeriodicLaunch.Equal(want) {
		t.Fatalf("plan next launch = %s", plan.NextPeriodicLaunch.UTC())
	}
}

func TestPeriodicDispatcherLaunchesOnSchedule(t *testing.T) {
	s := testServer(t, nil)
	registerNodes(t, s, testNode("a"))
	// Seven fields: seconds first, so it launches every second.
	registerJob(t, s, periodicJob("tick", "* * * * * * *", false))
	// A launch is one entry: the child, its eval and the parent's launch
	// record. Wait for a child whose eval is there (the FSM commits them
	// together; the deadline covers a loaded machine, not a gap between
	// them).
	var child *structs.Job
	var ev *structs.Evaluation
	waitFor(t, 60*time.Second, "a scheduled child with its eval", func() bool {
		for _, c := range childrenOf(t, s, "tick") {
			evs, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) > 0 {
				child, ev = c, evs[0]
				if len(evs) != 1 {
					t.Fatalf("child %s has %d evals, want 1", c.ID, len(evs))
				}
				return true
			}
		}
		return false
	})
	if !structs.IsPeriodicChild("tick", child.ID) {
		t.Fatalf("child ID %q", child.ID)
	}
	if ev.TriggeredBy != structs.EvalTriggerPeriodicJob {
		t.Fatalf("child eval triggered by %q, want %q", ev.TriggeredBy, structs.EvalTriggerPeriodicJob)
	}
	launch, err := s.State().PeriodicLaunchByID(nil, structs.DefaultNamespace, "tick")
	if err != nil {
		t.Fatal(err)
	}
	if launch == nil || launch.Launch.IsZero() || launch.ModifyIndex < child.CreateIndex {
		t.Fatalf("launch record = %+v, want one moved by the child's entry (index %d)", launch, child.CreateIndex)
	}
	waitEvalTerminal(t, s, ev.ID)
}

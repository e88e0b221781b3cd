package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

func migrating(t *testing.T, s *Server, id string) bool {
	t.Helper()
	a, _ := s.State().AllocByID(nil, id)
	return a.DesiredTransition.ShouldMigrate()
}

// TestDrain drives the drainer by hand (drainer.Tick is synchronous) with a
// fake clock; the leader's own once-a-second drainer runs too, which only
// repeats the same decisions.
func TestDrain(t *testing.T) {
	cases := []struct {
		name   string
		ignore bool
		// finish ends the drain's obstacle: the deadline passes, or the
		// sysbatch alloc completes by itself.
		finish func(t *testing.T, s *Server, clock *fakeClock, n *structs.Node, sb *structs.Allocation)
		// sysbatchMigrated: the drainer had to force the sysbatch alloc.
		sysbatchMigrated bool
	}{
		{
			name: "deadline forces the sysbatch alloc",
			finish: func(_ *testing.T, _ *Server, clock *fakeClock, _ *structs.Node, _ *structs.Allocation) {
				clock.Set(clock.Now().Add(2 * time.Hour))
			},
			sysbatchMigrated: true,
		},
		{
			name: "sysbatch alloc finishes before the deadline",
			finish: func(t *testing.T, s *Server, _ *fakeClock, n *structs.Node, sb *structs.Allocation) {
				u := sb.Copy()
				u.ClientStatus = structs.AllocClientStatusComplete
				if err := s.Nodes().UpdateAllocs(context.Background(), n.ID, n.SecretID, []*structs.Allocation{u}); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:   "system allocs ignored",
			ignore: true,
			finish: func(_ *testing.T, _ *Server, clock *fakeClock, _ *structs.Node, _ *structs.Allocation) {
				clock.Set(clock.Now().Add(2 * time.Hour))
			},
			sysbatchMigrated: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock(time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC))
			s := testServer(t, func(c *Config) { c.Now = clock.Now })
			ctx := context.Background()
			n := testNode("a")
			registerNodes(t, s, n)
			sb := runJobOn(t, s, testJob("sb", "sysbatch"), n, structs.AllocClientStatusRunning)
			sys := runJobOn(t, s, testJob("sys", "system"), n, structs.AllocClientStatusRunning)

			if _, err := s.Nodes().UpdateDrain(ctx, n.ID, &structs.DrainSpec{Deadline: time.Hour, IgnoreSystemJobs: tc.ignore}, false, nil); err != nil {
				t.Fatal(err)
			}
			node, _ := s.State().NodeByID(nil, n.ID)
			if node.DrainStrategy == nil || !node.DrainStrategy.ForceDeadline.Equal(clock.Now().Add(time.Hour)) ||
				node.SchedulingEligibility != structs.NodeSchedulingIneligible {
				t.Fatalf("drain not set: %+v elig=%s", node.DrainStrategy, node.SchedulingEligibility)
			}

			// Before the deadline a running sysbatch alloc is left to
			// finish, and system allocs wait for it.
			s.drainer.Tick()
			if migrating(t, s, sb.ID) || migrating(t, s, sys.ID) {
				t.Fatal("drainer migrated allocs before the deadline")
			}
			if node, _ := s.State().NodeByID(nil, n.ID); node.DrainStrategy == nil {
				t.Fatal("drain completed with live allocs")
			}

			tc.finish(t, s, clock, n, sb)
			s.drainer.Tick()
			if got := migrating(t, s, sb.ID); got != tc.sysbatchMigrated {
				t.Fatalf("sysbatch alloc migrate = %v, want %v", got, tc.sysbatchMigrated)
			}
			if got := migrating(t, s, sys.ID); got == tc.ignore {
				t.Fatalf("system alloc migrate = %v with IgnoreSystemJobs=%v", got, tc.ignore)
			}

			waitFor(t, 15*time.Second, "drained allocs stopped", func() bool {
				a, _ := s.State().AllocByID(nil, sb.ID)
				b, _ := s.State().AllocByID(nil, sys.ID)
				return a.TerminalStatus() && b.TerminalStatus() != tc.ignore
			})
			waitFor(t, 15*time.Second, "drain complete", func() bool {
				s.drainer.Tick()
				node, _ := s.State().NodeByID(nil, n.ID)
				return node.DrainStrategy == nil
			})
			node, _ = s.State().NodeByID(nil, n.ID)
			if node.LastDrain == nil || node.LastDrain.Status != state.DrainStatusComplete {
				t.Fatalf("last drain = %+v", node.LastDrain)
			}
			if node.SchedulingEligibility != structs.NodeSchedulingIneligible {
				t.Fatal("a completed drain made the node eligible")
			}
			// Nothing was replaced on the drained node.
			for _, id := range []string{"sb", "sys"} {
				if all := allocsOn(t, s, id, n.ID); len(all) != 1 {
					t.Fatalf("%s has %d allocs on the drained node", id, len(all))
				}
			}
			if tc.ignore {
				if a, _ := s.State().AllocByID(nil, sys.ID); a.TerminalStatus() || migrating(t, s, sys.ID) {
					t.Fatal("an ignored system alloc was drained")
				}
			}
		})
	}
}

func TestDrainCancelMarkEligible(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	n := testNode("a")
	registerNodes(t, s, n)
	if _, err := s.Nodes().UpdateDrain(ctx, n.ID, &structs.DrainSpec{Deadline: time.Hour}, false, nil); err != nil {
		t.Fatal(err)
	}
	resp := registerJob(t, s, testJob("sys", "system"))
	waitEvalTerminal(t, s, resp.EvalID)
	if got := allocsOn(t, s, "sys", n.ID); len(got) != 0 {
		t.Fatalf("draining node got %d allocs", len(got))
	}
	up, err := s.Nodes().UpdateDrain(ctx, n.ID, nil, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	node, _ := s.State().NodeByID(nil, n.ID)
	if node.DrainStrategy != nil || node.SchedulingEligibility != structs.NodeSchedulingEligible {
		t.Fatalf("cancelled drain: %+v %s", node.DrainStrategy, node.SchedulingEligibility)
	}
	if node.LastDrain == nil || node.LastDrain.Status != state.DrainStatusCanceled {
		t.Fatalf("last drain = %+v", node.LastDrain)
	}
	if len(up.EvalIDs) != 1 {
		t.Fatalf("mark eligible created %d evals", len(up.EvalIDs))
	}
	waitEvalTerminal(t, s, up.EvalIDs[0])
	if got := allocsOn(t, s, "sys", n.ID); len(got) != 1 {
		t.Fatalf("node eligible again got %d allocs", len(got))
	}
}

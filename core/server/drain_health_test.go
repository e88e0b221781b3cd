package server

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// A drain of a group with a migrate block moves one allocation at a time
// (max_parallel 1), each only once the previous replacement is reported
// healthy: a running replacement is not enough. The health report, or the
// drain deadline passing, evaluates the job so the next one goes.
func TestDrainWaitsForHealthyReplacements(t *testing.T) {
	for _, tc := range []struct {
		name string
		// next lets the second migration go after the first replacement
		// runs.
		next func(t *testing.T, s *Server, clock *fakeClock, n *structs.Node, replacement *structs.Allocation)
	}{
		{"replacement reported healthy", func(t *testing.T, s *Server, _ *fakeClock, n *structs.Node, r *structs.Allocation) {
			u := r.Copy()
			u.ClientStatus = structs.AllocClientStatusRunning
			yes := true
			u.DeploymentStatus = &structs.AllocDeploymentStatus{Healthy: &yes}
			if err := s.Nodes().UpdateAllocs(context.Background(), n.ID, n.SecretID, []*structs.Allocation{u}); err != nil {
				t.Fatal(err)
			}
		}},
		{"drain deadline passes", func(_ *testing.T, s *Server, clock *fakeClock, _ *structs.Node, _ *structs.Allocation) {
			clock.Set(clock.Now().Add(2 * time.Hour))
			s.drainer.Tick()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock(time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC))
			s := testServer(t, func(c *Config) { c.Now = clock.Now })
			ctx := context.Background()
			a, b := testNode("a"), testNode("b")
			registerNodes(t, s, a)
			job := testJob("web", "service")
			job.TaskGroups[0].Count = 2
			job.TaskGroups[0].Tasks[0].Config = map[string]any{"command": "/bin/sleep", "args": []any{"600"}}
			job.TaskGroups[0].Migrate = &structs.MigrateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckTaskStates,
				MinHealthyTime: 10 * time.Second, HealthyDeadline: 5 * time.Minute}
			resp := registerJob(t, s, job)
			if ev := waitEvalTerminal(t, s, resp.EvalID); ev.Status != structs.EvalStatusComplete {
				t.Fatalf("eval: %s %s", ev.Status, ev.StatusDescription)
			}
			orig := allocsOn(t, s, "web", a.ID)
			if len(orig) != 2 {
				t.Fatalf("%d allocs on a, want 2", len(orig))
			}
			setClientStatus(t, s, a, structs.AllocClientStatusRunning, orig...)
			registerNodes(t, s, b)

			if _, err := s.Nodes().UpdateDrain(ctx, a.ID, &structs.DrainSpec{Deadline: time.Hour}, false, nil); err != nil {
				t.Fatal(err)
			}
			s.drainer.Tick()
			var replacement *structs.Allocation
			waitFor(t, 15*time.Second, "one alloc migrated to b", func() bool {
				on := live(t, s, "web", b.ID)
				if len(on) == 1 {
					replacement = on[0]
				}
				return len(on) == 1 && stoppedCount(t, s, orig) == 1
			})
			// Running is not healthy: the second waits.
			setClientStatus(t, s, b, structs.AllocClientStatusRunning, replacement)
			waitJobEvalsTerminal(t, s, "web")
			if got := stoppedCount(t, s, orig); got != 1 || len(live(t, s, "web", b.ID)) != 1 {
				t.Fatalf("with the replacement running but not healthy: %d of a's allocs stopped, want 1", got)
			}

			tc.next(t, s, clock, b, replacement)
			waitFor(t, 15*time.Second, "the second alloc migrated", func() bool {
				return stoppedCount(t, s, orig) == 2 && len(live(t, s, "web", b.ID)) == 2
			})
		})
	}
}

func setClientStatus(t *testing.T, s *Server, n *structs.Node, status string, allocs ...*structs.Allocation) {
	t.Helper()
	var us []*structs.Allocation
	for _, a := range allocs {
		u := a.Copy()
		u.ClientStatus = status
		us = append(us, u)
	}
	if err := s.Nodes().UpdateAllocs(context.Background(), n.ID, n.SecretID, us); err != nil {
		t.Fatal(err)
	}
}

// live returns the job's allocs on the node that the server still wants.
func live(t *testing.T, s *Server, jobID, nodeID string) []*structs.Allocation {
	t.Helper()
	var out []*structs.Allocation
	for _, a := range allocsOn(t, s, jobID, nodeID) {
		if !a.ServerTerminalStatus() {
			out = append(out, a)
		}
	}
	return out
}

func stoppedCount(t *testing.T, s *Server, allocs []*structs.Allocation) int {
	t.Helper()
	n := 0
	for _, a := range allocs {
		cur, err := s.State().AllocByID(nil, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.ServerTerminalStatus() {
			n++
		}
	}
	return n
}

// waitJobEvalsTerminal waits until every eval of the job is terminal (or
// blocked).
func waitJobEvalsTerminal(t *testing.T, s *Server, jobID string) {
	t.Helper()
	waitFor(t, 15*time.Second, "the job's evals terminal", func() bool {
		evals, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, jobID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evals {
			if !e.TerminalStatus() && e.Status != structs.EvalStatusBlocked {
				return false
			}
		}
		return true
	})
}

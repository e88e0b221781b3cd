package server

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// A service job no registered node can take places nothing: the eval says
// why (the memory dimension exhausted, or a constraint filtering every
// node), a blocked eval waits, and when a node that fits registers the
// blocked eval is released and the service scheduler places the count on
// the new node.
func TestServiceBlockedEvalUnblocksOnNodeJoin(t *testing.T) {
	cases := []struct {
		name   string
		job    func(*structs.Job)
		small  func(*structs.Node) // the node that cannot take the job
		fits   func(*structs.Node) // the node that joins and can
		metric func(t *testing.T, m *structs.AllocMetric)
	}{
		{
			name: "memory",
			job:  func(j *structs.Job) { j.TaskGroups[0].Tasks[0].Resources.MemoryMB = 4096 },
			small: func(n *structs.Node) {
				n.NodeResources.Memory.MemoryMB = 2048
			},
			fits: func(n *structs.Node) { n.NodeResources.Memory.MemoryMB = 3*4096 + 512 },
			metric: func(t *testing.T, m *structs.AllocMetric) {
				if m.NodesExhausted != 1 || m.DimensionExhausted["memory"] != 1 {
					t.Errorf("exhausted %d nodes, dimensions %v; want memory on 1", m.NodesExhausted, m.DimensionExhausted)
				}
			},
		},
		{
			name: "constraint",
			job: func(j *structs.Job) {
				j.Constraints = []*structs.Constraint{{LTarget: "${meta.rack}", RTarget: "r2", Operand: "="}}
			},
			small: func(n *structs.Node) { n.Meta = map[string]string{"rack": "r1"} },
			fits:  func(n *structs.Node) { n.Meta = map[string]string{"rack": "r2"} },
			metric: func(t *testing.T, m *structs.AllocMetric) {
				if m.NodesFiltered != 1 || m.ConstraintFiltered["${meta.rack} = r2"] != 1 {
					t.Errorf("filtered %d nodes, constraints %v; want ${meta.rack} = r2 on 1", m.NodesFiltered, m.ConstraintFiltered)
				}
			},
		},
		{
			name: "network mode",
			job: func(j *structs.Job) {
				j.TaskGroups[0].Networks = []*structs.NetworkResource{{Mode: structs.NetworkModeBridge}}
			},
			small: func(n *structs.Node) {},
			fits: func(n *structs.Node) {
				n.NodeResources.Networks = append(n.NodeResources.Networks, &structs.NetworkResource{Mode: structs.NetworkModeBridge})
			},
			metric: func(t *testing.T, m *structs.AllocMetric) {
				if m.NodesFiltered != 1 || m.ConstraintFiltered["missing network mode bridge"] != 1 {
					t.Errorf("filtered %d nodes, constraints %v; want missing network mode bridge on 1", m.NodesFiltered, m.ConstraintFiltered)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := testServer(t, nil)
			small := testNode("small")
			c.small(small)
			registerNodes(t, s, small)

			job := testJob("svc", "service")
			job.TaskGroups[0].Count = 3
			job.TaskGroups[0].Tasks[0].Config = map[string]any{"command": "/bin/sleep", "args": []string{"300"}}
			c.job(job)
			resp := registerJob(t, s, job)
			ev := waitEvalTerminal(t, s, resp.EvalID)
			if ev.Status != structs.EvalStatusComplete || ev.BlockedEval == "" {
				t.Fatalf("eval %q, blocked eval %q; want complete with a blocked eval", ev.Status, ev.BlockedEval)
			}
			m := ev.FailedTGAllocs["g"]
			if m == nil {
				t.Fatalf("no failed allocs for g: %v", ev.FailedTGAllocs)
			}
			if m.NodesEvaluated != 1 || m.CoalescedFailures != 2 || ev.QueuedAllocations["g"] != 3 {
				t.Errorf("evaluated %d nodes, %d coalesced, queued %v; want 1 node, 2 coalesced, 3 queued",
					m.NodesEvaluated, m.CoalescedFailures, ev.QueuedAllocations)
			}
			c.metric(t, m)
			blocked, _ := s.State().EvalByID(nil, ev.BlockedEval)
			if blocked == nil || blocked.Status != structs.EvalStatusBlocked || blocked.PreviousEval != ev.ID {
				t.Fatalf("blocked eval = %+v", blocked)
			}
			waitFor(t, 10*time.Second, "the blocked eval tracked", func() bool { return s.blocked.Stats().TotalBlocked == 1 })
			if allocs, _ := s.State().AllocsByJob(nil, "default", "svc", true); len(allocs) != 0 {
				t.Fatalf("%d allocs placed where nothing fits", len(allocs))
			}

			big := testNode("big")
			c.fits(big)
			registerNodes(t, s, big)
			waitFor(t, 30*time.Second, "three allocs placed on the new node", func() bool {
				allocs, _ := s.State().AllocsByJob(nil, "default", "svc", true)
				n := 0
				for _, a := range allocs {
					if a.NodeID == big.ID && a.DesiredStatus == structs.AllocDesiredStatusRun {
						n++
					}
				}
				return len(allocs) == 3 && n == 3
			})
			waitFor(t, 30*time.Second, "the blocked eval closed", func() bool {
				return evalStatus(t, s, blocked.ID) == structs.EvalStatusComplete
			})
			if st := s.blocked.Stats(); st.TotalBlocked != 0 {
				t.Errorf("tracker still holds %+v", st)
			}
			done, _ := s.State().EvalByID(nil, blocked.ID)
			if len(done.FailedTGAllocs) != 0 || done.BlockedEval != "" {
				t.Errorf("the released eval still failed %v / blocked %q", done.FailedTGAllocs, done.BlockedEval)
			}
		})
	}
}

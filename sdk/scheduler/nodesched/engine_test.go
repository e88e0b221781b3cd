package nodesched

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

type engineCase struct {
	name    string
	engine  *Engine
	req     func() *schedulerpb.ScheduleRequest
	placed  []string
	stopped []string
	blocked []string
	queued  map[string]int32
	failed  []string // groups in failed_tg_allocs
	check   func(t *testing.T, out *Outcome)
}

func runCases(t *testing.T, cases []engineCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := runEngine(t, c.engine, c.req())
			expect(t, "placed", placed(out), c.placed)
			expect(t, "stopped", stopped(out), c.stopped)
			expect(t, "blocked", blockedOn(out), c.blocked)
			expect(t, "failed groups", slices.Sorted(maps.Keys(out.Response.GetFailedTgAllocs())), c.failed)
			if c.queued != nil {
				expectQueued(t, out, c.queued)
			}
			if c.check != nil {
				c.check(t, out)
			}
		})
	}
}

func withVersions(req *schedulerpb.ScheduleRequest, old ...*schedulerpb.Job) *schedulerpb.ScheduleRequest {
	req.JobVersions = old
	return req
}

func at(index uint64) func(*schedulerpb.Allocation) {
	return func(a *schedulerpb.Allocation) { a.JobModifyIndex = index }
}

func client(status string) func(*schedulerpb.Allocation) {
	return func(a *schedulerpb.Allocation) { a.ClientStatus = status }
}

// TestChecklist covers points 1-7 of the re-implementation checklist
// (§10); 8 and 9 follow below.
func TestChecklist(t *testing.T) {
	sb := "sysbatch"
	down := func(n *schedulerpb.Node) { n.Status = "down" }
	draining := func(n *schedulerpb.Node) { n.Draining = true }
	ineligible := func(n *schedulerpb.Node) { n.Eligible = false }
	windows := func(n *schedulerpb.Node) { n.Attributes["kernel.name"] = "windows" }
	full := func(n *schedulerpb.Node) { n.Used = &schedulerpb.Resources{Cpu: 900} }
	success := func(a *schedulerpb.Allocation) { a.RanSuccessfully = true }

	runCases(t, []engineCase{
		// 1. Terminal sysbatch allocs.
		{name: "1 complete, job unchanged: not re-placed", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1")}, tAlloc("a1", "n1", client("complete"), success))
			},
			queued: map[string]int32{"g": 0}},
		{name: "1 failed, job unchanged: not re-placed", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1")}, tAlloc("a1", "n1", client("failed")))
			},
			queued: map[string]int32{"g": 0}},
		{name: "1 failed, destructive change: re-run chained", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob(sb)
				return withVersions(tReq(j, []*schedulerpb.Node{tNode("n1")}, tAlloc("a1", "n1", client("failed"), at(10))), tOld(j, true))
			},
			placed: []string{"n1/j.g[0]<-a1"}, stopped: []string{"a1:" + DescUpdating},
			queued: map[string]int32{"g": 1}},
		{name: "1 complete, in-place change: nothing", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob(sb)
				return withVersions(tReq(j, []*schedulerpb.Node{tNode("n1")}, tAlloc("a1", "n1", client("complete"), at(10))), tOld(j, false))
			},
			queued: map[string]int32{"g": 0},
			check: func(t *testing.T, out *Outcome) {
				if got := out.Response.GetPlan().GetDesiredTgUpdates()["g"].GetInPlaceUpdate(); got != 1 {
					t.Errorf("in_place_update = %d, want 1", got)
				}
			}},
		{name: "1 unknown old version: destructive", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1")}, tAlloc("a1", "n1", client("complete"), at(10)))
			},
			placed: []string{"n1/j.g[0]<-a1"}, stopped: []string{"a1:" + DescUpdating}},

		// 2. Successful sysbatch alloc on a tainted node.
		{name: "2 successful alloc on down node ignored", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1", down)}, tAlloc("a1", "n1", success))
			}},
		{name: "2 successful alloc on draining node ignored", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1", draining)}, tAlloc("a1", "n1", success))
			}},

		// 3. Migrate flag.
		{name: "3 sysbatch migrate on a ready node: stopped, never replaced", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1")},
					tAlloc("a1", "n1", func(a *schedulerpb.Allocation) { a.Migrate = true }))
			},
			stopped: []string{"a1:" + DescMigrating}, queued: map[string]int32{"g": 0}},

		// 4. Down or missing nodes.
		{name: "4 down node: lost", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1", down)}, tAlloc("a1", "n1"))
			},
			stopped: []string{"a1:" + DescLost + ":lost"}},
		{name: "4 missing node: lost", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n2")}, tAlloc("a1", "n1", client("pending")))
			},
			placed: []string{"n2/j.g[0]"}, stopped: []string{"a1:" + DescLost + ":lost"}},
		{name: "4 server-stopped, client running, down node: lost", engine: systemEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob("system"), []*schedulerpb.Node{tNode("n1", down)},
					tAlloc("a1", "n1", func(a *schedulerpb.Allocation) { a.DesiredStatus = "stop" }))
			},
			stopped: []string{"a1:" + DescLost + ":lost"}},

		// 5. Ineligible and draining nodes.
		{name: "5 ineligible, unchanged: kept, nothing placed", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob(sb)
				j.TaskGroups[0].Count = 2
				return tReq(j, []*schedulerpb.Node{tNode("n1", ineligible)}, tAlloc("a1", "n1"))
			}},
		{name: "5 ineligible, changed: stopped", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob(sb)
				return withVersions(tReq(j, []*schedulerpb.Node{tNode("n1", ineligible)}, tAlloc("a1", "n1", at(10))), tOld(j, true))
			},
			stopped: []string{"a1:" + DescNotNeeded}},
		{name: "5 draining, changed: still ignored", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob(sb)
				return withVersions(tReq(j, []*schedulerpb.Node{tNode("n1", draining)}, tAlloc("a1", "n1", at(10))), tOld(j, true))
			}},

		// 6. Filtering never blocks; exhaustion does, pinned to the node.
		{name: "6 filtered only: failed group, no blocked eval", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1", windows), tNode("n2", windows)})
			},
			failed: []string{"g"}, queued: map[string]int32{"g": 0},
			check: func(t *testing.T, out *Outcome) {
				m := out.Response.GetFailedTgAllocs()["g"]
				if m.GetNodesFiltered() != 2 || m.GetConstraintFiltered()["${attr.kernel.name} = linux"] != 2 {
					t.Errorf("metric = %v", m)
				}
			}},
		{name: "6 filtered but an alloc of the group exists: no failure", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1"), tNode("n2", windows)}, tAlloc("a1", "n1"))
			},
			queued: map[string]int32{"g": 0},
			check: func(t *testing.T, out *Outcome) {
				if got := out.Filtered["g"].GetNodesFiltered(); got != 1 {
					t.Errorf("diagnostic filtered = %d, want 1", got)
				}
			}},
		{name: "6 exhausted: blocked eval pinned to the node", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1"), tNode("n2", full), tNode("n3", full)})
			},
			placed: []string{"n1/j.g[0]"}, blocked: []string{"n2"}, failed: []string{"g"},
			queued: map[string]int32{"g": 3},
			check: func(t *testing.T, out *Outcome) {
				m := out.Response.GetFailedTgAllocs()["g"]
				if m.GetDimensionExhausted()["cpu"] != 1 || m.GetCoalescedFailures() != 1 || m.GetNodesAvailable()["dc1"] != 3 {
					t.Errorf("metric = %v", m)
				}
			}},

		// 7. Queued allocations.
		{name: "7 success: queued counts what the core will subtract", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob(sb), []*schedulerpb.Node{tNode("n1"), tNode("n2", windows)})
			},
			placed: []string{"n1/j.g[0]"}, queued: map[string]int32{"g": 1}},
		{name: "7 nothing to place: every group 0", engine: sysbatchEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				j := tJob(sb)
				j.TaskGroups = append(j.TaskGroups, &schedulerpb.TaskGroup{Name: "h", Count: 1,
					Tasks: []*schedulerpb.Task{{Name: "t", Driver: "exec"}}})
				return tReq(j, nil)
			},
			queued: map[string]int32{"g": 0, "h": 0}},
	})
}

// TestTriggers covers §10.9 and the refusal wording of §2.2.
func TestTriggers(t *testing.T) {
	cases := []struct {
		trigger          string
		sysbatch, system bool
	}{
		{TriggerPeriodicJob, true, false},
		{TriggerJobRegister, true, true},
		{TriggerNodeUpdate, true, true},
		{TriggerJobDeregister, true, true},
		{TriggerAllocStop, true, true},
		{TriggerQueuedAllocs, true, true},
		{TriggerReconnect, true, true},
		{TriggerPreemption, true, true},
		{"scheduled", false, false},
		{"max-disconnect-timeout", false, false},
		{"", false, false},
	}
	for _, c := range cases {
		for _, e := range []struct {
			engine *Engine
			want   bool
		}{{sysbatchEngine(), c.sysbatch}, {systemEngine(), c.system}} {
			req := tReq(tJob("sysbatch"), []*schedulerpb.Node{tNode("n1")})
			req.Eval.TriggeredBy = c.trigger
			resp, err := e.engine.Schedule(req)
			if err != nil {
				t.Fatal(err)
			}
			if accepted := resp.GetStatus() == ""; accepted != e.want {
				t.Errorf("trigger %q (sysbatch=%v): accepted=%v, want %v", c.trigger, e.engine.opts.Sysbatch, accepted, e.want)
			}
			if !e.want {
				want := "scheduler cannot handle '" + c.trigger + "' evaluation reason"
				if resp.GetStatus() != EvalStatusFailed || resp.GetStatusDescription() != want || resp.GetPlan() != nil {
					t.Errorf("refusal = %v", resp)
				}
			}
		}
	}
	if _, err := sysbatchEngine().Schedule(&schedulerpb.ScheduleRequest{}); err == nil {
		t.Error("a request without an eval must be an error")
	}
}

func TestAllocIDs(t *testing.T) {
	id := AllocID("e1", 1, "n1", "j.g[0]")
	if len(id) != 36 || strings.Count(id, "-") != 4 || id[14] != '8' || !strings.ContainsRune("89ab", rune(id[19])) {
		t.Fatalf("AllocID = %q, not a version-8 UUID", id)
	}
	if AllocID("e1", 1, "n1", "j.g[0]") != id {
		t.Fatal("AllocID not deterministic")
	}
	for _, other := range []string{
		AllocID("e2", 1, "n1", "j.g[0]"), AllocID("e1", 2, "n1", "j.g[0]"),
		AllocID("e1", 1, "n2", "j.g[0]"), AllocID("e1", 1, "n1", "j.g[1]"),
		AllocID("e1", 1, "n1j", ".g[0]"),
	} {
		if other == id {
			t.Errorf("collision: %s", other)
		}
	}
	// A retried attempt never reuses an ID of the earlier one.
	req := tReq(tJob("sysbatch"), []*schedulerpb.Node{tNode("n1")})
	first := runEngine(t, sysbatchEngine(), req).Response.GetPlan().GetNodeAllocation()[0].GetId()
	req.Attempt = 2
	second := runEngine(t, sysbatchEngine(), req).Response.GetPlan().GetNodeAllocation()[0].GetId()
	if first == second || first != AllocID("e1", 1, "n1", "j.g[0]") {
		t.Errorf("attempt IDs %s, %s", first, second)
	}
}

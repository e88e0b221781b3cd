package countsched

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// The conformance kit serves the engine over gRPC: its goroutines must end
// with each test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// engine serves the engine with cfg as a scheduler, so the conformance
// kit can hold each configuration to the rules every scheduler keeps.
type engine struct{ cfg Config }

func (e engine) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{Name: "countsched-test", Version: "test", JobTypes: []*schedulerpb.JobTypeInfo{
		{Name: "count", MaxAttempts: 3},
	}}, nil
}

func (e engine) Schedule(_ context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	return Schedule(req, e.cfg).Response, nil
}

func holdAll(*schedulerpb.Allocation, bool) Finish { return Hold }

// Both ways the engine is meant to be used — batch's (finished allocs hold
// their index, nothing paced) and service's (finished allocs replaced,
// updates and migrations paced) — keep the kit's rules.
func TestConformance(t *testing.T) {
	for name, cfg := range map[string]Config{
		"batch-like":   {},
		"service-like": {Finished: func(*schedulerpb.Allocation, bool) Finish { return Reschedule }, PaceUpdates: true, PaceMigrations: true},
	} {
		t.Run(name, func(t *testing.T) { conformance.Run(t, engine{cfg}, conformance.Options{}) })
	}
}

// outcome is what a test reads of a response.
type outcome struct {
	stopped  []string          // stopped alloc IDs
	placed   map[string]string // new alloc name -> previous alloc
	nodes    map[string]string // new alloc name -> node
	inPlace  []string
	heldBack int
}

func schedule(req *schedulerpb.ScheduleRequest, cfg Config) outcome {
	res := Schedule(req, cfg)
	o := outcome{placed: map[string]string{}, nodes: map[string]string{}, heldBack: res.HeldBack}
	for _, s := range res.Response.GetPlan().GetNodeUpdate() {
		o.stopped = append(o.stopped, s.GetAllocId())
	}
	for _, p := range res.Response.GetPlan().GetNodeAllocation() {
		if p.GetInPlace() {
			o.inPlace = append(o.inPlace, p.GetId())
			continue
		}
		o.placed[p.GetName()] = p.GetPreviousAllocation()
		o.nodes[p.GetName()] = p.GetNodeId()
	}
	slices.Sort(o.stopped)
	slices.Sort(o.inPlace)
	return o
}

// immediate is a reschedule policy whose every failure is due at once.
func immediate(b *conformance.Builder) *conformance.Builder {
	return b.Edit(func(r *schedulerpb.ScheduleRequest) {
		r.NowNs = 1
		for _, tg := range r.GetJob().GetTaskGroups() {
			tg.ReschedulePolicy = &schedulerpb.ReschedulePolicy{DelayFunction: "constant", Unlimited: true}
		}
	})
}

func TestFinishedFates(t *testing.T) {
	req := func() *conformance.Builder {
		return immediate(conformance.NewBuilder("count").Node("n1").Node("n2").Group("web", 2).
			Alloc("web", "n1", 0, conformance.ClientStatus("failed")).
			Alloc("web", "n1", 1, conformance.ClientStatus("complete")))
	}
	fate := func(failed, complete Finish) FinishedFunc {
		return func(a *schedulerpb.Allocation, _ bool) Finish {
			if a.GetClientStatus() == "failed" {
				return failed
			}
			return complete
		}
	}
	cases := []struct {
		name   string
		req    *schedulerpb.ScheduleRequest
		cfg    Config
		placed map[string]string
	}{
		{"nil hook holds", req().Request(), Config{}, map[string]string{}},
		{"hold", req().Request(), Config{Finished: holdAll}, map[string]string{}},
		{"place and replace", req().Request(), Config{Finished: fate(Replace, Place)},
			map[string]string{"kit.web[0]": "alloc-1", "kit.web[1]": ""}},
		{"reschedule", req().Request(), Config{Finished: fate(Reschedule, Hold)}, map[string]string{"kit.web[0]": "alloc-1"}},
		{"nil hook replaces after a destructive change", req().NewVersion(conformance.DestructiveChange).Request(), Config{},
			map[string]string{"kit.web[0]": "alloc-1", "kit.web[1]": "alloc-2"}},
	}
	for _, c := range cases {
		if got := schedule(c.req, c.cfg); !maps.Equal(got.placed, c.placed) {
			t.Errorf("%s: placed %v, want %v", c.name, got.placed, c.placed)
		}
	}
}

// A rescheduled alloc's replacement avoids the node it failed on, which is
// otherwise the better (fuller) one.
func TestReschedulePrefersAnotherNode(t *testing.T) {
	req := immediate(conformance.NewBuilder("count").Node("n1").Node("n2").Group("web", 1).
		Alloc("web", "n1", 0, conformance.ClientStatus("failed")).
		OtherJobAlloc("n1", "other-1", 50, &schedulerpb.Resources{Cpu: 1000, MemoryMb: 1000})).Request()
	for fate, want := range map[Finish]string{Replace: "n1", Reschedule: "n2"} {
		cfg := Config{Finished: func(*schedulerpb.Allocation, bool) Finish { return fate }}
		if got := schedule(req, cfg).nodes["kit.web[0]"]; got != want {
			t.Errorf("fate %d: placed on %s, want %s", fate, got, want)
		}
	}
}

// TestRescheduleByPolicy: Reschedule follows the group's reschedule
// policy against the request's clock (now_ns): due now, the index is
// replaced with the lineage's tracker; due later, it is held and marked
// with one follow-up eval due then; not eligible, it is held and the count
// runs short; forced, it is replaced whatever the policy; already marked,
// it waits for its eval unless that eval is the one running.
func TestRescheduleByPolicy(t *testing.T) {
	const failedAt = int64(1_000_000_000_000)
	const s = int64(time.Second)
	policy := &schedulerpb.ReschedulePolicy{Attempts: 1, IntervalNs: 3600 * s, DelayNs: 10 * s, DelayFunction: "constant"}
	build := func(nowNs int64, edit func(a *schedulerpb.Allocation)) *schedulerpb.ScheduleRequest {
		return conformance.NewBuilder("count").Node("n1").Node("n2").Group("web", 1).
			Alloc("web", "n1", 0, conformance.ClientStatus("failed")).
			Edit(func(r *schedulerpb.ScheduleRequest) {
				r.NowNs = nowNs
				r.GetJob().GetTaskGroups()[0].ReschedulePolicy = policy
				a := r.GetAllocs()[0]
				a.ModifyTimeNs = failedAt
				if edit != nil {
					edit(a)
				}
			}).Request()
	}
	used := func(a *schedulerpb.Allocation) {
		a.RescheduleEvents = []*schedulerpb.RescheduleEvent{{RescheduleTimeNs: failedAt - 60*s, PrevNodeId: "n2", DelayNs: 10 * s}}
	}
	cases := []struct {
		name         string
		req          *schedulerpb.ScheduleRequest
		placedOn     string // "" when nothing is placed
		events       int
		followupAtNs int64 // 0 when no follow-up eval
		later, now   uint64
	}{
		{"due", build(failedAt+10*s, nil), "n2", 1, 0, 0, 1},
		{"not yet due", build(failedAt+9*s, nil), "", 0, failedAt + 10*s, 1, 0},
		{"older core: no clock, nothing past the failure", build(0, nil), "", 0, failedAt + 10*s, 1, 0},
		{"attempts used up", build(failedAt+time.Hour.Nanoseconds(), used), "", 0, 0, 0, 0},
		{"forced", build(failedAt+s, func(a *schedulerpb.Allocation) { used(a); a.ForceReschedule = true }), "n1", 2, 0, 0, 1},
		{"marked, its eval pending", build(failedAt+s, func(a *schedulerpb.Allocation) { a.FollowupEvalId = "other-eval" }), "", 0, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := Schedule(tc.req, Config{Finished: func(*schedulerpb.Allocation, bool) Finish { return Reschedule }}).Response
			placed := resp.GetPlan().GetNodeAllocation()
			switch {
			case tc.placedOn == "" && len(placed) != 0:
				t.Fatalf("placed %v, want nothing", placed)
			case tc.placedOn != "" && (len(placed) != 1 || placed[0].GetNodeId() != tc.placedOn ||
				placed[0].GetPreviousAllocation() != tc.req.GetAllocs()[0].GetId() || len(placed[0].GetRescheduleEvents()) != tc.events):
				t.Fatalf("placed %v, want one replacement on %s with %d events", placed, tc.placedOn, tc.events)
			}
			evals := resp.GetFollowupEvals()
			if tc.followupAtNs == 0 {
				if len(evals) != 0 || len(resp.GetPlan().GetAllocFollowups()) != 0 {
					t.Fatalf("follow-ups %v %v, want none", evals, resp.GetPlan().GetAllocFollowups())
				}
			} else if len(evals) != 1 || evals[0].GetWaitUntilNs() != tc.followupAtNs ||
				len(resp.GetPlan().GetAllocFollowups()) != 1 || resp.GetPlan().GetAllocFollowups()[0].GetFollowupEvalId() != evals[0].GetId() {
				t.Fatalf("follow-ups %v %v, want one due at %d marking the alloc", evals, resp.GetPlan().GetAllocFollowups(), tc.followupAtNs)
			}
			d := resp.GetPlan().GetDesiredTgUpdates()["web"]
			if d.GetRescheduleLater() != tc.later || d.GetRescheduleNow() != tc.now {
				t.Fatalf("desired %v, want reschedule_later %d reschedule_now %d", d, tc.later, tc.now)
			}
		})
	}
}

func TestPacing(t *testing.T) {
	changed := func(pace int32) *schedulerpb.ScheduleRequest {
		return conformance.NewBuilder("count").Node("n1").Group("web", 3).
			Alloc("web", "n1", 0).Alloc("web", "n1", 1).Alloc("web", "n1", 2).
			NewVersion(func(j *schedulerpb.Job) {
				conformance.DestructiveChange(j)
				j.UpdateMaxParallel = pace
			}).Request()
	}
	draining := func(pace int32) *schedulerpb.ScheduleRequest {
		return conformance.NewBuilder("count").Node("n1", conformance.Draining()).Node("n2").Group("web", 3).
			Edit(func(r *schedulerpb.ScheduleRequest) { r.Job.TaskGroups[0].MigrateMaxParallel = pace }).
			Alloc("web", "n1", 0, conformance.Migrate()).Alloc("web", "n1", 1, conformance.Migrate()).
			Alloc("web", "n1", 2, conformance.Migrate()).Request()
	}
	paced := Config{PaceUpdates: true, PaceMigrations: true}
	cases := []struct {
		name            string
		req             *schedulerpb.ScheduleRequest
		cfg             Config
		stopped, placed int
		heldBack        int
	}{
		{"updates unpaced", changed(1), Config{}, 3, 3, 0},
		{"updates paced by job max_parallel", changed(1), paced, 1, 1, 2},
		{"updates unset max_parallel unlimited", changed(0), paced, 3, 3, 0},
		{"migrations unpaced", draining(2), Config{}, 3, 3, 0},
		{"migrations paced", draining(2), paced, 2, 2, 1},
		{"migrations default one", draining(0), paced, 1, 1, 2},
	}
	for _, c := range cases {
		got := schedule(c.req, c.cfg)
		if len(got.stopped) != c.stopped || len(got.placed) != c.placed || got.heldBack != c.heldBack {
			t.Errorf("%s: stopped %d placed %d held back %d, want %d %d %d", c.name,
				len(got.stopped), len(got.placed), got.heldBack, c.stopped, c.placed, c.heldBack)
		}
	}
}

// Updates and migrations in flight (stopped, replacement not running yet)
// count against the limit; once the replacement runs, they do not. With a
// migrate block, a migration is in flight until its replacement is healthy
// (an unhealthy one keeps it so); past the drain deadline nothing is paced.
func TestInFlight(t *testing.T) {
	healthy, unhealthy := schedulerpb.AllocHealth_ALLOC_HEALTH_HEALTHY, schedulerpb.AllocHealth_ALLOC_HEALTH_UNHEALTHY
	migrate := &schedulerpb.MigrateStrategy{MaxParallel: 1, HealthCheck: "task_states", MinHealthyTimeNs: int64(10 * time.Second)}
	cases := []struct {
		name        string
		replacement string
		health      schedulerpb.AllocHealth
		block       *schedulerpb.MigrateStrategy
		forced      bool
		wantStopped []string
		wantHeld    int
	}{
		{"replacement pending", "pending", 0, nil, false, nil, 1},
		{"replacement running", "running", 0, nil, false, []string{"alloc-3"}, 0},
		{"migrate block: running, health not yet judged", "running", 0, migrate, false, nil, 1},
		{"migrate block: running and healthy", "running", healthy, migrate, false, []string{"alloc-3"}, 0},
		{"migrate block: running but unhealthy", "running", unhealthy, migrate, false, nil, 1},
		{"migrate block: healthy but pending again", "pending", healthy, migrate, false, nil, 1},
		{"drain deadline passed", "pending", 0, migrate, true, []string{"alloc-3"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var nodeOpts []conformance.NodeOption
			nodeOpts = append(nodeOpts, conformance.Draining())
			if c.forced {
				nodeOpts = append(nodeOpts, func(n *schedulerpb.Node) { n.DrainDeadlinePassed = true })
			}
			req := conformance.NewBuilder("count").Node("n1", nodeOpts...).Node("n2").Group("web", 2).
				Edit(func(r *schedulerpb.ScheduleRequest) { r.Job.TaskGroups[0].Migrate = c.block }).
				Alloc("web", "n1", 0, conformance.Migrate(), func(a *schedulerpb.Allocation) { a.DesiredStatus = "stop"; a.ClientStatus = "complete" }).
				Alloc("web", "n2", 0, conformance.ClientStatus(c.replacement), func(a *schedulerpb.Allocation) { a.CreateIndex = 50; a.Healthy = c.health }).
				Alloc("web", "n1", 1, conformance.Migrate()).Request()
			got := schedule(req, Config{PaceMigrations: true})
			if !slices.Equal(got.stopped, c.wantStopped) || got.heldBack != c.wantHeld {
				t.Errorf("stopped %v held back %d, want %v, %d", got.stopped, got.heldBack, c.wantStopped, c.wantHeld)
			}
		})
	}
}

// An alloc whose name carries no index is stopped, not taken for index 0.
func TestMalformedNameStopped(t *testing.T) {
	req := conformance.NewBuilder("count").Node("n1").Group("web", 1).Alloc("web", "n1", 0).
		Edit(func(r *schedulerpb.ScheduleRequest) { r.Allocs[0].Name = "kit.web" }).Request()
	got := schedule(req, Config{})
	if !slices.Equal(got.stopped, []string{"alloc-1"}) || got.placed["kit.web[0]"] != "" || len(got.placed) != 1 {
		t.Errorf("stopped %v placed %v; want alloc-1 stopped and index 0 placed", got.stopped, got.placed)
	}
}

// Job anti-affinity spreads a group over equally fitting nodes; without it
// the group packs onto the fullest node.
func TestJobAntiAffinitySwitch(t *testing.T) {
	req := conformance.NewBuilder("count").Node("n1").Node("n2").Group("web", 3).
		OtherJobAlloc("n1", "other-1", 50, &schedulerpb.Resources{Cpu: 500, MemoryMb: 500}).Request()
	for _, c := range []struct {
		cfg  Config
		want map[string]string
	}{
		{Config{}, map[string]string{"kit.web[0]": "n1", "kit.web[1]": "n2", "kit.web[2]": "n1"}},
		{Config{NoJobAntiAffinity: true}, map[string]string{"kit.web[0]": "n1", "kit.web[1]": "n1", "kit.web[2]": "n1"}},
	} {
		if got := schedule(req, c.cfg).nodes; !maps.Equal(got, c.want) {
			t.Errorf("NoJobAntiAffinity=%v: placed %v, want %v", c.cfg.NoJobAntiAffinity, got, c.want)
		}
	}
}

// A single-node-writer CSI volume is claimed by the first placement of the
// plan: the group's second allocation finds it taken on every node, so the
// verdict of the feasibility chain is taken per placement, not once.
func TestCSIClaimsOfThePlan(t *testing.T) {
	req := conformance.NewBuilder("count").Nodes(3).Group("g", 2).Edit(func(r *schedulerpb.ScheduleRequest) {
		for _, tg := range r.GetJob().GetTaskGroups() {
			if tg.GetName() == "g" { // the builder's "web" claims nothing
				tg.Volumes = []*schedulerpb.VolumeRequest{{Name: "data", Type: "csi", Source: "vol",
					AccessMode: "single-node-writer", AttachmentMode: "file-system"}}
			}
		}
		for _, n := range r.GetNodes() {
			n.CsiNodePlugins = []*schedulerpb.CSINodePlugin{{PluginId: "hp", Healthy: true}}
		}
		r.CsiVolumes = []*schedulerpb.CSIVolume{{Namespace: conformance.Namespace, Id: "vol", PluginId: "hp", Schedulable: true,
			ReadSchedulable: true, WriteSchedulable: true, HasFreeReadClaims: true, HasFreeWriteClaims: true}}
	}).Request()
	for name, cfg := range map[string]Config{"batch-like": {NoJobAntiAffinity: true}, "service-like": {PaceUpdates: true}} {
		resp := Schedule(req, cfg).Response
		n := 0
		for _, p := range resp.GetPlan().GetNodeAllocation() {
			if p.GetTaskGroup() == "g" {
				n++
			}
		}
		if n != 1 || resp.GetFailedTgAllocs()["g"] == nil {
			t.Errorf("%s: placed %d, failed %v; want 1 placed and the other failed", name, n, resp.GetFailedTgAllocs())
		}
	}
}

package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// seedFailed stores a job (sysbatch: the fake scheduler serves it; the
// core knows no type's rescheduling) with one failed alloc on a ready node.
func seedFailed(t *testing.T, s *Server, id string) (*structs.Job, *structs.Allocation) {
	t.Helper()
	job := testJob(id, "sysbatch")
	job.Canonicalize()
	n := testNode("n-" + id)
	n.Status, n.SchedulingEligibility = structs.NodeStatusReady, structs.NodeSchedulingEligible
	a := newPlanAlloc(job, n.ID, 100, 64)
	a.ClientStatus = structs.AllocClientStatusFailed
	stored := seedServer(t, s, job, []*structs.Node{n}, []*structs.Allocation{a})
	got, _ := s.State().AllocByID(nil, a.ID)
	return stored, got
}

// TestWorkerCommitsFollowups: a plugin's follow-up eval is created with
// the plan, in the same Raft entry as the mark of the failed alloc, with
// the job's identity, trigger alloc-failure and the wait asked; the alloc
// changes nothing but its FollowupEvalID.
func TestWorkerCommitsFollowups(t *testing.T) {
	var allocID string
	followup := uuid.NewString()
	wait := time.Now().Add(time.Hour).Truncate(time.Second)
	fs := &funcSched{schedule: func(_ context.Context, _ int, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		return &pb.ScheduleResponse{
			Plan: &pb.Plan{
				AllocFollowups:   []*pb.AllocFollowup{{AllocId: allocID, FollowupEvalId: followup}},
				DesiredTgUpdates: map[string]*pb.DesiredUpdates{"g": {Ignore: 1, RescheduleLater: 1}},
			},
			FollowupEvals: []*pb.FollowupEval{{Id: followup, WaitUntilNs: wait.UnixNano()}},
		}, nil
	}}
	s := testServer(t, func(c *Config) { c.Schedulers = fakeRouter{sched: fs, maxAttempts: 2} })
	job, failed := seedFailed(t, s, "fu")
	allocID = failed.ID
	ev := s.newEval(job, structs.EvalTriggerFailedFollowUp)
	ev.JobModifyIndex = job.JobModifyIndex
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{ev}}); err != nil {
		t.Fatal(err)
	}
	done := waitEvalTerminal(t, s, ev.ID)
	if done.Status != structs.EvalStatusComplete {
		t.Fatalf("eval = %s %q", done.Status, done.StatusDescription)
	}
	fe, _ := s.State().EvalByID(nil, followup)
	if fe == nil {
		t.Fatal("the follow-up eval was not created")
	}
	if fe.TriggeredBy != structs.EvalTriggerRetryFailedAlloc || fe.Status != structs.EvalStatusPending ||
		!fe.WaitUntil.Equal(wait) || fe.JobID != job.ID || fe.Namespace != job.Namespace || fe.Priority != job.Priority ||
		fe.Type != job.Type || fe.JobModifyIndex != job.JobModifyIndex || fe.PreviousEval != ev.ID {
		t.Fatalf("follow-up eval = %+v", fe)
	}
	a, _ := s.State().AllocByID(nil, failed.ID)
	if a.FollowupEvalID != followup {
		t.Fatalf("alloc FollowupEvalID = %q, want %q", a.FollowupEvalID, followup)
	}
	if a.DesiredStatus != failed.DesiredStatus || a.ClientStatus != structs.AllocClientStatusFailed || a.ModifyTime != failed.ModifyTime {
		t.Fatalf("alloc changed beyond its mark: desired %q client %q modify time %d (was %d)", a.DesiredStatus, a.ClientStatus, a.ModifyTime, failed.ModifyTime)
	}
	if fe.CreateIndex != a.ModifyIndex {
		t.Fatalf("eval created at %d, alloc marked at %d: not one Raft entry", fe.CreateIndex, a.ModifyIndex)
	}
	// The request carried the alloc's change time for the plugin's delay.
	req := fs.calls()[0]
	if len(req.Allocs) != 1 || req.Allocs[0].ModifyTimeNs != failed.ModifyTime || req.Allocs[0].ModifyTimeNs == 0 {
		t.Fatalf("request allocs = %v", req.Allocs)
	}
}

// TestApplyPlanFollowupsOnce: a retried attempt names the same follow-up
// eval; one that already ran is left as it is, not made pending again.
func TestApplyPlanFollowupsOnce(t *testing.T) {
	s := testServer(t, nil)
	job, failed := seedFailed(t, s, "once")
	id := uuid.NewString()
	followups := func() *structs.Plan {
		p := newPlan(job)
		p.FollowupEvals = []*structs.Evaluation{{
			ID: id, Namespace: job.Namespace, JobID: job.ID, Type: job.Type, Priority: job.Priority,
			TriggeredBy: structs.EvalTriggerRetryFailedAlloc, Status: structs.EvalStatusPending,
			WaitUntil: time.Now().Add(time.Hour),
		}}
		p.AllocFollowups = []*structs.AllocFollowup{{AllocID: failed.ID, FollowupEvalID: id}}
		return p
	}
	if _, err := s.plans.Apply(context.Background(), followups()); err != nil {
		t.Fatal(err)
	}
	fe, _ := s.State().EvalByID(nil, id)
	if fe == nil {
		t.Fatal("follow-up eval not created by a plan of follow-ups only")
	}
	c := fe.Copy()
	c.Status = structs.EvalStatusComplete
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{c}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.plans.Apply(context.Background(), followups()); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.State().EvalByID(nil, id); again.Status != structs.EvalStatusComplete {
		t.Fatalf("the retried plan rewrote the follow-up eval: status %q", again.Status)
	}
	if a, _ := s.State().AllocByID(nil, failed.ID); a.FollowupEvalID != id {
		t.Fatalf("alloc FollowupEvalID = %q", a.FollowupEvalID)
	}
}

// TestConvertFollowups holds the plugin's follow-ups to the rules: a bad
// one refuses the whole response with ErrInvalid naming the field.
func TestConvertFollowups(t *testing.T) {
	s := testServer(t, nil)
	job, failed := seedFailed(t, s, "conv")
	other, otherAlloc := seedFailed(t, s, "other")
	otherEval := s.newEval(other, structs.EvalTriggerJobRegister)
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{otherEval}}); err != nil {
		t.Fatal(err)
	}
	ev := s.newEval(job, structs.EvalTriggerFailedFollowUp)
	now := s.cfg.Now()
	good := uuid.NewString()
	later := now.Add(time.Minute).UnixNano()
	resp := func(fes []*pb.FollowupEval, marks ...*pb.AllocFollowup) *pb.ScheduleResponse {
		return &pb.ScheduleResponse{FollowupEvals: fes, Plan: &pb.Plan{AllocFollowups: marks}}
	}
	mark := func(alloc, eval string) *pb.AllocFollowup {
		return &pb.AllocFollowup{AllocId: alloc, FollowupEvalId: eval}
	}
	many := make([]*pb.FollowupEval, schedio.MaxFollowupEvals+1)
	for i := range many {
		many[i] = &pb.FollowupEval{Id: uuid.NewString(), WaitUntilNs: later}
	}
	cases := []struct {
		name string
		resp *pb.ScheduleResponse
		want string // substring of the error; "" = accepted
	}{
		{"valid", resp([]*pb.FollowupEval{{Id: good, WaitUntilNs: later}}, mark(failed.ID, good)), ""},
		{"not a UUID", resp([]*pb.FollowupEval{{Id: "eval-1", WaitUntilNs: later}}), `followup_evals[0].id "eval-1" is not a UUID`},
		{"upper-case UUID", resp([]*pb.FollowupEval{{Id: strings.ToUpper(good), WaitUntilNs: later}}), "canonical lowercase"},
		{"twice", resp([]*pb.FollowupEval{{Id: good, WaitUntilNs: later}, {Id: good, WaitUntilNs: later}}), "followup_evals[1].id"},
		{"the eval itself", resp([]*pb.FollowupEval{{Id: ev.ID, WaitUntilNs: later}}), "is the eval being scheduled"},
		{"another job's eval", resp([]*pb.FollowupEval{{Id: otherEval.ID, WaitUntilNs: later}}), "is an eval of another job"},
		{"no wait", resp([]*pb.FollowupEval{{Id: good}}), "followup_evals[0].wait_until_ns 0"},
		{"beyond a year", resp([]*pb.FollowupEval{{Id: good, WaitUntilNs: now.Add(schedio.MaxFollowupWait + time.Hour).UnixNano()}}), "at most 8760h0m0s from now"},
		{"too many", resp(many), "more than the 256 allowed"},
		{"mark of an unknown eval", resp(nil, mark(failed.ID, good)), `plan.alloc_followups[0].followup_eval_id`},
		{"mark of another job's alloc", resp([]*pb.FollowupEval{{Id: good, WaitUntilNs: later}}, mark(otherAlloc.ID, good)), "allocations that are not the job's"},
		{"mark twice", resp([]*pb.FollowupEval{{Id: good, WaitUntilNs: later}}, mark(failed.ID, good), mark(failed.ID, good)), "a second time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := s.State().Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			plan := newPlan(job)
			err = schedio.ConvertFollowups(snap, ev, job, tc.resp, plan, s.cfg.Now())
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(plan.FollowupEvals) != 1 || len(plan.AllocFollowups) != 1 || plan.AllocFollowups[0].AllocID != failed.ID {
					t.Fatalf("plan follow-ups = %v %v", plan.FollowupEvals, plan.AllocFollowups)
				}
				return
			}
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	t.Run("purged job", func(t *testing.T) {
		snap, _ := s.State().Snapshot()
		err := schedio.ConvertFollowups(snap, ev, nil, resp([]*pb.FollowupEval{{Id: good, WaitUntilNs: later}}), newPlan(job), s.cfg.Now())
		if !errors.Is(err, structs.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	})
}

// TestPlacedRescheduleTracker: a placement's reschedule events become the
// new alloc's RescheduleTracker, and a previous_allocation of another job
// is refused.
func TestPlacedRescheduleTracker(t *testing.T) {
	s := testServer(t, nil)
	job, failed := seedFailed(t, s, "track")
	_, otherAlloc := seedFailed(t, s, "track-other")
	ev := s.newEval(job, structs.EvalTriggerRetryFailedAlloc)
	placed := func(prev string) *pb.Plan {
		return &pb.Plan{NodeAllocation: []*pb.PlacedAlloc{{
			Id: uuid.NewString(), Name: job.ID + ".g[0]", NodeId: failed.NodeID, TaskGroup: "g", PreviousAllocation: prev,
			TaskResources:    map[string]*pb.Resources{"t": {Cpu: 100, MemoryMb: 64}},
			RescheduleEvents: []*pb.RescheduleEvent{{RescheduleTimeNs: 42, PrevAllocId: prev, PrevNodeId: failed.NodeID, DelayNs: int64(5 * time.Second)}},
		}}}
	}
	snap, _ := s.State().Snapshot()
	plan, _, err := schedio.ConvertPlan(snap, ev, "", job, placed(failed.ID), s.cfg.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := plan.NodeAllocation[failed.NodeID][0].RescheduleTracker
	want := structs.RescheduleEvent{RescheduleTime: 42, PrevAllocID: failed.ID, PrevNodeID: failed.NodeID, Delay: 5 * time.Second}
	if got == nil || len(got.Events) != 1 || *got.Events[0] != want {
		t.Fatalf("tracker = %+v, want one event %+v", got, want)
	}
	if _, err := s.plans.Apply(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	prev, _ := s.State().AllocByID(nil, failed.ID)
	if prev.NextAllocation != plan.NodeAllocation[failed.NodeID][0].ID {
		t.Fatalf("previous alloc's NextAllocation = %q", prev.NextAllocation)
	}
	_, _, err = schedio.ConvertPlan(snap, ev, "", job, placed(otherAlloc.ID), s.cfg.Now())
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), otherAlloc.ID) {
		t.Fatalf("a previous_allocation of another job: err = %v, want ErrInvalid naming it", err)
	}
	long := placed(failed.ID)
	pa := long.NodeAllocation[0]
	for len(pa.RescheduleEvents) <= schedio.MaxRescheduleEvents {
		pa.RescheduleEvents = append(pa.RescheduleEvents, pa.RescheduleEvents[0])
	}
	_, _, err = schedio.ConvertPlan(snap, ev, "", job, long, s.cfg.Now())
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "node_allocation[0]") || !strings.Contains(err.Error(), "more than the 1024 allowed") {
		t.Fatalf("a tracker over the bound: err = %v, want ErrInvalid naming the placement and the bound", err)
	}
}

// TestReschedulesByPolicy: a failure its group's reschedule policy paces
// skips the crash-loop backoff; anything else keeps it.
func TestReschedulesByPolicy(t *testing.T) {
	with := testJob("w", "batch")
	with.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 1}
	without := testJob("wo", "system")
	// A service group that sets no reschedule block gets the type's
	// declared default at canonicalisation, so its failures skip the
	// backoff too.
	service := testJob("svc", "service")
	service.Canonicalize()
	cases := []struct {
		name   string
		alloc  *structs.Allocation
		status string
		want   bool
	}{
		{"failed with a policy", &structs.Allocation{Job: with, TaskGroup: "g"}, structs.AllocClientStatusFailed, true},
		{"complete with a policy", &structs.Allocation{Job: with, TaskGroup: "g"}, structs.AllocClientStatusComplete, false},
		{"failed without a policy", &structs.Allocation{Job: without, TaskGroup: "g"}, structs.AllocClientStatusFailed, false},
		{"service failed, default policy", &structs.Allocation{Job: service, TaskGroup: "g"}, structs.AllocClientStatusFailed, true},
		{"failed, group gone", &structs.Allocation{Job: with, TaskGroup: "x"}, structs.AllocClientStatusFailed, false},
		{"failed, no job", &structs.Allocation{TaskGroup: "g"}, structs.AllocClientStatusFailed, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := reschedulesByPolicy(tc.alloc, tc.status); got != tc.want {
				t.Fatalf("reschedulesByPolicy = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRequestClearsSpentFollowup: an alloc's follow-up eval reaches the
// plugin while it is still to run, or when it is the eval being scheduled;
// once it finished without replacing the alloc it is left out, so the
// plugin decides afresh instead of waiting for it forever.
func TestRequestClearsSpentFollowup(t *testing.T) {
	s := testServer(t, nil)
	job, failed := seedFailed(t, s, "spent")
	pending := s.newEval(job, structs.EvalTriggerRetryFailedAlloc)
	pending.WaitUntil = time.Now().Add(time.Hour)
	done := s.newEval(job, structs.EvalTriggerRetryFailedAlloc)
	done.Status = structs.EvalStatusComplete
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{pending, done}}); err != nil {
		t.Fatal(err)
	}
	other := s.newEval(job, structs.EvalTriggerQueuedAllocs)
	cases := []struct {
		name     string
		followup string
		running  *structs.Evaluation
		want     string
	}{
		{"still to run", pending.ID, other, pending.ID},
		{"finished", done.ID, other, ""},
		{"gone", uuid.NewString(), other, ""},
		{"the eval being scheduled", done.ID, done, done.ID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.plans.Apply(context.Background(), &structs.Plan{
				EvalID: uuid.NewString(), Job: job,
				AllocFollowups: []*structs.AllocFollowup{{AllocID: failed.ID, FollowupEvalID: tc.followup}},
			}); err != nil {
				t.Fatal(err)
			}
			snap, err := s.State().Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			req, err := schedio.BuildRequest(snap, s.nodeCache, tc.running, job, 1, s.cfg.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Allocs) != 1 || req.Allocs[0].FollowupEvalId != tc.want {
				t.Fatalf("followup_eval_id = %q, want %q", req.Allocs[0].GetFollowupEvalId(), tc.want)
			}
		})
	}
}

// TestRequestClockAndForceReschedule: the request carries the core's clock
// (now_ns) and an alloc's DesiredTransition.ForceReschedule, the two facts
// a reschedule decision needs beyond the alloc's own history.
func TestRequestClockAndForceReschedule(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			s := testServer(t, func(c *Config) { c.Now = func() time.Time { return now } })
			job, failed := seedFailed(t, s, "clock")
			if force {
				if _, err := s.raftApply(structs.AllocUpdateDesiredTransitionRequestType, &structs.AllocUpdateDesiredTransitionRequest{
					Allocs: map[string]*structs.DesiredTransition{failed.ID: {ForceReschedule: &force}},
				}); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := s.State().Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			req, err := schedio.BuildRequest(snap, s.nodeCache, s.newEval(job, structs.EvalTriggerJobRegister), job, 1, s.cfg.Now())
			if err != nil {
				t.Fatal(err)
			}
			if req.GetNowNs() != now.UnixNano() {
				t.Fatalf("now_ns = %d, want %d", req.GetNowNs(), now.UnixNano())
			}
			if len(req.GetAllocs()) != 1 || req.GetAllocs()[0].GetForceReschedule() != force {
				t.Fatalf("force_reschedule = %v, want %v", req.GetAllocs()[0].GetForceReschedule(), force)
			}
		})
	}
}

// TestEvaluateForceReschedule: a forced evaluation with ForceReschedule
// marks the job's failed allocs not yet replaced in the same Raft entry as
// its eval; without it nothing is marked.
func TestEvaluateForceReschedule(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			s := testServer(t, nil)
			job, failed := seedFailed(t, s, "force")
			resp, err := s.Jobs().Evaluate(context.Background(), job.Namespace, job.ID, structs.EvalOptions{ForceReschedule: force})
			if err != nil {
				t.Fatal(err)
			}
			ev, err := s.State().EvalByID(nil, resp.EvalID)
			if err != nil || ev == nil {
				t.Fatalf("eval %s: %v %v", resp.EvalID, ev, err)
			}
			a, _ := s.State().AllocByID(nil, failed.ID)
			marked := a.DesiredTransition.ForceReschedule != nil && *a.DesiredTransition.ForceReschedule
			if marked != force {
				t.Fatalf("ForceReschedule = %v, want %v", marked, force)
			}
			if force && (a.ModifyIndex != ev.CreateIndex || ev.CreateIndex != resp.EvalCreateIndex) {
				t.Fatalf("alloc modify index %d, eval create index %d, response %d: not one entry", a.ModifyIndex, ev.CreateIndex, resp.EvalCreateIndex)
			}
		})
	}
}

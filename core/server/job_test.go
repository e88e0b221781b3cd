package server

import (
	"context"
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestRegisterUnchangedJob(t *testing.T) {
	s := testServer(t, nil)
	registerNodes(t, s, testNode("a"))
	first := registerJob(t, s, testJob("j", "sysbatch"))
	waitEvalTerminal(t, s, first.EvalID)
	if first.Index == 0 || first.JobModifyIndex != first.Index {
		t.Fatalf("first register = %+v", first)
	}

	again := registerJob(t, s, testJob("j", "sysbatch"))
	if again.Index <= first.Index || again.Index != again.EvalCreateIndex || again.JobModifyIndex != first.JobModifyIndex {
		t.Fatalf("unchanged register = %+v, want the eval's write index and JobModifyIndex %d", again, first.JobModifyIndex)
	}
	if again.EvalID == "" || again.EvalID == first.EvalID || again.EvalCreateIndex == 0 {
		t.Fatalf("unchanged register must still create an eval: %+v", again)
	}
	ev := waitEvalTerminal(t, s, again.EvalID)
	if ev.TriggeredBy != structs.EvalTriggerJobRegister || ev.JobModifyIndex != first.JobModifyIndex {
		t.Fatalf("eval = %+v", ev)
	}
	versions, _ := s.State().JobVersionsByID(nil, "default", "j")
	job, _ := s.State().JobByID(nil, "default", "j")
	if len(versions) != 1 || job.Version != 0 {
		t.Fatalf("unchanged register wrote a version: %d versions, version %d", len(versions), job.Version)
	}
	// The sysbatch alloc already ran there: nothing new is placed.
	if allocs, _ := s.State().AllocsByJob(nil, "default", "j", true); len(allocs) != 1 {
		t.Fatalf("allocs = %d", len(allocs))
	}

	changed := testJob("j", "sysbatch")
	changed.Meta = map[string]string{"v": "2"}
	third := registerJob(t, s, changed)
	job, _ = s.State().JobByID(nil, "default", "j")
	if third.Index == 0 || third.JobModifyIndex != third.Index || job.Version != 1 || job.JobModifyIndex != third.Index {
		t.Fatalf("changed register = %+v, job version %d", third, job.Version)
	}
}

func TestRegisterEnforceIndex(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	if _, err := s.Jobs().Register(ctx, testJob("new", "sysbatch"), true, 5); !errors.Is(err, structs.ErrConflict) {
		t.Fatalf("enforce index on a missing job: %v", err)
	}
	if j, _ := s.State().JobByID(nil, "default", "new"); j != nil {
		t.Fatal("a conflicting register wrote the job")
	}
	created, err := s.Jobs().Register(ctx, testJob("new", "sysbatch"), true, 0)
	if err != nil {
		t.Fatalf("enforce 0 on a new job: %v", err)
	}
	waitEvalTerminal(t, s, created.EvalID)
	cases := []struct {
		name  string
		index uint64
		ok    bool
	}{
		{"zero on an existing job", 0, false},
		{"stale index", created.JobModifyIndex - 1, false},
		{"future index", created.JobModifyIndex + 1, false},
		{"current index", created.JobModifyIndex, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := testJob("new", "sysbatch")
			j.Meta = map[string]string{"case": tc.name}
			before := s.State().LatestIndex()
			_, err := s.Jobs().Register(ctx, j, true, tc.index)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, structs.ErrConflict) || structs.HTTPStatus(err) != 409 {
				t.Fatalf("err %v, want a 409 conflict", err)
			}
			if s.State().LatestIndex() != before {
				t.Fatal("a conflicting register wrote")
			}
		})
	}
}

func TestDeregisterJob(t *testing.T) {
	cases := []struct {
		name  string
		purge bool
	}{{"stop", false}, {"purge", true}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testServer(t, nil)
			ctx := context.Background()
			n := testNode("a")
			registerNodes(t, s, n)
			a := runJobOn(t, s, testJob("d", "sysbatch"), n, structs.AllocClientStatusRunning)

			resp, err := s.Jobs().Deregister(ctx, "", "d", tc.purge)
			if err != nil {
				t.Fatal(err)
			}
			if resp.EvalID == "" || resp.Index == 0 {
				t.Fatalf("deregister = %+v", resp)
			}
			ev := waitEvalTerminal(t, s, resp.EvalID)
			if ev.TriggeredBy != structs.EvalTriggerJobDeregister || ev.Status != structs.EvalStatusComplete {
				t.Fatalf("deregister eval = %s %s %s", ev.TriggeredBy, ev.Status, ev.StatusDescription)
			}
			got, _ := s.State().AllocByID(nil, a.ID)
			if got.DesiredStatus != structs.AllocDesiredStatusStop {
				t.Fatalf("alloc desired status = %q after deregister", got.DesiredStatus)
			}
			job, _ := s.State().JobByID(nil, "default", "d")
			switch {
			case tc.purge && job != nil:
				t.Fatal("purged job still present")
			case !tc.purge && (job == nil || !job.Stop):
				t.Fatalf("stopped job = %+v", job)
			}
		})
	}

	s := testServer(t, nil)
	resp, err := s.Jobs().Deregister(context.Background(), "", "ghost", false)
	if err != nil || resp.EvalID != "" || resp.Index != 0 {
		t.Fatalf("deregister of an unknown job = %+v %v", resp, err)
	}
}

func TestPlanJobWritesNothing(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	registerNodes(t, s, testNode("a"), testNode("b"))
	before := s.State().LatestIndex()

	plan, err := s.Jobs().Plan(ctx, testJob("p", "sysbatch"), true)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Annotations == nil || plan.Annotations.DesiredTGUpdates["g"] == nil || plan.Annotations.DesiredTGUpdates["g"].Place != 2 {
		t.Fatalf("annotations = %+v", plan.Annotations)
	}
	if plan.Diff == nil || plan.Diff.Type != "Added" || plan.JobModifyIndex != 0 || plan.Index != before {
		t.Fatalf("plan = %+v", plan)
	}
	if s.State().LatestIndex() != before {
		t.Fatalf("plan wrote: index %d -> %d", before, s.State().LatestIndex())
	}
	if j, _ := s.State().JobByID(nil, "default", "p"); j != nil {
		t.Fatal("plan registered the job")
	}
	if evs, _ := s.State().Evals(nil); len(evs) != 0 {
		t.Fatalf("plan created %d evals", len(evs))
	}

	// Against a registered job: unchanged is a no-op, a task change is a
	// destructive update on both nodes.
	reg := registerJob(t, s, testJob("p", "sysbatch"))
	waitEvalTerminal(t, s, reg.EvalID)
	same, err := s.Jobs().Plan(ctx, testJob("p", "sysbatch"), true)
	if err != nil {
		t.Fatal(err)
	}
	if d := same.Annotations.DesiredTGUpdates["g"]; d.Place != 0 || d.Ignore != 2 || same.Diff.Type != "None" || same.JobModifyIndex != reg.JobModifyIndex {
		t.Fatalf("unchanged plan: %+v diff %s", d, same.Diff.Type)
	}
	changed := testJob("p", "sysbatch")
	changed.TaskGroups[0].Tasks[0].Config = map[string]any{"command": "/bin/false"}
	before = s.State().LatestIndex()
	diff, err := s.Jobs().Plan(ctx, changed, true)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff.Annotations.DesiredTGUpdates["g"]; d.DestructiveUpdate != 2 || diff.Diff.Type != "Edited" {
		t.Fatalf("changed plan: %+v diff %s", d, diff.Diff.Type)
	}
	if s.State().LatestIndex() != before {
		t.Fatal("plan of a changed job wrote")
	}
	if job, _ := s.State().JobByID(nil, "default", "p"); job.Version != 0 {
		t.Fatal("plan bumped the job version")
	}
}

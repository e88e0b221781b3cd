package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/evalbroker"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

func TestParseEvalFilter(t *testing.T) {
	e := &structs.Evaluation{ID: "e1", Namespace: "default", JobID: "web", Status: "failed", Type: "service", TriggeredBy: "job-register"}
	tests := []struct {
		filter  string
		match   bool
		wantErr string
	}{
		{filter: `Status == "failed"`, match: true},
		{filter: `Status == "complete"`, match: false},
		{filter: `JobID == "web" and Status != "complete"`, match: true},
		{filter: `JobID=="web" and Namespace == "other"`, match: false},
		{filter: `TriggeredBy == "job-register" and Type == "service" and ID == "e1"`, match: true},
		{filter: `Status contains "fail"`, wantErr: "clause 1"},
		{filter: `Priority == "50"`, wantErr: `unknown field "Priority"`},
		{filter: `Status == failed`, wantErr: "double-quoted"},
		{filter: `Status == "failed" or Status == "complete"`, wantErr: "double-quoted"},
	}
	for _, tc := range tests {
		t.Run(tc.filter, func(t *testing.T) {
			match, err := parseEvalFilter(tc.filter)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v; want an invalid-request error mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := match(e); got != tc.match {
				t.Errorf("match %v; want %v", got, tc.match)
			}
		})
	}
}

// TestEvalKept: with the broker paused, any eval may be deleted unless a
// worker holds it or its job is live and one of its allocations is not
// terminal on its client (Nomad's rule); the eval's status does not count.
func TestEvalKept(t *testing.T) {
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	live := testJob("j", "sysbatch")
	stopped := testJob("stopped", "sysbatch")
	live.Namespace, stopped.Namespace = "default", "default"
	stopped.Stop = true
	if err := st.UpsertJob(5, live); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertJob(6, stopped); err != nil {
		t.Fatal(err)
	}
	ev := func(id, job, status string) *structs.Evaluation {
		return &structs.Evaluation{ID: id, Namespace: "default", JobID: job, Type: "sysbatch", Status: status}
	}
	evals := []*structs.Evaluation{
		ev("done", "j", structs.EvalStatusComplete),
		ev("pending", "j", structs.EvalStatusPending),
		ev("blocked", "j", structs.EvalStatusBlocked),
		ev("running-alloc", "j", structs.EvalStatusComplete),
		ev("unknown-alloc", "j", structs.EvalStatusComplete),
		ev("pending-alloc", "j", structs.EvalStatusComplete),
		ev("dead-alloc", "j", structs.EvalStatusComplete),
		ev("stopped-job", "stopped", structs.EvalStatusComplete),
		ev("purged-job", "purged", structs.EvalStatusComplete),
		ev("held", "other", structs.EvalStatusPending),
	}
	if err := st.UpsertEvals(10, evals); err != nil {
		t.Fatal(err)
	}
	alloc := func(eval, job, status string) *structs.Allocation {
		j := live
		if job == "stopped" {
			j = stopped
		}
		return &structs.Allocation{ID: uuid.NewString(), Namespace: "default", JobID: job, Job: j, TaskGroup: "g", EvalID: eval, ClientStatus: status, DesiredStatus: "run"}
	}
	allocs := []*structs.Allocation{
		alloc("running-alloc", "j", structs.AllocClientStatusRunning),
		alloc("unknown-alloc", "j", structs.AllocClientStatusUnknown),
		alloc("pending-alloc", "j", structs.AllocClientStatusPending),
		alloc("dead-alloc", "j", structs.AllocClientStatusComplete),
		alloc("stopped-job", "stopped", structs.AllocClientStatusRunning),
	}
	if err := st.UpsertAllocs(11, allocs); err != nil {
		t.Fatal(err)
	}
	if j, err := st.JobByID(nil, "default", "j"); err != nil || j.Status == structs.JobStatusDead || j.Stop {
		t.Fatalf("job j: %+v, %v; want a live job", j, err)
	}
	b := evalbroker.New(evalbroker.Config{}, nil)
	b.SetEnabled(true)
	defer b.SetEnabled(false)
	b.Enqueue(evals[len(evals)-1])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, _, err := b.Dequeue(ctx, []string{"sysbatch"}); err != nil || got.ID != "held" {
		t.Fatalf("Dequeue: %v, %v", got, err)
	}
	s := &Server{broker: b}
	want := map[string]string{
		"done": "", "pending": "", "blocked": "", "dead-alloc": "", "stopped-job": "", "purged-job": "",
		"running-alloc": "is running", "unknown-alloc": "is unknown", "pending-alloc": "is pending",
		"held": "a scheduler worker holds it",
	}
	for _, e := range evals {
		why, err := s.evalKept(st, e)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[e.ID]; (w == "") != (why == "") || !strings.Contains(why, w) {
			t.Errorf("eval %s kept for %q; want %q", e.ID, why, w)
		}
	}
}

// pauseBroker sets the scheduler configuration's PauseEvalBroker.
func pauseBroker(t *testing.T, s *Server, on bool) {
	t.Helper()
	_, cfg, err := s.State().SchedulerConfig()
	if err != nil {
		t.Fatal(err)
	}
	c := structs.SchedulerConfiguration{}
	if cfg != nil {
		c = *cfg
	}
	c.PauseEvalBroker = on
	if _, _, err := s.Operator().SetSchedulerConfig(context.Background(), &c, false, 0); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteEvals deletes through Raft by ID and by filter once the
// broker is paused, refuses it before, refuses a kept eval or an unknown
// one named by ID and bad requests, and skips kept evals a filter matches.
func TestDeleteEvals(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	var done []string
	for _, id := range []string{"a", "b", "c"} {
		resp := registerJob(t, s, testJob(id, "system"))
		waitEvalTerminal(t, s, resp.EvalID)
		done = append(done, resp.EvalID)
	}
	if _, err := s.DeleteEvals(ctx, []string{done[0]}, ""); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "eval broker is enabled") {
		t.Fatalf("delete with the broker running: %v; want Nomad's refusal", err)
	}
	// A live job's eval whose allocation is not terminal on its client
	// (placed, never started: pending) is kept.
	registerNodes(t, s, testNode("n1"))
	liveReg := registerJob(t, s, testJob("live", "system"))
	waitEvalTerminal(t, s, liveReg.EvalID)
	if allocs, err := s.State().AllocsByEval(nil, liveReg.EvalID); err != nil || len(allocs) != 1 {
		t.Fatalf("the live job's allocations: %v, %v; want one", allocs, err)
	}
	pauseBroker(t, s, true)

	bad := []struct {
		name   string
		ids    []string
		filter string
		kind   error
		want   string
	}{
		{name: "neither", kind: structs.ErrInvalid, want: "one is required"},
		{name: "both", ids: []string{done[0]}, filter: `JobID == "a"`, kind: structs.ErrInvalid, want: "not both"},
		{name: "too many", ids: make([]string, structs.MaxEvalIDsPerDelete+1), kind: structs.ErrInvalid, want: "more than"},
		{name: "filter too long", filter: strings.Repeat("x", structs.MaxEvalDeleteFilterBytes+1), kind: structs.ErrInvalid, want: "more than"},
		{name: "live eval", ids: []string{done[0], liveReg.EvalID}, kind: structs.ErrInvalid, want: "EvalIDs[1]: eval " + liveReg.EvalID + " cannot be deleted"},
		{name: "unknown eval", ids: []string{done[0], "8e231cf4-ca48-43ff-b694-5801e69e22fa"}, kind: structs.ErrNotFound, want: "eval not found"},
		{name: "bad filter", filter: `JobID ~ "a"`, kind: structs.ErrInvalid, want: "Filter:"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.DeleteEvals(ctx, tc.ids, tc.filter)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want %v mentioning %q", err, tc.kind, tc.want)
			}
		})
	}
	// The refused requests deleted nothing (all or nothing by ID).
	if evalStatus(t, s, done[0]) == "" {
		t.Fatal("a refused delete removed an eval")
	}

	resp, err := s.DeleteEvals(ctx, []string{done[0], done[0]}, "")
	if err != nil || resp.Count != 1 || resp.Index == 0 {
		t.Fatalf("delete by ID: %+v, %v; want 1 deleted", resp, err)
	}
	if evalStatus(t, s, done[0]) != "" {
		t.Error("eval deleted by ID is still stored")
	}
	resp, err = s.DeleteEvals(ctx, nil, `JobID != "a" and JobID != "live" and TriggeredBy == "job-register"`)
	if err != nil || resp.Count != 2 {
		t.Fatalf("delete by filter: %+v, %v; want 2 deleted", resp, err)
	}
	for _, id := range done[1:] {
		if evalStatus(t, s, id) != "" {
			t.Errorf("eval %s matched by the filter is still stored", id)
		}
	}
	// A filter skips the kept eval it matches.
	resp, err = s.DeleteEvals(ctx, nil, `JobID == "live"`)
	if err != nil || resp.Count != 0 {
		t.Fatalf("filter over a kept eval: %+v, %v; want 0 deleted", resp, err)
	}
	if evalStatus(t, s, liveReg.EvalID) == "" {
		t.Error("the kept eval was deleted")
	}
}

// TestNodeEvaluateAndPurge: evaluate writes one eval per job the node
// matters to; purge deletes the node and evaluates the jobs that had
// allocations on it; both answer 404 for an unknown node.
func TestNodeEvaluateAndPurge(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	n := testNode("a")
	registerNodes(t, s, n)
	resp := registerJob(t, s, testJob("sys", "system"))
	waitEvalTerminal(t, s, resp.EvalID)
	waitFor(t, 30*time.Second, "the system alloc on the node", func() bool {
		allocs, _ := s.State().AllocsByNode(nil, n.ID)
		return len(allocs) == 1
	})

	ev, err := s.Nodes().Evaluate(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.EvalIDs) != 1 || ev.EvalCreateIndex == 0 || ev.Index != ev.EvalCreateIndex {
		t.Fatalf("evaluate: %+v; want one eval", ev)
	}
	stored, err := s.State().EvalByID(nil, ev.EvalIDs[0])
	if err != nil || stored == nil || stored.NodeID != n.ID || stored.JobID != "sys" || stored.TriggeredBy != structs.EvalTriggerNodeUpdate {
		t.Fatalf("evaluate: stored eval %+v, %v", stored, err)
	}
	waitEvalTerminal(t, s, stored.ID)

	pr, err := s.Nodes().Purge(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.EvalIDs) != 1 || pr.NodeModifyIndex == 0 || pr.EvalCreateIndex <= pr.NodeModifyIndex {
		t.Fatalf("purge: %+v; want the node deleted, then one eval", pr)
	}
	if node, _ := s.State().NodeByID(nil, n.ID); node != nil {
		t.Fatal("purged node is still stored")
	}
	if e, _ := s.State().EvalByID(nil, pr.EvalIDs[0]); e == nil || e.JobID != "sys" {
		t.Fatalf("purge eval %+v", e)
	}

	for name, call := range map[string]func(context.Context, string) (*structs.NodeEligibilityUpdateResponse, error){
		"evaluate": s.Nodes().Evaluate, "purge": s.Nodes().Purge} {
		if _, err := call(ctx, n.ID); !errors.Is(err, structs.ErrNotFound) {
			t.Errorf("%s of a missing node: %v; want not found", name, err)
		}
	}
}

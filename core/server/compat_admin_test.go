package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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

// TestEvalKept: only terminal evals without running or unknown
// allocations may be deleted.
func TestEvalKept(t *testing.T) {
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	evals := []*structs.Evaluation{
		{ID: "done", Namespace: "default", JobID: "j", Status: structs.EvalStatusComplete},
		{ID: "failed", Namespace: "default", JobID: "j", Status: structs.EvalStatusFailed},
		{ID: "pending", Namespace: "default", JobID: "j", Status: structs.EvalStatusPending},
		{ID: "blocked", Namespace: "default", JobID: "j", Status: structs.EvalStatusBlocked},
		{ID: "running-alloc", Namespace: "default", JobID: "j", Status: structs.EvalStatusComplete},
		{ID: "unknown-alloc", Namespace: "default", JobID: "j", Status: structs.EvalStatusComplete},
		{ID: "dead-alloc", Namespace: "default", JobID: "j", Status: structs.EvalStatusComplete},
	}
	if err := st.UpsertEvals(10, evals); err != nil {
		t.Fatal(err)
	}
	job := testJob("j", "sysbatch")
	allocs := []*structs.Allocation{
		{ID: uuid.NewString(), Namespace: "default", JobID: "j", Job: job, TaskGroup: "g", EvalID: "running-alloc", ClientStatus: structs.AllocClientStatusRunning, DesiredStatus: "run"},
		{ID: uuid.NewString(), Namespace: "default", JobID: "j", Job: job, TaskGroup: "g", EvalID: "unknown-alloc", ClientStatus: structs.AllocClientStatusUnknown, DesiredStatus: "run"},
		{ID: uuid.NewString(), Namespace: "default", JobID: "j", Job: job, TaskGroup: "g", EvalID: "dead-alloc", ClientStatus: structs.AllocClientStatusComplete, DesiredStatus: "run"},
	}
	if err := st.UpsertAllocs(11, allocs); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"done": "", "failed": "", "dead-alloc": "", "pending": `status is "pending"`, "blocked": `status is "blocked"`,
		"running-alloc": "is running", "unknown-alloc": "is unknown"}
	for _, e := range evals {
		why, err := evalKept(st, e)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[e.ID]; (w == "") != (why == "") || !strings.Contains(why, w) {
			t.Errorf("eval %s kept for %q; want %q", e.ID, why, w)
		}
	}
}

// TestDeleteEvals deletes through Raft by ID and by filter, refuses a
// live eval named by ID and bad requests, and skips live evals a filter
// matches.
func TestDeleteEvals(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	var done []string
	for _, id := range []string{"a", "b", "c"} {
		resp := registerJob(t, s, testJob(id, "system"))
		waitEvalTerminal(t, s, resp.EvalID)
		done = append(done, resp.EvalID)
	}
	blocked := &structs.Evaluation{ID: uuid.NewString(), Namespace: "default", JobID: "c", Type: "system", Priority: 50,
		TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusBlocked}
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{blocked}}); err != nil {
		t.Fatal(err)
	}

	bad := []struct {
		name   string
		ids    []string
		filter string
		want   string
	}{
		{name: "neither", want: "one is required"},
		{name: "both", ids: []string{done[0]}, filter: `JobID == "a"`, want: "not both"},
		{name: "too many", ids: make([]string, structs.MaxEvalIDsPerDelete+1), want: "more than"},
		{name: "filter too long", filter: strings.Repeat("x", structs.MaxEvalDeleteFilterBytes+1), want: "more than"},
		{name: "live eval", ids: []string{done[0], blocked.ID}, want: "EvalIDs[1]: eval " + blocked.ID + " cannot be deleted"},
		{name: "bad filter", filter: `JobID ~ "a"`, want: "Filter:"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.DeleteEvals(ctx, tc.ids, tc.filter)
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want invalid mentioning %q", err, tc.want)
			}
		})
	}
	// The refused request deleted nothing (all or nothing by ID).
	if evalStatus(t, s, done[0]) == "" {
		t.Fatal("a refused delete removed an eval")
	}

	resp, err := s.DeleteEvals(ctx, []string{done[0], done[0], uuid.NewString()}, "")
	if err != nil || resp.Count != 1 || resp.Index == 0 {
		t.Fatalf("delete by ID: %+v, %v; want 1 deleted", resp, err)
	}
	if evalStatus(t, s, done[0]) != "" {
		t.Error("eval deleted by ID is still stored")
	}
	resp, err = s.DeleteEvals(ctx, nil, `JobID != "a" and Status == "complete"`)
	if err != nil || resp.Count != 2 {
		t.Fatalf("delete by filter: %+v, %v; want 2 deleted", resp, err)
	}
	for _, id := range done[1:] {
		if evalStatus(t, s, id) != "" {
			t.Errorf("eval %s matched by the filter is still stored", id)
		}
	}
	// A filter skips the live eval it matches.
	resp, err = s.DeleteEvals(ctx, nil, `JobID == "c"`)
	if err != nil || resp.Count != 0 {
		t.Fatalf("filter over a live eval: %+v, %v; want 0 deleted", resp, err)
	}
	if evalStatus(t, s, blocked.ID) != structs.EvalStatusBlocked {
		t.Error("the blocked eval was deleted")
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

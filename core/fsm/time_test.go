package fsm

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

// stampedLog builds a log whose entries carry leader stamps (and a few
// that do not, as an older leader wrote them), encoded once so that every
// FSM applies exactly the same bytes.
func stampedLog(t *testing.T, base time.Time) []*raft.Log {
	t.Helper()
	ns := func(d time.Duration) int64 { return base.Add(d).UnixNano() }
	n := mockNode()
	job := mockJob(structs.JobTypeService)
	job.Namespace = structs.DefaultNamespace
	parent := mockJob("batch")
	parent.Namespace = structs.DefaultNamespace
	parent.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "@hourly"}
	ev := mockEval(job.Namespace, job.ID, structs.EvalStatusPending)
	blocked := mockEval(job.Namespace, job.ID, structs.EvalStatusBlocked)
	done := mockEval(job.Namespace, job.ID, structs.EvalStatusComplete)
	a := mockAlloc(job, n.ID)
	yes := true
	entries := []struct {
		typ structs.MessageType
		msg any
	}{
		{structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n, Now: ns(1 * time.Second)}},
		{structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{NodeID: n.ID, Status: structs.NodeStatusDown,
			NodeEvent: &structs.NodeEvent{Message: "missed"}, Now: ns(2 * time.Second)}},
		// Re-registering a down node records an event the store makes.
		{structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n, Now: ns(3 * time.Second)}},
		{structs.NodeUpdateDrainRequestType, &structs.NodeUpdateDrainRequest{NodeID: n.ID,
			DrainStrategy: &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}, Now: ns(4 * time.Second)}},
		{structs.NodeUpdateDrainRequestType, &structs.NodeUpdateDrainRequest{NodeID: n.ID, MarkEligible: true, Now: ns(5 * time.Second)}},
		{structs.NodeUpdateEligibilityRequestType, &structs.NodeUpdateEligibilityRequest{NodeID: n.ID,
			Eligibility: structs.NodeSchedulingIneligible, Now: ns(6 * time.Second)}},
		{structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: ev, Now: ns(7 * time.Second)}},
		{structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent, Now: ns(8 * time.Second)}},
		{structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{blocked}, Now: ns(9 * time.Second)}},
		{structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{a},
			UpdatedAt: ns(10 * time.Second)}},
		{structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{{
			ID: a.ID, ClientStatus: structs.AllocClientStatusRunning}}, Now: ns(11 * time.Second)}},
		{structs.AllocUpdateDesiredTransitionRequestType, &structs.AllocUpdateDesiredTransitionRequest{
			Allocs: map[string]*structs.DesiredTransition{a.ID: {Migrate: &yes}}, Now: ns(12 * time.Second)}},
		// A complete eval cancels the blocked one, stamping it too.
		{structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{done}, Now: ns(13 * time.Second)}},
		// Entries of an older leader, without a stamp: the node change
		// falls back to its event's time, the eval keeps no time at all.
		{structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{NodeID: n.ID, Status: structs.NodeStatusReady,
			UpdatedAt: base.Add(14 * time.Second).Unix(), NodeEvent: &structs.NodeEvent{Message: "back", Timestamp: base.Add(14 * time.Second)}}},
		{structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{mockEval(job.Namespace, job.ID, structs.EvalStatusPending)}}},
		{structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: job.Namespace, JobID: job.ID,
			Eval: mockEval(job.Namespace, job.ID, structs.EvalStatusPending), Now: ns(15 * time.Second)}},
	}
	logs := make([]*raft.Log, 0, len(entries))
	for i, e := range entries {
		buf, err := Encode(e.typ, e.msg)
		must(t, err)
		logs = append(logs, &raft.Log{Index: uint64(10 + i), Type: raft.LogCommand, Data: buf})
	}
	return logs
}

func applyLog(t *testing.T, f *FSM, logs []*raft.Log) {
	t.Helper()
	for _, l := range logs {
		if resp := f.Apply(l); resp != nil {
			t.Fatalf("apply at %d: %v", l.Index, resp)
		}
	}
}

// Two servers applying the same entries at different moments (and a
// replay much later) must store the same times, and a snapshot keeps them.
func TestApplyStoresTheEntrysTimeNotTheWallClock(t *testing.T) {
	base := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	logs := stampedLog(t, base)
	a, _ := testFSM(t)
	applyLog(t, a, logs)
	b, _ := testFSM(t)
	applyLog(t, b, logs)

	want, got := dump(t, a.State()), dump(t, b.State())
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s differs between two FSMs applying the same log:\n a %s\n b %s", k, w, got[k])
		}
	}

	// The times are the leader's stamps, not the moment of applying.
	st := a.State()
	at := func(d time.Duration) time.Time { return base.Add(d) }
	nodes, err := st.Nodes(nil)
	must(t, err)
	if len(nodes) != 1 {
		t.Fatalf("%d nodes", len(nodes))
	}
	n := nodes[0]
	var evTimes []time.Time
	for _, ev := range n.Events {
		evTimes = append(evTimes, ev.Timestamp)
	}
	wantEv := []time.Time{at(time.Second), at(2 * time.Second), at(3 * time.Second), at(14 * time.Second)}
	if len(evTimes) != len(wantEv) {
		t.Fatalf("node event times %v, want %v", evTimes, wantEv)
	}
	for i := range wantEv {
		if !evTimes[i].Equal(wantEv[i]) {
			t.Errorf("node event %d (%s) at %v, want %v", i, n.Events[i].Message, evTimes[i], wantEv[i])
		}
	}
	if n.LastDrain == nil || !n.LastDrain.StartedAt.Equal(at(4*time.Second)) || !n.LastDrain.UpdatedAt.Equal(at(5*time.Second)) {
		t.Errorf("last drain = %+v, want started at +4s, updated at +5s", n.LastDrain)
	}

	jobs, err := st.Jobs(nil)
	must(t, err)
	for _, j := range jobs {
		wantSubmit := at(7 * time.Second)
		if j.IsPeriodic() {
			wantSubmit = at(8 * time.Second)
		}
		if j.SubmitTime != wantSubmit.UnixNano() {
			t.Errorf("job %s submitted at %d, want %d", j.ID, j.SubmitTime, wantSubmit.UnixNano())
		}
	}
	launches, err := st.PeriodicLaunches(nil)
	must(t, err)
	if len(launches) != 1 || !launches[0].Launch.Equal(at(8*time.Second)) {
		t.Errorf("periodic launches %+v, want one at +8s", launches)
	}

	evals, err := st.Evals(nil)
	must(t, err)
	var unstamped int
	for _, e := range evals {
		switch {
		case e.CreateTime == 0 && e.ModifyTime == 0:
			unstamped++ // the older leader's entry carried no time
		case e.CreateTime < at(7*time.Second).UnixNano() || e.ModifyTime > at(15*time.Second).UnixNano():
			t.Errorf("eval %s (%s) times %d/%d outside the entries' stamps", e.ID, e.Status, e.CreateTime, e.ModifyTime)
		}
		if e.Status == structs.EvalStatusCancelled && e.ModifyTime != at(13*time.Second).UnixNano() {
			t.Errorf("cancelled blocked eval modified at %d, want the completing entry's %d", e.ModifyTime, at(13*time.Second).UnixNano())
		}
	}
	if unstamped != 1 {
		t.Errorf("%d evals without times, want the one unstamped entry's", unstamped)
	}

	allocs, err := st.Allocs(nil)
	must(t, err)
	if len(allocs) != 1 {
		t.Fatalf("%d allocs", len(allocs))
	}
	al := allocs[0]
	if al.CreateTime != at(10*time.Second).UnixNano() || al.ModifyTime != at(12*time.Second).UnixNano() {
		t.Errorf("alloc created %d modified %d, want +10s and +12s", al.CreateTime, al.ModifyTime)
	}
	if len(al.AllocStates) != 1 || !al.AllocStates[0].Time.Equal(at(11*time.Second)) {
		t.Errorf("alloc states %+v, want one at +11s", al.AllocStates)
	}

	// A snapshot and restore keeps every time.
	c, _ := testFSM(t)
	must(t, c.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, a)))))
	restored := dump(t, c.State())
	for k, w := range want {
		if restored[k] != w {
			t.Errorf("%s differs after snapshot and restore:\n got %s\nwant %s", k, restored[k], w)
		}
	}
}

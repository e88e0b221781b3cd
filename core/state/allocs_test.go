package state

import (
	"strconv"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestClientUpdateKeepsServerFields(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob(structs.JobTypeService))
	a := mockAlloc(job, "n1")
	a.DesiredStatus = structs.AllocDesiredStatusStop
	a.DesiredDescription = "alloc is being updated"
	a.FollowupEvalID = "follow"
	must(t, s.UpsertAllocs(11, []*structs.Allocation{a}))

	// A client sends what it knows, including stale server fields.
	upd := &structs.Allocation{
		ID:                 a.ID,
		ClientStatus:       structs.AllocClientStatusRunning,
		ClientDescription:  "Tasks are running",
		DesiredStatus:      structs.AllocDesiredStatusRun,
		DesiredDescription: "stale",
		NodeID:             "other-node",
		TaskStates:         map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning}},
		ModifyTime:         12345,
	}
	must(t, s.UpdateAllocsFromClient(12, []*structs.Allocation{upd}))
	got, _ := s.AllocByID(nil, a.ID)
	switch {
	case got.ClientStatus != structs.AllocClientStatusRunning || got.ClientDescription != "Tasks are running":
		t.Errorf("client status not taken: %q %q", got.ClientStatus, got.ClientDescription)
	case got.TaskStates["t"] == nil || got.TaskStates["t"].State != structs.TaskStateRunning:
		t.Errorf("task states not taken: %+v", got.TaskStates)
	case got.DesiredStatus != structs.AllocDesiredStatusStop || got.DesiredDescription != "alloc is being updated":
		t.Errorf("client clobbered desired status: %q %q", got.DesiredStatus, got.DesiredDescription)
	case got.NodeID != "n1" || got.FollowupEvalID != "follow" || got.Job == nil:
		t.Errorf("client clobbered server fields: node %q followup %q", got.NodeID, got.FollowupEvalID)
	case got.ModifyIndex != 12 || got.AllocModifyIndex != 11 || got.CreateIndex != 11 || got.ModifyTime != 12345:
		t.Errorf("indexes: create %d modify %d allocmodify %d time %d", got.CreateIndex, got.ModifyIndex, got.AllocModifyIndex, got.ModifyTime)
	}
	if n := len(got.AllocStates); n != 1 || got.AllocStates[0].Value != structs.AllocClientStatusRunning {
		t.Errorf("AllocStates = %+v, want one ClientStatus=running record", got.AllocStates)
	}
	// Updates for reaped allocs are skipped, not errors.
	must(t, s.UpdateAllocsFromClient(13, []*structs.Allocation{clientUpdate("gone", structs.AllocClientStatusFailed)}))
}

func TestServerUpsertKeepsClientFields(t *testing.T) {
	cases := []struct {
		name       string
		serverSays string
		want       string
	}{
		{"server leaves client status alone", "", structs.AllocClientStatusRunning},
		{"server cannot claim completion", structs.AllocClientStatusComplete, structs.AllocClientStatusRunning},
		{"server marks lost", structs.AllocClientStatusLost, structs.AllocClientStatusLost},
		{"server marks unknown", structs.AllocClientStatusUnknown, structs.AllocClientStatusUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			job := storedJob(t, s, 10, mockJob(structs.JobTypeService))
			a := mockAlloc(job, "n1")
			must(t, s.UpsertAllocs(11, []*structs.Allocation{a}))
			states := map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning}}
			must(t, s.UpdateAllocsFromClient(12, []*structs.Allocation{{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning, TaskStates: states}}))

			// In-place update from a plan: a fresh copy without client fields.
			upd := mockAlloc(job, "n1")
			upd.ID, upd.Job = a.ID, nil
			upd.ClientStatus = tc.serverSays
			upd.TaskStates = nil
			must(t, s.UpsertAllocs(13, []*structs.Allocation{upd}))
			got, _ := s.AllocByID(nil, a.ID)
			if got.ClientStatus != tc.want {
				t.Errorf("ClientStatus = %q, want %q", got.ClientStatus, tc.want)
			}
			if got.TaskStates["t"] == nil {
				t.Error("task states dropped by a server upsert")
			}
			if got.Job == nil || got.Job.ID != job.ID || got.Job.JobModifyIndex != job.JobModifyIndex {
				t.Error("nil Job not re-attached from the stored alloc")
			}
			if got.CreateIndex != 11 || got.AllocModifyIndex != 13 {
				t.Errorf("create %d allocmodify %d, want 11/13", got.CreateIndex, got.AllocModifyIndex)
			}
		})
	}
}

func TestUpsertAllocsLinksAndSharesJob(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob(structs.JobTypeService))
	prev := mockAlloc(job, "n1")
	must(t, s.UpsertAllocs(11, []*structs.Allocation{prev}))
	next := mockAlloc(job.Copy(), "n2") // a decoded copy, as from the Raft log
	next.PreviousAllocation = prev.ID
	must(t, s.UpsertAllocs(12, []*structs.Allocation{next}))
	gotPrev, _ := s.AllocByID(nil, prev.ID)
	if gotPrev.NextAllocation != next.ID || gotPrev.ModifyIndex != 12 {
		t.Errorf("previous alloc: next %q modify %d, want %q/12", gotPrev.NextAllocation, gotPrev.ModifyIndex, next.ID)
	}
	gotNext, _ := s.AllocByID(nil, next.ID)
	if cur, _ := s.JobByID(nil, job.Namespace, job.ID); gotNext.Job != cur {
		t.Error("alloc of the stored job version keeps a private job copy")
	}
	// New alloc without job: the current job is attached.
	bare := mockAlloc(job, "n3")
	bare.Job = nil
	must(t, s.UpsertAllocs(13, []*structs.Allocation{bare}))
	if got, _ := s.AllocByID(nil, bare.ID); got.Job == nil || got.Job.JobModifyIndex != job.JobModifyIndex {
		t.Error("current job not attached to a new alloc without one")
	}
	orphan := mockAlloc(job, "n3")
	orphan.Job, orphan.JobID = nil, "no-such-job"
	if err := s.UpsertAllocs(14, []*structs.Allocation{orphan}); err == nil {
		t.Error("alloc of an unknown job without a Job accepted")
	}
}

func TestAllocReaders(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("batch"))
	other := mockJob("batch")
	other.Namespace = "prod"
	other = storedJob(t, s, 11, other)
	a1, a2, a3 := mockAlloc(job, "n1"), mockAlloc(job, "n2"), mockAlloc(other, "n1")
	a1.ID, a2.ID, a3.ID = "aaaa-1", "aabb-2", "aaaa-3"
	a2.DesiredStatus = structs.AllocDesiredStatusStop
	must(t, s.UpsertAllocs(12, []*structs.Allocation{a1, a2, a3}))

	ids := func(allocs []*structs.Allocation, err error) []string {
		t.Helper()
		must(t, err)
		var out []string
		for _, a := range allocs {
			out = append(out, a.ID)
		}
		return out
	}
	cases := []struct {
		name string
		got  []string
		want []string
	}{
		{"by node", ids(s.AllocsByNode(nil, "n1")), []string{"aaaa-1", "aaaa-3"}},
		{"by node, terminal only", ids(s.AllocsByNode(nil, "n2")), []string{"aabb-2"}},
		{"by node live", ids(s.AllocsByNodeTerminal(nil, "n1", false)), []string{"aaaa-1", "aaaa-3"}},
		{"by node terminal", ids(s.AllocsByNodeTerminal(nil, "n2", true)), []string{"aabb-2"}},
		{"by node live none", ids(s.AllocsByNodeTerminal(nil, "n2", false)), nil},
		{"node prefix is not a match", ids(s.AllocsByNode(nil, "n")), nil},
		{"by job", ids(s.AllocsByJob(nil, job.Namespace, job.ID, false)), []string{"aaaa-1", "aabb-2"}},
		{"by eval", ids(s.AllocsByEval(nil, a3.EvalID)), []string{"aaaa-3"}},
		{"prefix all namespaces", ids(s.AllocsByIDPrefix(nil, AllNamespaces, "aaaa")), []string{"aaaa-1", "aaaa-3"}},
		{"prefix one namespace", ids(s.AllocsByIDPrefix(nil, "prod", "aa")), []string{"aaaa-3"}},
		{"list", ids(s.AllocList(nil, structs.DefaultNamespace, "")), []string{"aaaa-1", "aabb-2"}},
		{"all", ids(s.Allocs(nil)), []string{"aaaa-1", "aaaa-3", "aabb-2"}},
	}
	for _, tc := range cases {
		if len(tc.got) != len(tc.want) {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
			continue
		}
		for i := range tc.got {
			if tc.got[i] != tc.want[i] {
				t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
				break
			}
		}
	}
	// An alloc becoming terminal moves between the node_terminal halves.
	must(t, s.UpdateAllocsFromClient(13, []*structs.Allocation{clientUpdate("aaaa-1", structs.AllocClientStatusComplete)}))
	if got := ids(s.AllocsByNodeTerminal(nil, "n1", true)); len(got) != 1 || got[0] != "aaaa-1" {
		t.Errorf("terminal on n1 after completion = %v", got)
	}
	if got := ids(s.AllocsByNode(nil, "n1")); len(got) != 2 || got[0] != "aaaa-3" {
		t.Errorf("AllocsByNode(n1) = %v, want the live aaaa-3 first", got)
	}
}

func TestUpdateAllocsDesiredTransitions(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob(structs.JobTypeService))
	a := mockAlloc(job, "n1")
	no := false
	a.DesiredTransition.NoShutdownDelay = &no
	must(t, s.UpsertAllocs(11, []*structs.Allocation{a}))
	yes := true
	ev := mockEval(job, structs.EvalStatusPending)
	must(t, s.UpdateAllocsDesiredTransitions(12, map[string]*structs.DesiredTransition{
		a.ID:      {Migrate: &yes},
		"missing": {Migrate: &yes},
	}, []*structs.Evaluation{ev}))
	got, _ := s.AllocByID(nil, a.ID)
	if !got.DesiredTransition.ShouldMigrate() || got.DesiredTransition.NoShutdownDelay == nil || got.ModifyIndex != 12 {
		t.Errorf("transition = %+v (modify %d), want Migrate merged over NoShutdownDelay at 12", got.DesiredTransition, got.ModifyIndex)
	}
	if e, _ := s.EvalByID(nil, ev.ID); e == nil || e.CreateIndex != 12 {
		t.Errorf("eval written with the transitions: %+v", e)
	}
}

func TestUpsertPlanResults(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob(structs.JobTypeService))
	victimJob := storedJob(t, s, 11, mockJob("batch"))
	stop, lost, victim := mockAlloc(job, "n1"), mockAlloc(job, "n2"), mockAlloc(victimJob, "n1")
	must(t, s.UpsertAllocs(12, []*structs.Allocation{stop, lost, victim}))
	must(t, s.UpdateAllocsFromClient(13, []*structs.Allocation{
		clientUpdate(stop.ID, structs.AllocClientStatusRunning),
		clientUpdate(lost.ID, structs.AllocClientStatusRunning),
		clientUpdate(victim.ID, structs.AllocClientStatusRunning),
	}))

	placed := mockAlloc(job, "n1")
	placed.Job = nil // denormalized: takes the plan's job
	placed.PreviousAllocation = stop.ID
	preemptEval := mockEval(victimJob, structs.EvalStatusPending)
	preemptEval.TriggeredBy = structs.EvalTriggerPreemption
	req := &structs.ApplyPlanResultsRequest{
		Job: job,
		AllocsStopped: []*structs.Allocation{
			{ID: stop.ID, DesiredDescription: "alloc is being updated", FollowupEvalID: "f1"},
			{ID: lost.ID, DesiredDescription: "alloc is lost since its node is down", ClientStatus: structs.AllocClientStatusLost},
			{ID: "reaped-meanwhile", DesiredDescription: "x"},
		},
		AllocsPreempted: []*structs.Allocation{{ID: victim.ID, PreemptedByAllocation: placed.ID}},
		AllocsUpdated:   []*structs.Allocation{placed},
		PreemptionEvals: []*structs.Evaluation{preemptEval},
		UpdatedAt:       777,
	}
	must(t, s.UpsertPlanResults(20, req))

	get := func(id string) *structs.Allocation {
		a, err := s.AllocByID(nil, id)
		must(t, err)
		if a == nil {
			t.Fatalf("alloc %s missing", id)
		}
		return a
	}
	gs, gl, gv, gp := get(stop.ID), get(lost.ID), get(victim.ID), get(placed.ID)
	if gs.DesiredStatus != structs.AllocDesiredStatusStop || gs.DesiredDescription != "alloc is being updated" ||
		gs.FollowupEvalID != "f1" || gs.ClientStatus != structs.AllocClientStatusRunning || gs.ModifyTime != 777 {
		t.Errorf("stopped alloc = %s/%q follow %q client %s time %d", gs.DesiredStatus, gs.DesiredDescription, gs.FollowupEvalID, gs.ClientStatus, gs.ModifyTime)
	}
	if gs.NextAllocation != placed.ID {
		t.Errorf("stopped alloc NextAllocation = %q, want the replacement", gs.NextAllocation)
	}
	if gl.ClientStatus != structs.AllocClientStatusLost || gl.DesiredStatus != structs.AllocDesiredStatusStop {
		t.Errorf("lost alloc = desired %s client %s", gl.DesiredStatus, gl.ClientStatus)
	}
	if last := gl.AllocStates[len(gl.AllocStates)-1]; last.Value != structs.AllocClientStatusLost {
		t.Errorf("lost transition not recorded: %+v", last)
	}
	if gv.DesiredStatus != structs.AllocDesiredStatusEvict || gv.PreemptedByAllocation != placed.ID ||
		gv.DesiredDescription != "Preempted by alloc ID "+placed.ID {
		t.Errorf("preempted alloc = %s %q by %q", gv.DesiredStatus, gv.DesiredDescription, gv.PreemptedByAllocation)
	}
	if gp.Job == nil || gp.Job.JobModifyIndex != job.JobModifyIndex || gp.ClientStatus != structs.AllocClientStatusPending || gp.CreateIndex != 20 {
		t.Errorf("placed alloc: job %v client %s create %d", gp.Job, gp.ClientStatus, gp.CreateIndex)
	}
	if e, _ := s.EvalByID(nil, preemptEval.ID); e == nil || e.Status != structs.EvalStatusPending {
		t.Errorf("preemption eval not written: %+v", e)
	}
	sum, _ := s.JobSummaryByID(nil, job.Namespace, job.ID)
	if got, want := sum.Summary["web"], (structs.TaskGroupSummary{Running: 1, Lost: 1, Starting: 1}); got != want {
		t.Errorf("summary = %+v, want %+v", got, want)
	}
	if s.Index(TableAllocs) != 20 || s.Index(TableEvals) != 20 {
		t.Errorf("indexes allocs %d evals %d, want 20", s.Index(TableAllocs), s.Index(TableEvals))
	}
}

// BenchmarkUpsertAllocs measures a plan result of 1,000 placements, the
// shape of a large system or batch job's first plan.
func BenchmarkUpsertAllocs(b *testing.B) {
	s := testStore(b)
	job := storedJob(b, s, 1, mockJob("batch"))
	index := uint64(2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		allocs := make([]*structs.Allocation, 1000)
		for k := range allocs {
			allocs[k] = mockAlloc(job, "n"+strconv.Itoa(k))
		}
		b.StartTimer()
		must(b, s.UpsertAllocs(index, allocs))
		index++
	}
}

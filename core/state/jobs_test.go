package state

import (
	"errors"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestWritesBumpTableIndexes(t *testing.T) {
	s := testStore(t)
	job := mockJob(structs.JobTypeService)
	node := mockNode()
	var alloc *structs.Allocation

	steps := []struct {
		name   string
		index  uint64
		write  func() error
		tables []string
	}{
		{"node", 10, func() error { return s.UpsertNode(10, node) }, []string{TableNodes}},
		{"job", 11, func() error { return s.UpsertJob(11, job) }, []string{TableJobs, TableJobVersions, TableJobSummary}},
		{"eval", 12, func() error {
			return s.UpsertEvals(12, []*structs.Evaluation{mockEval(job, structs.EvalStatusPending)})
		}, []string{TableEvals}},
		{"alloc", 13, func() error {
			stored, _ := s.JobByID(nil, job.Namespace, job.ID)
			alloc = mockAlloc(stored, node.ID)
			return s.UpsertAllocs(13, []*structs.Allocation{alloc})
		}, []string{TableAllocs, TableJobs, TableJobSummary}},
		{"client update", 14, func() error {
			return s.UpdateAllocsFromClient(14, []*structs.Allocation{clientUpdate(alloc.ID, structs.AllocClientStatusRunning)})
		}, []string{TableAllocs, TableJobSummary}},
		{"launch", 15, func() error {
			return s.UpsertPeriodicLaunch(15, &structs.PeriodicLaunch{ID: job.ID, Namespace: job.Namespace})
		}, []string{TablePeriodicLaunch}},
		{"config", 16, func() error { return s.SchedulerSetConfig(16, structs.DefaultSchedulerConfig()) }, []string{TableSchedulerConfig}},
		{"reap nothing", 17, func() error { return s.DeleteEval(17, []string{"missing"}, nil) }, []string{TableEvals, TableAllocs}},
		{"delete job", 18, func() error { return s.DeleteJob(18, job.Namespace, job.ID) }, []string{TableJobs, TableJobVersions, TableJobSummary, TablePeriodicLaunch}},
	}
	for _, st := range steps {
		must(t, st.write())
		for _, table := range append(st.tables, TableIndex) {
			if got := s.Index(table); got != st.index {
				t.Errorf("%s: Index(%s) = %d, want %d", st.name, table, got, st.index)
			}
		}
		if got := s.LatestIndex(); got != st.index {
			t.Errorf("%s: LatestIndex = %d, want %d", st.name, got, st.index)
		}
	}
	if got := s.Index(TableNodes); got != 10 {
		t.Errorf("nodes index moved to %d by writes of other tables", got)
	}
}

func TestUpsertJobVersions(t *testing.T) {
	s := testStore(t)
	job := mockJob(structs.JobTypeService)
	for i := uint64(0); i < 8; i++ {
		j := job.Copy()
		j.Meta = map[string]string{"rev": string(rune('a' + i))}
		must(t, s.At(time.Unix(0, int64(1000+i))).UpsertJob(100+i, j))
	}
	cur, err := s.JobByID(nil, job.Namespace, job.ID)
	must(t, err)
	if cur.Version != 7 || cur.CreateIndex != 100 || cur.ModifyIndex != 107 || cur.JobModifyIndex != 107 {
		t.Errorf("job = version %d create %d modify %d jobmodify %d, want 7/100/107/107",
			cur.Version, cur.CreateIndex, cur.ModifyIndex, cur.JobModifyIndex)
	}
	if cur.SubmitTime != 1007 {
		t.Errorf("SubmitTime = %d, want the write's time 1007", cur.SubmitTime)
	}
	versions, err := s.JobVersionsByID(nil, job.Namespace, job.ID)
	must(t, err)
	if len(versions) != JobTrackedVersions {
		t.Fatalf("kept %d versions, want %d", len(versions), JobTrackedVersions)
	}
	for i, v := range versions {
		if want := uint64(7 - i); v.Version != want {
			t.Errorf("versions[%d].Version = %d, want %d (newest first)", i, v.Version, want)
		}
	}
	if old, _ := s.JobByIDAndVersion(nil, job.Namespace, job.ID, 1); old != nil {
		t.Error("version 1 kept beyond the cap")
	}
	v3, err := s.JobByIDAndVersion(nil, job.Namespace, job.ID, 3)
	must(t, err)
	if v3 == nil || v3.Meta["rev"] != "d" {
		t.Errorf("version 3 = %+v, want the fourth write", v3)
	}
	// A job with an ID that extends this one's must not show up.
	other := job.Copy()
	other.ID = job.ID + "x"
	must(t, s.UpsertJob(200, other))
	if versions, _ := s.JobVersionsByID(nil, job.Namespace, job.ID); len(versions) != JobTrackedVersions {
		t.Errorf("versions of %s include another job's: %d", job.ID, len(versions))
	}
}

func TestJobStatusDerivation(t *testing.T) {
	type setup struct {
		allocs      []string // client status of each alloc ("stop:" prefix for desired stop)
		evals       []string
		stop        bool
		reapEvals   bool
		purgeAllocs bool
	}
	cases := []struct {
		name string
		job  func() *structs.Job
		setup
		want string
	}{
		{"service new", func() *structs.Job { return mockJob(structs.JobTypeService) }, setup{}, structs.JobStatusPending},
		{"service pending eval", func() *structs.Job { return mockJob(structs.JobTypeService) }, setup{evals: []string{"pending"}}, structs.JobStatusPending},
		{"service running alloc", func() *structs.Job { return mockJob(structs.JobTypeService) }, setup{allocs: []string{"running"}, evals: []string{"complete"}}, structs.JobStatusRunning},
		{"service stopped, alloc still running", func() *structs.Job { return mockJob(structs.JobTypeService) }, setup{allocs: []string{"running"}, stop: true}, structs.JobStatusRunning},
		{"service stopped, alloc stopped", func() *structs.Job { return mockJob(structs.JobTypeService) }, setup{allocs: []string{"stop:running"}, stop: true, evals: []string{"complete"}}, structs.JobStatusDead},
		{"service stopped, nothing yet", func() *structs.Job { return mockJob(structs.JobTypeService) }, setup{stop: true}, structs.JobStatusDead},
		{"batch new", func() *structs.Job { return mockJob("batch") }, setup{}, structs.JobStatusPending},
		{"batch pending eval", func() *structs.Job { return mockJob("batch") }, setup{evals: []string{"complete", "pending"}}, structs.JobStatusPending},
		{"batch running", func() *structs.Job { return mockJob("batch") }, setup{allocs: []string{"complete", "running"}, evals: []string{"complete"}}, structs.JobStatusRunning},
		{"batch all complete", func() *structs.Job { return mockJob("batch") }, setup{allocs: []string{"complete", "failed"}, evals: []string{"complete"}}, structs.JobStatusDead},
		{"batch eval failed, no allocs", func() *structs.Job { return mockJob("batch") }, setup{evals: []string{"failed"}}, structs.JobStatusDead},
		{"batch evals reaped", func() *structs.Job { return mockJob("batch") }, setup{evals: []string{"complete"}, reapEvals: true}, structs.JobStatusDead},
		{"batch allocs reaped", func() *structs.Job { return mockJob("batch") }, setup{allocs: []string{"complete"}, purgeAllocs: true}, structs.JobStatusDead},
		{"sysbatch running", func() *structs.Job { return mockJob("sysbatch") }, setup{allocs: []string{"pending"}}, structs.JobStatusRunning},
		{"sysbatch done", func() *structs.Job { return mockJob("sysbatch") }, setup{allocs: []string{"complete", "complete"}, evals: []string{"complete"}}, structs.JobStatusDead},
		{"system new", func() *structs.Job { return mockJob("system") }, setup{}, structs.JobStatusRunning},
		{"system allocs done", func() *structs.Job { return mockJob("system") }, setup{allocs: []string{"complete"}, evals: []string{"complete"}}, structs.JobStatusRunning},
		{"system stopped", func() *structs.Job { return mockJob("system") }, setup{allocs: []string{"running"}, stop: true}, structs.JobStatusDead},
		// The declaration decides, not the name: a made-up type that runs
		// until stopped is running with no allocs, and a job named system
		// without a declaration follows its allocs.
		{"running-until-stopped type new", func() *structs.Job { return declaredJob("keeper", &structs.JobTypeBehavior{RunningUntilStopped: true}) }, setup{}, structs.JobStatusRunning},
		{"running-until-stopped type allocs done", func() *structs.Job { return declaredJob("keeper", &structs.JobTypeBehavior{RunningUntilStopped: true}) }, setup{allocs: []string{"failed"}, evals: []string{"complete"}}, structs.JobStatusRunning},
		{"running-until-stopped type stopped", func() *structs.Job { return declaredJob("keeper", &structs.JobTypeBehavior{RunningUntilStopped: true}) }, setup{stop: true}, structs.JobStatusDead},
		{"system undeclared new", func() *structs.Job { return declaredJob("system", nil) }, setup{}, structs.JobStatusPending},
		{"system undeclared allocs done", func() *structs.Job { return declaredJob("system", nil) }, setup{allocs: []string{"complete"}, evals: []string{"complete"}}, structs.JobStatusDead},
		{"periodic parent", mockPeriodic, setup{}, structs.JobStatusRunning},
		{"periodic parent stopped", mockPeriodic, setup{stop: true}, structs.JobStatusDead},
		{"parameterized parent", mockParameterized, setup{evals: []string{"complete"}}, structs.JobStatusRunning},
		{"parameterized parent stopped", mockParameterized, setup{stop: true}, structs.JobStatusDead},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			job := storedJob(t, s, 10, tc.job())
			index := uint64(20)
			var evalIDs, allocIDs []string
			for _, st := range tc.evals {
				e := mockEval(job, st)
				evalIDs = append(evalIDs, e.ID)
				must(t, s.UpsertEvals(index, []*structs.Evaluation{e}))
				index++
			}
			for _, st := range tc.allocs {
				a := mockAlloc(job, "node-1")
				if len(st) > 5 && st[:5] == "stop:" {
					a.DesiredStatus, st = structs.AllocDesiredStatusStop, st[5:]
				}
				allocIDs = append(allocIDs, a.ID)
				must(t, s.UpsertAllocs(index, []*structs.Allocation{a}))
				index++
				must(t, s.UpdateAllocsFromClient(index, []*structs.Allocation{clientUpdate(a.ID, st)}))
				index++
			}
			if tc.stop {
				stopped := job.Copy()
				stopped.Stop = true
				must(t, s.UpsertJob(index, stopped))
				index++
			}
			if tc.reapEvals {
				must(t, s.DeleteEval(index, evalIDs, nil))
				index++
			}
			if tc.purgeAllocs {
				must(t, s.DeleteEval(index, nil, allocIDs))
			}
			if got := jobStatus(t, s, job); got != tc.want {
				t.Errorf("status = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestJobTurnsDeadInTheWriteThatEndsItsLastAlloc(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("batch"))
	e := mockEval(job, structs.EvalStatusComplete)
	a := mockAlloc(job, "n1")
	must(t, s.UpsertEvals(11, []*structs.Evaluation{e}))
	must(t, s.UpsertAllocs(12, []*structs.Allocation{a}))
	if got := jobStatus(t, s, job); got != structs.JobStatusRunning {
		t.Fatalf("status = %q, want running", got)
	}
	must(t, s.UpdateAllocsFromClient(13, []*structs.Allocation{clientUpdate(a.ID, structs.AllocClientStatusComplete)}))
	cur, _ := s.JobByID(nil, job.Namespace, job.ID)
	if cur.Status != structs.JobStatusDead || cur.ModifyIndex != 13 {
		t.Errorf("after last alloc completes: status %q modify index %d, want dead at 13", cur.Status, cur.ModifyIndex)
	}
	v, _ := s.JobByIDAndVersion(nil, job.Namespace, job.ID, cur.Version)
	if v.Status != structs.JobStatusDead {
		t.Errorf("current version record status = %q, want it to follow the job", v.Status)
	}
}

func TestJobSummaryCounts(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob(structs.JobTypeService))
	ev := mockEval(job, structs.EvalStatusComplete)
	ev.QueuedAllocations = map[string]int{"web": 3, "unknown-group": 9}
	must(t, s.UpsertEvals(11, []*structs.Evaluation{ev}))

	a1, a2 := mockAlloc(job, "n1"), mockAlloc(job, "n2")
	must(t, s.UpsertAllocs(12, []*structs.Allocation{a1, a2}))
	must(t, s.UpdateAllocsFromClient(13, []*structs.Allocation{
		clientUpdate(a1.ID, structs.AllocClientStatusRunning),
		clientUpdate(a2.ID, structs.AllocClientStatusRunning),
	}))
	must(t, s.UpdateAllocsFromClient(14, []*structs.Allocation{clientUpdate(a2.ID, structs.AllocClientStatusFailed)}))
	// The server marks a1 lost (its node went down).
	must(t, s.UpsertPlanResults(15, &structs.ApplyPlanResultsRequest{
		AllocsStopped: []*structs.Allocation{{ID: a1.ID, DesiredDescription: "node down", ClientStatus: structs.AllocClientStatusLost}},
	}))
	// Repeating a status the client already reported changes nothing.
	must(t, s.UpdateAllocsFromClient(16, []*structs.Allocation{clientUpdate(a2.ID, structs.AllocClientStatusFailed)}))

	sum, err := s.JobSummaryByID(nil, job.Namespace, job.ID)
	must(t, err)
	want := structs.TaskGroupSummary{Queued: 1, Failed: 1, Lost: 1}
	if got := sum.Summary["web"]; got != want {
		t.Errorf("summary = %+v, want %+v", got, want)
	}
	if _, ok := sum.Summary["unknown-group"]; ok {
		t.Error("queued count of a group the job does not have was recorded")
	}
	if sum.ModifyIndex != 15 {
		t.Errorf("summary ModifyIndex = %d, want 15 (unchanged by the no-op update at 16)", sum.ModifyIndex)
	}
}

func TestJobSummaryRestartsForNewInstance(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("batch"))
	old := mockAlloc(job, "n1")
	must(t, s.UpsertAllocs(11, []*structs.Allocation{old}))
	must(t, s.DeleteJob(12, job.Namespace, job.ID))
	again := storedJob(t, s, 13, job.Copy())
	if again.CreateIndex != 13 || again.Version != 0 {
		t.Fatalf("re-registered job: create %d version %d, want 13/0", again.CreateIndex, again.Version)
	}
	must(t, s.UpdateAllocsFromClient(14, []*structs.Allocation{clientUpdate(old.ID, structs.AllocClientStatusRunning)}))
	sum, _ := s.JobSummaryByID(nil, job.Namespace, job.ID)
	if got := sum.Summary["web"]; got != (structs.TaskGroupSummary{}) {
		t.Errorf("new instance counts an old alloc: %+v", got)
	}
	cur, _ := s.AllocsByJob(nil, job.Namespace, job.ID, false)
	all, _ := s.AllocsByJob(nil, job.Namespace, job.ID, true)
	if len(cur) != 0 || len(all) != 1 {
		t.Errorf("AllocsByJob current=%d any=%d, want 0 and 1", len(cur), len(all))
	}
}

func TestChildrenSummary(t *testing.T) {
	s := testStore(t)
	parent := storedJob(t, s, 10, mockPeriodic())
	children := func() structs.JobChildrenSummary {
		t.Helper()
		sum, err := s.JobSummaryByID(nil, parent.Namespace, parent.ID)
		must(t, err)
		if sum.Children == nil {
			t.Fatal("parent summary has no Children")
		}
		return *sum.Children
	}
	if got := children(); got != (structs.JobChildrenSummary{}) {
		t.Fatalf("fresh parent children = %+v", got)
	}
	c1 := storedJob(t, s, 11, mockChild(parent, 1000))
	c2 := storedJob(t, s, 12, mockChild(parent, 2000))
	if got := children(); got != (structs.JobChildrenSummary{Pending: 2}) {
		t.Errorf("two new children = %+v, want 2 pending", got)
	}
	a := mockAlloc(c1, "n1")
	must(t, s.UpsertAllocs(13, []*structs.Allocation{a}))
	if got := children(); got != (structs.JobChildrenSummary{Pending: 1, Running: 1}) {
		t.Errorf("one child running = %+v", got)
	}
	must(t, s.UpdateAllocsFromClient(14, []*structs.Allocation{clientUpdate(a.ID, structs.AllocClientStatusComplete)}))
	if got := children(); got != (structs.JobChildrenSummary{Pending: 1, Dead: 1}) {
		t.Errorf("one child done = %+v", got)
	}
	must(t, s.DeleteJob(15, c2.Namespace, c2.ID))
	if got := children(); got != (structs.JobChildrenSummary{Dead: 1}) {
		t.Errorf("after deleting the pending child = %+v", got)
	}
	kids, err := s.JobsByParent(nil, parent.Namespace, parent.ID)
	must(t, err)
	if len(kids) != 1 || kids[0].ID != c1.ID {
		t.Errorf("JobsByParent = %v, want [%s]", kids, c1.ID)
	}
}

func TestDeleteJob(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockPeriodic())
	must(t, s.UpsertJob(11, job.Copy()))
	must(t, s.UpsertPeriodicLaunch(12, &structs.PeriodicLaunch{ID: job.ID, Namespace: job.Namespace}))
	must(t, s.DeleteJob(13, job.Namespace, job.ID))
	if j, _ := s.JobByID(nil, job.Namespace, job.ID); j != nil {
		t.Error("job kept")
	}
	if v, _ := s.JobVersionsByID(nil, job.Namespace, job.ID); len(v) != 0 {
		t.Errorf("%d versions kept", len(v))
	}
	if sum, _ := s.JobSummaryByID(nil, job.Namespace, job.ID); sum != nil {
		t.Error("summary kept")
	}
	if l, _ := s.PeriodicLaunchByID(nil, job.Namespace, job.ID); l != nil {
		t.Error("launch kept")
	}
	err := s.DeleteJob(14, job.Namespace, job.ID)
	if !errors.Is(err, structs.ErrNotFound) {
		t.Errorf("deleting a missing job: %v, want ErrNotFound", err)
	}
}

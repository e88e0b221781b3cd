package state

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestUpsertEvalsStamps(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("batch"))
	e := mockEval(job, structs.EvalStatusPending)
	t0 := time.Unix(1700000000, 0)
	must(t, s.At(t0).UpsertEvals(11, []*structs.Evaluation{e}))
	first, _ := s.EvalByID(nil, e.ID)
	if first.CreateIndex != 11 || first.ModifyIndex != 11 || first.CreateTime != t0.UnixNano() || first.ModifyTime != t0.UnixNano() {
		t.Fatalf("new eval stamps: %+v", first)
	}
	upd := first.Copy()
	upd.Status = structs.EvalStatusComplete
	upd.CreateIndex, upd.CreateTime = 0, 0
	t1 := t0.Add(time.Minute)
	must(t, s.At(t1).UpsertEvals(12, []*structs.Evaluation{upd}))
	got, _ := s.EvalByID(nil, e.ID)
	if got.CreateIndex != 11 || got.CreateTime != first.CreateTime || got.ModifyIndex != 12 || got.ModifyTime != t1.UnixNano() {
		t.Errorf("updated eval: create %d/%d modify %d/%d", got.CreateIndex, got.CreateTime, got.ModifyIndex, got.ModifyTime)
	}
	// A write without a time keeps the eval's own times: the store never
	// reads the clock.
	again := got.Copy()
	again.ModifyTime = 42
	must(t, s.UpsertEvals(13, []*structs.Evaluation{again}))
	if g, _ := s.EvalByID(nil, e.ID); g.ModifyTime != 42 || g.CreateTime != t0.UnixNano() {
		t.Errorf("unstamped write: create %d modify %d, want %d and 42", g.CreateTime, g.ModifyTime, t0.UnixNano())
	}
	if first.Status != structs.EvalStatusPending {
		t.Error("a writer modified the previously stored eval")
	}
}

func TestCompleteEvalCancelsBlockedEvals(t *testing.T) {
	cases := []struct {
		name       string
		done       func(*structs.Evaluation)
		sameBatch  bool
		wantStatus string
	}{
		{"complete without failures cancels", func(*structs.Evaluation) {}, false, structs.EvalStatusCancelled},
		{"complete with failures keeps", func(e *structs.Evaluation) {
			e.FailedTGAllocs = map[string]*structs.AllocMetric{"web": {NodesExhausted: 1}}
		}, false, structs.EvalStatusBlocked},
		{"failed eval keeps", func(e *structs.Evaluation) { e.Status = structs.EvalStatusFailed }, false, structs.EvalStatusBlocked},
		{"blocked eval of the same batch is kept", func(*structs.Evaluation) {}, true, structs.EvalStatusBlocked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			job := storedJob(t, s, 10, mockJob(structs.JobTypeService))
			blocked := mockEval(job, structs.EvalStatusBlocked)
			done := mockEval(job, structs.EvalStatusComplete)
			tc.done(done)
			if tc.sameBatch {
				must(t, s.UpsertEvals(11, []*structs.Evaluation{blocked, done}))
			} else {
				must(t, s.UpsertEvals(11, []*structs.Evaluation{blocked}))
				must(t, s.UpsertEvals(12, []*structs.Evaluation{done}))
			}
			got, _ := s.EvalByID(nil, blocked.ID)
			if got.Status != tc.wantStatus {
				t.Errorf("blocked eval status = %q, want %q", got.Status, tc.wantStatus)
			}
		})
	}
}

func TestDeleteEvalReaps(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("batch"))
	e := mockEval(job, structs.EvalStatusComplete)
	a := mockAlloc(job, "n1")
	a.EvalID = e.ID
	must(t, s.UpsertEvals(11, []*structs.Evaluation{e}))
	must(t, s.UpsertAllocs(12, []*structs.Allocation{a}))
	must(t, s.UpdateAllocsFromClient(13, []*structs.Allocation{clientUpdate(a.ID, structs.AllocClientStatusComplete)}))
	must(t, s.DeleteEval(14, []string{e.ID, "missing"}, []string{a.ID}))
	if got, _ := s.EvalByID(nil, e.ID); got != nil {
		t.Error("eval kept")
	}
	if got, _ := s.AllocsByEval(nil, e.ID); len(got) != 0 {
		t.Error("alloc kept")
	}
	if got := jobStatus(t, s, job); got != structs.JobStatusDead {
		t.Errorf("job status after reaping = %q, want dead", got)
	}
}

func TestEvalReaders(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("batch"))
	prod := mockJob("batch")
	prod.Namespace = "prod"
	prod = storedJob(t, s, 11, prod)
	e1, e2, e3 := mockEval(job, "pending"), mockEval(job, "complete"), mockEval(prod, "pending")
	e1.ID, e2.ID, e3.ID = "1111-a", "1122-b", "1111-c"
	must(t, s.UpsertEvals(12, []*structs.Evaluation{e1, e2, e3}))
	count := func(evals []*structs.Evaluation, err error) int {
		t.Helper()
		must(t, err)
		return len(evals)
	}
	cases := []struct {
		name      string
		got, want int
	}{
		{"by job", count(s.EvalsByJob(nil, job.Namespace, job.ID)), 2},
		{"by job other namespace", count(s.EvalsByJob(nil, "prod", job.ID)), 0},
		{"prefix all", count(s.EvalsByIDPrefix(nil, AllNamespaces, "1111")), 2},
		{"prefix ns", count(s.EvalsByIDPrefix(nil, "prod", "11")), 1},
		{"list default", count(s.EvalList(nil, structs.DefaultNamespace, "")), 2},
		{"all", count(s.Evals(nil)), 3},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %d evals, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestJobReaders(t *testing.T) {
	s := testStore(t)
	mk := func(ns, id string) *structs.Job {
		j := mockJob(structs.JobTypeService)
		j.Namespace, j.ID, j.Name = ns, id, id
		return j
	}
	for i, j := range []*structs.Job{mk("default", "web"), mk("default", "web-api"), mk("default", "db"), mk("prod", "web")} {
		must(t, s.UpsertJob(uint64(10+i), j))
	}
	count := func(jobs []*structs.Job, err error) int {
		t.Helper()
		must(t, err)
		return len(jobs)
	}
	cases := []struct {
		name      string
		got, want int
	}{
		{"all", count(s.Jobs(nil)), 4},
		{"namespace", count(s.JobsByNamespace(nil, "default")), 3},
		{"namespace wildcard", count(s.JobsByNamespace(nil, AllNamespaces)), 4},
		{"prefix", count(s.JobsByIDPrefix(nil, "default", "web")), 2},
		{"prefix other ns", count(s.JobsByIDPrefix(nil, "prod", "web")), 1},
		{"prefix wildcard", count(s.JobsByIDPrefix(nil, AllNamespaces, "we")), 3},
		{"list", count(s.JobList(nil, "default", "")), 3},
		{"exact id is not a prefix scan", func() int {
			j, _ := s.JobByID(nil, "default", "we")
			if j != nil {
				return 1
			}
			return 0
		}(), 0},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %d jobs, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestSchedulerConfigAndLaunches(t *testing.T) {
	s := testStore(t)
	idx, cfg, err := s.SchedulerConfig()
	must(t, err)
	if idx != 0 || !cfg.PreemptionConfig.SystemSchedulerEnabled {
		t.Errorf("default config: index %d %+v", idx, cfg)
	}
	must(t, s.SchedulerSetConfig(10, &structs.SchedulerConfiguration{SchedulerAlgorithm: "spread"}))
	must(t, s.SchedulerSetConfig(11, &structs.SchedulerConfiguration{SchedulerAlgorithm: "binpack", PreemptionConfig: structs.PreemptionConfig{BatchSchedulerEnabled: true}}))
	idx, cfg, err = s.SchedulerConfig()
	must(t, err)
	if idx != 11 || cfg.CreateIndex != 10 || !cfg.PreemptionConfig.BatchSchedulerEnabled {
		t.Errorf("config: index %d %+v", idx, cfg)
	}

	must(t, s.UpsertPeriodicLaunch(12, &structs.PeriodicLaunch{ID: "p", Namespace: "default"}))
	must(t, s.UpsertPeriodicLaunch(13, &structs.PeriodicLaunch{ID: "p", Namespace: "default"}))
	l, _ := s.PeriodicLaunchByID(nil, "default", "p")
	if l == nil || l.CreateIndex != 12 || l.ModifyIndex != 13 {
		t.Errorf("launch = %+v", l)
	}
	if all, _ := s.PeriodicLaunches(nil); len(all) != 1 {
		t.Errorf("%d launches", len(all))
	}
	must(t, s.DeletePeriodicLaunch(14, "default", "p"))
	if err := s.DeletePeriodicLaunch(15, "default", "p"); err == nil {
		t.Error("deleting a missing launch succeeded")
	}
}

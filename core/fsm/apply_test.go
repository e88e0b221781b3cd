package fsm

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// registerJob applies a JobRegister of job with a pending eval at index and
// returns the stored job.
func registerJob(t *testing.T, f *FSM, index uint64, job *structs.Job) *structs.Job {
	t.Helper()
	mustApply(t, f, index, structs.JobRegisterRequestType, &structs.JobRegisterRequest{
		Job: job, Eval: mockEval(structs.DefaultNamespace, job.ID, structs.EvalStatusPending),
	})
	stored, err := f.State().JobByID(nil, structs.DefaultNamespace, job.ID)
	must(t, err)
	if stored == nil {
		t.Fatalf("job %s not registered", job.ID)
	}
	return stored
}

func TestApplyMessageTypes(t *testing.T) {
	yes := true
	cases := []struct {
		name string
		run  func(t *testing.T, f *FSM, rec *recorder)
	}{
		{"node register", func(t *testing.T, f *FSM, rec *recorder) {
			n := mockNode()
			mustApply(t, f, 10, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			got, _ := f.State().NodeByID(nil, n.ID)
			if got == nil || got.CreateIndex != 10 {
				t.Fatalf("node = %+v", got)
			}
			if len(rec.nodes) != 1 || rec.nodes[0] != got {
				t.Errorf("NodeChanged calls = %v, want the stored node", rec.nodes)
			}
		}},
		{"node deregister", func(t *testing.T, f *FSM, rec *recorder) {
			n := mockNode()
			mustApply(t, f, 10, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			mustApply(t, f, 11, structs.NodeDeregisterRequestType, &structs.NodeDeregisterRequest{NodeIDs: []string{n.ID}})
			if got, _ := f.State().NodeByID(nil, n.ID); got != nil {
				t.Error("node kept")
			}
			resp := apply(t, f, 12, structs.NodeDeregisterRequestType, &structs.NodeDeregisterRequest{NodeIDs: []string{n.ID}})
			if err, _ := resp.(error); !errors.Is(err, structs.ErrNotFound) {
				t.Errorf("deregistering a missing node: response %v, want ErrNotFound", resp)
			}
		}},
		{"node status with evals", func(t *testing.T, f *FSM, rec *recorder) {
			n := mockNode()
			mustApply(t, f, 10, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			ev := mockEval(structs.DefaultNamespace, "sys", structs.EvalStatusPending)
			mustApply(t, f, 11, structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{
				NodeID: n.ID, Status: structs.NodeStatusDown, UpdatedAt: 99,
				NodeEvent: &structs.NodeEvent{Message: "missed heartbeat"}, Evals: []*structs.Evaluation{ev},
			})
			got, _ := f.State().NodeByID(nil, n.ID)
			if got.Status != structs.NodeStatusDown || got.StatusUpdatedAt != 99 || got.Events[len(got.Events)-1].Message != "missed heartbeat" {
				t.Errorf("node = %s at %d events %d", got.Status, got.StatusUpdatedAt, len(got.Events))
			}
			if e, _ := f.State().EvalByID(nil, ev.ID); e == nil || e.CreateIndex != 11 {
				t.Errorf("eval = %+v", e)
			}
			if len(rec.nodes) != 2 || len(rec.evals) != 1 || rec.evals[0].ID != ev.ID {
				t.Errorf("hooks: %d node calls, evals %v", len(rec.nodes), rec.evals)
			}
		}},
		{"node drain", func(t *testing.T, f *FSM, rec *recorder) {
			n := mockNode()
			mustApply(t, f, 10, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			mustApply(t, f, 11, structs.NodeUpdateDrainRequestType, &structs.NodeUpdateDrainRequest{
				NodeID: n.ID, DrainStrategy: &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}},
				Meta: map[string]string{"reason": "kernel upgrade"},
			})
			got, _ := f.State().NodeByID(nil, n.ID)
			if got.DrainStrategy == nil || got.SchedulingEligibility != structs.NodeSchedulingIneligible ||
				got.LastDrain == nil || got.LastDrain.Meta["reason"] != "kernel upgrade" {
				t.Errorf("drained node = %+v", got)
			}
			if len(rec.nodes) != 2 {
				t.Errorf("%d NodeChanged calls, want 2", len(rec.nodes))
			}
		}},
		{"node eligibility refused while draining", func(t *testing.T, f *FSM, rec *recorder) {
			n := mockNode()
			n.DrainStrategy = &structs.DrainStrategy{}
			mustApply(t, f, 10, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			resp := apply(t, f, 11, structs.NodeUpdateEligibilityRequestType, &structs.NodeUpdateEligibilityRequest{
				NodeID: n.ID, Eligibility: structs.NodeSchedulingEligible,
				Evals: []*structs.Evaluation{mockEval(structs.DefaultNamespace, "j", structs.EvalStatusPending)},
			})
			if err, _ := resp.(error); !errors.Is(err, structs.ErrInvalid) {
				t.Errorf("response %v, want ErrInvalid", resp)
			}
			if len(rec.evals) != 0 || len(rec.nodes) != 1 {
				t.Errorf("a refused entry reached the hooks: evals %d nodes %d", len(rec.evals), len(rec.nodes))
			}
			mustApply(t, f, 12, structs.NodeUpdateEligibilityRequestType, &structs.NodeUpdateEligibilityRequest{
				NodeID: n.ID, Eligibility: structs.NodeSchedulingIneligible,
			})
		}},
		{"job register", func(t *testing.T, f *FSM, rec *recorder) {
			job := mockJob("batch")
			ev := mockEval("", job.ID, structs.EvalStatusPending)
			ev.Namespace = structs.DefaultNamespace
			mustApply(t, f, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: ev})
			got, _ := f.State().JobByID(nil, structs.DefaultNamespace, job.ID)
			if got == nil || got.Priority != structs.JobDefaultPriority || got.JobModifyIndex != 10 || got.Status != structs.JobStatusPending {
				t.Fatalf("job not canonicalized and stored: %+v", got)
			}
			e, _ := f.State().EvalByID(nil, ev.ID)
			if e == nil || e.JobModifyIndex != 10 {
				t.Errorf("eval = %+v, want JobModifyIndex 10", e)
			}
			if len(rec.upserted) != 1 || rec.upserted[0] != got || len(rec.evals) != 1 {
				t.Errorf("hooks: upserted %v evals %v", rec.upserted, rec.evals)
			}
			// Unchanged spec: only an eval, stamped with the job's index.
			ev2 := mockEval(structs.DefaultNamespace, job.ID, structs.EvalStatusPending)
			mustApply(t, f, 11, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Namespace: structs.DefaultNamespace, JobID: job.ID, Eval: ev2})
			if e, _ := f.State().EvalByID(nil, ev2.ID); e == nil || e.JobModifyIndex != 10 {
				t.Errorf("eval of unchanged job = %+v, want JobModifyIndex 10", e)
			}
			if cur, _ := f.State().JobByID(nil, structs.DefaultNamespace, job.ID); cur.Version != 0 {
				t.Errorf("unchanged job got version %d", cur.Version)
			}
			if len(rec.upserted) != 1 {
				t.Error("JobUpserted called without a job write")
			}
		}},
		{"periodic parent and child launches", func(t *testing.T, f *FSM, rec *recorder) {
			now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			parent := mockJob("batch")
			parent.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "* * * * *"}
			mustApply(t, f, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent, Now: now.UnixNano()})
			l, _ := f.State().PeriodicLaunchByID(nil, structs.DefaultNamespace, parent.ID)
			if l == nil || !l.Launch.Equal(now) {
				t.Fatalf("launch of a new parent = %+v, want %v", l, now)
			}
			if evals, _ := f.State().Evals(nil); len(evals) != 0 {
				t.Error("a periodic parent registration created an eval")
			}
			// Updating the parent keeps the recorded launch.
			mustApply(t, f, 11, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent, Now: now.Add(time.Hour).UnixNano()})
			if l, _ := f.State().PeriodicLaunchByID(nil, structs.DefaultNamespace, parent.ID); !l.Launch.Equal(now) {
				t.Errorf("update moved the launch to %v", l.Launch)
			}
			child := mockJob("batch")
			child.ID = parent.ID + "/periodic-1800000000"
			child.ParentID = parent.ID
			registerJob(t, f, 12, child)
			l, _ = f.State().PeriodicLaunchByID(nil, structs.DefaultNamespace, parent.ID)
			if want := time.Unix(1800000000, 0); !l.Launch.Equal(want) || l.ModifyIndex != 12 {
				t.Errorf("launch after child = %v at %d, want %v at 12", l.Launch, l.ModifyIndex, want)
			}
			sum, _ := f.State().JobSummaryByID(nil, structs.DefaultNamespace, parent.ID)
			if sum.Children == nil || sum.Children.Pending != 1 {
				t.Errorf("parent children = %+v", sum.Children)
			}
		}},
		{"dispatch idempotency", func(t *testing.T, f *FSM, rec *recorder) {
			parent := mockJob("batch")
			parent.ParameterizedJob = &structs.ParameterizedJobConfig{}
			mustApply(t, f, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent})
			dispatch := func(index uint64, id string) {
				c := mockJob("batch")
				c.ID, c.ParentID, c.Dispatched, c.DispatchIdempotencyToken = id, parent.ID, true, "tok"
				c.ParameterizedJob = &structs.ParameterizedJobConfig{}
				mustApply(t, f, index, structs.JobRegisterRequestType, &structs.JobRegisterRequest{
					Job: c, Eval: mockEval(structs.DefaultNamespace, id, structs.EvalStatusPending)})
			}
			dispatch(11, parent.ID+"/dispatch-1-aaaaaaaa")
			dispatch(12, parent.ID+"/dispatch-1-bbbbbbbb")
			kids, _ := f.State().JobsByParent(nil, structs.DefaultNamespace, parent.ID)
			if len(kids) != 1 || kids[0].ID != parent.ID+"/dispatch-1-aaaaaaaa" {
				t.Errorf("children = %d, want only the first dispatch", len(kids))
			}
			if evals, _ := f.State().Evals(nil); len(evals) != 1 {
				t.Errorf("%d evals, want the first dispatch's only", len(evals))
			}
		}},
		{"job deregister stop", func(t *testing.T, f *FSM, rec *recorder) {
			job := registerJob(t, f, 10, mockJob("service"))
			ev := mockEval(structs.DefaultNamespace, job.ID, structs.EvalStatusPending)
			mustApply(t, f, 11, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{
				Namespace: structs.DefaultNamespace, JobID: job.ID, Eval: ev})
			cur, _ := f.State().JobByID(nil, structs.DefaultNamespace, job.ID)
			if !cur.Stop || cur.Version != 1 || cur.JobModifyIndex != 11 {
				t.Errorf("stopped job: stop %v version %d jmi %d", cur.Stop, cur.Version, cur.JobModifyIndex)
			}
			if e, _ := f.State().EvalByID(nil, ev.ID); e.JobModifyIndex != 11 {
				t.Errorf("deregister eval JobModifyIndex = %d, want 11", e.JobModifyIndex)
			}
			if last := rec.upserted[len(rec.upserted)-1]; !last.Stop {
				t.Error("dispatcher not told about the stop")
			}
			// Stopping again writes no new version.
			mustApply(t, f, 12, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: structs.DefaultNamespace, JobID: job.ID})
			if cur, _ := f.State().JobByID(nil, structs.DefaultNamespace, job.ID); cur.Version != 1 {
				t.Errorf("second stop wrote version %d", cur.Version)
			}
		}},
		{"job deregister purge", func(t *testing.T, f *FSM, rec *recorder) {
			job := mockJob("batch")
			job.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "* * * * *"}
			mustApply(t, f, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
			mustApply(t, f, 11, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{
				Namespace: structs.DefaultNamespace, JobID: job.ID, Purge: true})
			if j, _ := f.State().JobByID(nil, structs.DefaultNamespace, job.ID); j != nil {
				t.Error("purged job kept")
			}
			if l, _ := f.State().PeriodicLaunchByID(nil, structs.DefaultNamespace, job.ID); l != nil {
				t.Error("purged job's launch kept")
			}
			if len(rec.deleted) != 1 {
				t.Errorf("JobDeleted calls = %v", rec.deleted)
			}
			// Purging a missing job is fine; stopping one is not.
			mustApply(t, f, 12, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: structs.DefaultNamespace, JobID: job.ID, Purge: true})
			resp := apply(t, f, 13, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: structs.DefaultNamespace, JobID: job.ID})
			if err, _ := resp.(error); !errors.Is(err, structs.ErrNotFound) {
				t.Errorf("stopping a missing job: %v, want ErrNotFound", resp)
			}
		}},
		{"job batch deregister", func(t *testing.T, f *FSM, rec *recorder) {
			a := registerJob(t, f, 10, mockJob("batch"))
			b := registerJob(t, f, 11, mockJob("batch"))
			mustApply(t, f, 12, structs.JobBatchDeregisterRequestType, &structs.JobBatchDeregisterRequest{
				Jobs: []structs.NamespacedID{{ID: a.ID, Namespace: a.Namespace}, {ID: b.ID, Namespace: b.Namespace}, {ID: "gone", Namespace: "default"}},
			})
			if jobs, _ := f.State().Jobs(nil); len(jobs) != 0 {
				t.Errorf("%d jobs left", len(jobs))
			}
			if len(rec.deleted) != 2 {
				t.Errorf("JobDeleted calls = %v", rec.deleted)
			}
		}},
		{"gc reap", func(t *testing.T, f *FSM, rec *recorder) {
			job := mockJob("batch")
			job.Stop = true
			stored := registerJob(t, f, 10, job)
			evals, _ := f.State().EvalsByJob(nil, stored.Namespace, stored.ID)
			done := evals[0].Copy()
			done.Status = structs.EvalStatusComplete
			mustApply(t, f, 11, structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{done}})
			stored, _ = f.State().JobByID(nil, stored.Namespace, stored.ID)
			e, _ := f.State().EvalByID(nil, done.ID)
			req := &structs.GCReapRequest{
				Evals: []structs.GCRef{{Namespace: e.Namespace, ID: e.ID, ModifyIndex: e.ModifyIndex}},
				Jobs:  []structs.GCRef{{Namespace: stored.Namespace, ID: stored.ID, ModifyIndex: stored.ModifyIndex}, {Namespace: "default", ID: "gone", ModifyIndex: 1}},
			}
			resp, ok := apply(t, f, 12, structs.GCReapRequestType, req).(*structs.GCReapResponse)
			if !ok || resp.Evals != 1 || resp.Jobs != 1 || resp.Skipped != 1 {
				t.Fatalf("response %+v", resp)
			}
			if len(rec.deleted) != 1 {
				t.Errorf("JobDeleted calls = %v", rec.deleted)
			}
			// Over its bounds: an error response, never a stop.
			big := &structs.GCReapRequest{Allocs: make([]structs.GCRef, structs.MaxGCReapObjects+1)}
			if err, _ := apply(t, f, 13, structs.GCReapRequestType, big).(error); !errors.Is(err, structs.ErrInvalid) || f.Failed() != nil {
				t.Errorf("oversized reap: %v, failed %v", err, f.Failed())
			}
			buf, _ := Encode(structs.GCReapRequestType, big)
			if CheckEntry(buf) == nil {
				t.Error("CheckEntry passes an oversized reap")
			}
			if typeName(structs.GCReapRequestType) != "GCReap" {
				t.Errorf("type name %q", typeName(structs.GCReapRequestType))
			}
		}},
		{"reconcile summaries", func(t *testing.T, f *FSM, rec *recorder) {
			registerJob(t, f, 10, mockJob("batch"))
			registerJob(t, f, 11, mockJob("batch"))
			// An entry written before paging (no limit): every job at once.
			all, ok := apply(t, f, 12, structs.ReconcileJobSummariesRequestType, &structs.ReconcileJobSummariesRequest{}).(*structs.ReconcileJobSummariesResponse)
			if !ok || all.Reconciled != 2 || !all.Done {
				t.Fatalf("unpaged response %+v", all)
			}
			first, ok := apply(t, f, 13, structs.ReconcileJobSummariesRequestType, &structs.ReconcileJobSummariesRequest{Limit: 1}).(*structs.ReconcileJobSummariesResponse)
			if !ok || first.Reconciled != 1 || first.Done || first.NextID == "" {
				t.Fatalf("first page %+v", first)
			}
			bad := &structs.ReconcileJobSummariesRequest{Limit: structs.MaxReconcileJobs + 1}
			if err, _ := apply(t, f, 14, structs.ReconcileJobSummariesRequestType, bad).(error); !errors.Is(err, structs.ErrInvalid) || f.Failed() != nil {
				t.Errorf("limit over its bound: %v, failed %v", err, f.Failed())
			}
			buf, _ := Encode(structs.ReconcileJobSummariesRequestType, bad)
			if CheckEntry(buf) == nil {
				t.Error("CheckEntry passes a limit over its bound")
			}
		}},
		{"plan follow-ups reach the broker once", func(t *testing.T, f *FSM, rec *recorder) {
			job := registerJob(t, f, 10, mockJob("batch"))
			fu := mockEval(job.Namespace, job.ID, structs.EvalStatusPending)
			req := func() *structs.ApplyPlanResultsRequest {
				c := *fu
				return &structs.ApplyPlanResultsRequest{Job: job, FollowupEvals: []*structs.Evaluation{&c}}
			}
			seen := len(rec.evals)
			mustApply(t, f, 11, structs.ApplyPlanResultsRequestType, req())
			if n := len(rec.evals) - seen; n != 1 || rec.evals[seen].ID != fu.ID || rec.evals[seen].CreateIndex != 11 {
				t.Fatalf("EvalsCommitted saw %d evals from the first plan, want the follow-up", n)
			}
			// A retried attempt names the same eval: stored already, it
			// is not handed to the broker again.
			mustApply(t, f, 12, structs.ApplyPlanResultsRequestType, req())
			if n := len(rec.evals) - seen; n != 1 {
				t.Errorf("EvalsCommitted saw %d evals from both plans, want the follow-up once", n)
			}
		}},
		{"eval update and delete", func(t *testing.T, f *FSM, rec *recorder) {
			job := registerJob(t, f, 10, mockJob("batch"))
			blocked := mockEval(job.Namespace, job.ID, structs.EvalStatusBlocked)
			mustApply(t, f, 11, structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{blocked}})
			done := mockEval(job.Namespace, job.ID, structs.EvalStatusComplete)
			mustApply(t, f, 12, structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{done}})
			if e, _ := f.State().EvalByID(nil, blocked.ID); e.Status != structs.EvalStatusCancelled {
				t.Errorf("blocked eval = %s after a complete eval", e.Status)
			}
			if n := len(rec.evals); n != 3 || rec.evals[2].ModifyIndex != 12 {
				t.Errorf("EvalsCommitted saw %d evals", n)
			}
			mustApply(t, f, 13, structs.EvalDeleteRequestType, &structs.EvalDeleteRequest{Evals: []string{blocked.ID, done.ID}})
			if e, _ := f.State().EvalByID(nil, done.ID); e != nil {
				t.Error("eval not reaped")
			}
			mustApply(t, f, 14, structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{})
			if f.State().LatestIndex() != 14 {
				t.Errorf("an empty eval update did not move the index: %d", f.State().LatestIndex())
			}
		}},
		{"plan results and client updates", func(t *testing.T, f *FSM, rec *recorder) {
			job := registerJob(t, f, 10, mockJob("service"))
			victimJob := registerJob(t, f, 11, mockJob("batch"))
			victim := mockAlloc(victimJob, "n1")
			victim.Job = victimJob
			mustApply(t, f, 12, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{AllocsUpdated: []*structs.Allocation{victim}})
			placed := mockAlloc(job, "n1")
			pe := mockEval(victimJob.Namespace, victimJob.ID, structs.EvalStatusPending)
			pe.TriggeredBy = structs.EvalTriggerPreemption
			mustApply(t, f, 13, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
				Job:             job,
				AllocsUpdated:   []*structs.Allocation{placed},
				AllocsPreempted: []*structs.Allocation{{ID: victim.ID, PreemptedByAllocation: placed.ID}},
				PreemptionEvals: []*structs.Evaluation{pe},
			})
			got, _ := f.State().AllocByID(nil, placed.ID)
			if got == nil || got.Job == nil || got.Job.ID != job.ID || got.CreateIndex != 13 {
				t.Fatalf("placed alloc = %+v", got)
			}
			if v, _ := f.State().AllocByID(nil, victim.ID); v.DesiredStatus != structs.AllocDesiredStatusEvict {
				t.Errorf("victim desired %s", v.DesiredStatus)
			}
			if last := rec.evals[len(rec.evals)-1]; last.ID != pe.ID {
				t.Errorf("preemption eval not handed to the hooks")
			}

			followup := mockEval(job.Namespace, job.ID, structs.EvalStatusPending)
			mustApply(t, f, 14, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{
				Alloc: []*structs.Allocation{{ID: placed.ID, ClientStatus: structs.AllocClientStatusFailed}, {ID: "gone", ClientStatus: structs.AllocClientStatusFailed}},
				Evals: []*structs.Evaluation{followup},
			})
			if len(rec.clientAlloc) != 1 || rec.clientAlloc[0].NodeID != "n1" || rec.clientAlloc[0].ClientStatus != structs.AllocClientStatusFailed {
				t.Errorf("AllocsClientUpdated = %+v, want the stored alloc", rec.clientAlloc)
			}
			if e, _ := f.State().EvalByID(nil, followup.ID); e == nil {
				t.Error("client update's eval not written")
			}
		}},
		{"desired transitions", func(t *testing.T, f *FSM, rec *recorder) {
			job := registerJob(t, f, 10, mockJob("service"))
			a := mockAlloc(job, "n1")
			mustApply(t, f, 11, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{a}})
			ev := mockEval(job.Namespace, job.ID, structs.EvalStatusPending)
			mustApply(t, f, 12, structs.AllocUpdateDesiredTransitionRequestType, &structs.AllocUpdateDesiredTransitionRequest{
				Allocs: map[string]*structs.DesiredTransition{a.ID: {Migrate: &yes}}, Evals: []*structs.Evaluation{ev}})
			if got, _ := f.State().AllocByID(nil, a.ID); !got.DesiredTransition.ShouldMigrate() {
				t.Error("migrate not set")
			}
			if last := rec.evals[len(rec.evals)-1]; last.ID != ev.ID {
				t.Error("transition eval not handed to the hooks")
			}
		}},
		{"scheduler config", func(t *testing.T, f *FSM, rec *recorder) {
			mustApply(t, f, 10, structs.SchedulerConfigRequestType, &structs.SchedulerSetConfigRequest{
				Config: structs.SchedulerConfiguration{SchedulerAlgorithm: "spread", PreemptionConfig: structs.PreemptionConfig{ServiceSchedulerEnabled: true}}})
			idx, cfg, err := f.State().SchedulerConfig()
			must(t, err)
			if idx != 10 || cfg.SchedulerAlgorithm != "spread" || !cfg.PreemptionConfig.ServiceSchedulerEnabled {
				t.Errorf("config at %d = %+v", idx, cfg)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, rec := testFSM(t)
			tc.run(t, f, rec)
		})
	}
}

func TestApplyUnknownTypes(t *testing.T) {
	cases := []struct {
		name     string
		data     []byte
		wantStop bool
	}{
		{"unknown with ignore flag", []byte{byte(structs.IgnoreUnknownTypeFlag | 127), '{', '}'}, false},
		{"bare ignore flag", []byte{byte(structs.IgnoreUnknownTypeFlag)}, false},
		{"unknown without flag", []byte{127, '{', '}'}, true},
		{"undecodable payload", []byte{byte(structs.NodeRegisterRequestType), '{'}, true},
		{"empty entry", []byte{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := testFSM(t)
			resp := f.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: tc.data})
			if stopped := f.Failed() != nil; stopped != tc.wantStop {
				t.Fatalf("stopped = %v (%v), want %v", stopped, f.Failed(), tc.wantStop)
			}
			if !tc.wantStop && resp != nil {
				t.Errorf("response = %v, want nil", resp)
			}
			if f.State().LatestIndex() != 0 {
				t.Error("a skipped entry wrote state")
			}
		})
	}

	// A known type carrying the flag is applied normally.
	f, _ := testFSM(t)
	n := mockNode()
	buf, err := Encode(structs.NodeRegisterRequestType|structs.IgnoreUnknownTypeFlag, &structs.NodeRegisterRequest{Node: n})
	must(t, err)
	if resp := f.Apply(&raft.Log{Index: 9, Type: raft.LogCommand, Data: buf}); resp != nil {
		t.Fatal(resp)
	}
	if got, _ := f.State().NodeByID(nil, n.ID); got == nil {
		t.Error("flagged known entry not applied")
	}
}

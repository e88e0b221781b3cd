package schedio

import (
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// TestConvertFollowupsFromFixture: the follow-up evals a plugin asks for
// become pending evals of the job, due when asked, in the plan with the
// marks of the allocs they replace; an ID an eval of the job already has
// is an earlier attempt's and is not created again; a bad one refuses the
// whole response with ErrInvalid naming the field.
func TestConvertFollowupsFromFixture(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	const (
		fresh   = "00000000-0000-0000-0000-0000000000f1"
		earlier = "00000000-0000-0000-0000-0000000000f2"
		foreign = "00000000-0000-0000-0000-0000000000f3"
	)
	due := now.Add(time.Minute).UnixNano()
	fe := func(id string) *pb.FollowupEval { return &pb.FollowupEval{Id: id, WaitUntilNs: due} }
	mark := func(alloc, eval string) *pb.AllocFollowup {
		return &pb.AllocFollowup{AllocId: alloc, FollowupEvalId: eval}
	}
	resp := func(fes []*pb.FollowupEval, marks ...*pb.AllocFollowup) *pb.ScheduleResponse {
		return &pb.ScheduleResponse{FollowupEvals: fes, Plan: &pb.Plan{AllocFollowups: marks}}
	}
	cases := []struct {
		name       string
		resp       func(p *planFixture) *pb.ScheduleResponse
		wantEvals  []string // IDs of the evals the plan creates
		wantMarks  int
		wantErr    string
		purgedJob  bool
		wantNoPlan bool
	}{
		{"nothing asked", func(*planFixture) *pb.ScheduleResponse { return &pb.ScheduleResponse{} }, nil, 0, "", false, true},
		{"one eval and its mark", func(p *planFixture) *pb.ScheduleResponse {
			return resp([]*pb.FollowupEval{fe(fresh)}, mark(p.running.ID, fresh))
		}, []string{fresh}, 1, "", false, false},
		{"an earlier attempt's eval is not created again", func(p *planFixture) *pb.ScheduleResponse {
			return resp([]*pb.FollowupEval{fe(fresh), fe(earlier)}, mark(p.running.ID, earlier))
		}, []string{fresh}, 1, "", false, false},
		{"an eval of another job", func(*planFixture) *pb.ScheduleResponse {
			return resp([]*pb.FollowupEval{fe(foreign)})
		}, nil, 0, "is an eval of another job", false, false},
		{"due in the past of the epoch", func(*planFixture) *pb.ScheduleResponse {
			return resp([]*pb.FollowupEval{{Id: fresh, WaitUntilNs: -1}})
		}, nil, 0, "wait_until_ns -1 must be after the epoch", false, false},
		{"due beyond the bound", func(*planFixture) *pb.ScheduleResponse {
			return resp([]*pb.FollowupEval{{Id: fresh, WaitUntilNs: now.Add(MaxFollowupWait + time.Nanosecond).UnixNano()}})
		}, nil, 0, "at most 8760h0m0s from now", false, false},
		{"a mark of another job's alloc", func(p *planFixture) *pb.ScheduleResponse {
			return resp([]*pb.FollowupEval{fe(fresh)}, mark(p.other.ID, fresh))
		}, nil, 0, "allocations that are not the job's", false, false},
		{"a mark naming no follow-up eval", func(p *planFixture) *pb.ScheduleResponse {
			return resp(nil, mark(p.running.ID, fresh))
		}, nil, 0, "plan.alloc_followups[0].followup_eval_id", false, false},
		{"a purged job", func(*planFixture) *pb.ScheduleResponse {
			return resp([]*pb.FollowupEval{fe(fresh)})
		}, nil, 0, "the job is purged", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanFixture(t)
			p.f.evals(
				&structs.Evaluation{ID: earlier, Namespace: p.job.Namespace, JobID: p.job.ID, Type: p.job.Type, Status: structs.EvalStatusPending},
				&structs.Evaluation{ID: foreign, Namespace: p.job.Namespace, JobID: p.otherJob.ID, Type: p.otherJob.Type, Status: structs.EvalStatusPending},
			)
			job := p.job
			if tc.purgedJob {
				job = nil
			}
			plan := emptyPlan(p.f.snapshot(), p.ev, "", p.job)
			err := ConvertFollowups(p.f.snapshot(), p.ev, job, tc.resp(p), plan, now)
			if tc.wantErr != "" {
				if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantNoPlan && !plan.IsNoOp() {
				t.Fatalf("plan = %+v, want no change", plan)
			}
			var got []string
			for _, e := range plan.FollowupEvals {
				got = append(got, e.ID)
				if e.Status != structs.EvalStatusPending || e.TriggeredBy != structs.EvalTriggerRetryFailedAlloc ||
					e.WaitUntil.UnixNano() != due || e.PreviousEval != p.ev.ID || e.JobID != p.job.ID ||
					e.Priority != p.job.Priority || e.CreateTime != now.UnixNano() || e.StatusDescription != followupEvalDesc {
					t.Errorf("follow-up eval = %+v", e)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.wantEvals, ",") || len(plan.AllocFollowups) != tc.wantMarks {
				t.Errorf("evals %v marks %v, want %v and %d marks", got, plan.AllocFollowups, tc.wantEvals, tc.wantMarks)
			}
		})
	}
}

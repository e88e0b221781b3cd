package batch

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// BenchmarkReschedule schedules a job whose 5,000 allocations all failed,
// on 1,000 nodes: half are due now (placed, away from their node), half
// later (batched into follow-up evals).
func BenchmarkReschedule(b *testing.B) {
	const nodes, count = 1000, 5000
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	req := &schedulerpb.ScheduleRequest{
		Eval: &schedulerpb.Evaluation{Id: "c0ffee00-0000-4000-8000-000000000001", Namespace: "default", Type: JobType,
			TriggeredBy: "failed-follow-up", JobId: "big", Status: "pending"},
		Job: &schedulerpb.Job{Id: "big", Name: "big", Namespace: "default", Type: JobType, Priority: 50,
			Datacenters: []string{"dc1"}, NodePool: "default", JobModifyIndex: 10,
			TaskGroups: []*schedulerpb.TaskGroup{{Name: "g", Count: count,
				ReschedulePolicy: &schedulerpb.ReschedulePolicy{Attempts: 3, IntervalNs: int64(time.Hour), DelayNs: int64(30 * time.Second), DelayFunction: "exponential"},
				Tasks:            []*schedulerpb.Task{{Name: "t", Driver: "raw_exec", Resources: &schedulerpb.Resources{Cpu: 10, MemoryMb: 10}}},
			}}},
		Attempt: 1,
	}
	for i := range nodes {
		req.Nodes = append(req.Nodes, &schedulerpb.Node{
			Id: fmt.Sprintf("node-%04d", i), Name: fmt.Sprintf("n%d", i), Datacenter: "dc1", NodePool: "default",
			Status: "ready", Eligible: true, Drivers: []string{"raw_exec"},
			Capacity: &schedulerpb.Resources{Cpu: 8000, MemoryMb: 16384, DiskMb: 100000}, Used: &schedulerpb.Resources{},
		})
	}
	for i := range count {
		// The even ones failed a minute before the latest failure: due.
		failed := t0.Add(time.Minute)
		if i%2 == 0 {
			failed = t0
		}
		req.Allocs = append(req.Allocs, &schedulerpb.Allocation{
			Id: fmt.Sprintf("alloc-%05d", i), Name: fmt.Sprintf("big.g[%d]", i), NodeId: fmt.Sprintf("node-%04d", i%nodes),
			TaskGroup: "g", JobId: "big", Namespace: "default", JobModifyIndex: 10, DesiredStatus: "run", ClientStatus: "failed",
			Resources: &schedulerpb.Resources{Cpu: 10, MemoryMb: 10}, CreateIndex: 11, ModifyIndex: 12,
			ModifyTimeNs: failed.Add(time.Duration(i%7) * time.Second).UnixNano(),
		})
	}
	s := New()
	b.ReportAllocs()
	var resp *schedulerpb.ScheduleResponse
	for b.Loop() {
		var err error
		if resp, err = s.Schedule(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
	d := resp.GetPlan().GetDesiredTgUpdates()["g"]
	if d.GetRescheduleNow()+d.GetRescheduleLater() != count || len(resp.GetFollowupEvals()) == 0 {
		b.Fatalf("rescheduled %d now, %d later, %d follow-up evals", d.GetRescheduleNow(), d.GetRescheduleLater(), len(resp.GetFollowupEvals()))
	}
	b.ReportMetric(float64(len(resp.GetFollowupEvals())), "followup-evals")
	b.ReportMetric(float64(d.GetRescheduleNow()), "placed")
}

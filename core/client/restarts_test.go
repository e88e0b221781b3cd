package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestRestartTracker(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := taskOutcome{}
	ok := taskOutcome{Success: true}
	bad := taskOutcome{Unrecoverable: true}
	policy := func(attempts int, mode string) *structs.RestartPolicy {
		return &structs.RestartPolicy{Attempts: attempts, Interval: time.Minute, Delay: 10 * time.Second, Mode: mode}
	}
	// step is one task end at t0+At; the tracker's verdict must match.
	type step struct {
		At     time.Duration
		Out    taskOutcome
		Action restartAction
		Delay  time.Duration
		Reason string
	}
	cases := []struct {
		name    string
		jobType string
		policy  *structs.RestartPolicy
		jitter  float64
		steps   []step
	}{
		{
			name: "batch success is not restarted", jobType: structs.JobTypeBatch, policy: policy(3, "fail"),
			steps: []step{{0, ok, actionDone, 0, reasonBatchSucceeded}},
		},
		{
			name: "sysbatch success is not restarted", jobType: structs.JobTypeSysBatch, policy: policy(3, "fail"),
			steps: []step{{0, ok, actionDone, 0, reasonBatchSucceeded}},
		},
		{
			name: "service success is restarted and counts", jobType: structs.JobTypeService, policy: policy(1, "fail"),
			steps: []step{
				{0, ok, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{time.Second, ok, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 1, time.Minute)},
			},
		},
		{
			name: "system success is restarted", jobType: structs.JobTypeSystem, policy: policy(2, "fail"),
			steps: []step{{0, ok, actionRestart, 10 * time.Second, reasonWithinPolicy}},
		},
		{
			name: "failures restart until attempts are exhausted, mode fail", jobType: structs.JobTypeBatch, policy: policy(2, "fail"),
			steps: []step{
				{1 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{2 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{3 * time.Second, fail, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 2, time.Minute)},
			},
		},
		{
			name: "jitter adds up to a quarter of the delay", jobType: structs.JobTypeBatch, policy: policy(2, "fail"), jitter: 0.5,
			steps: []step{{0, fail, actionRestart, 10*time.Second + 1250*time.Millisecond, reasonWithinPolicy}},
		},
		{
			name: "a new interval resets the count", jobType: structs.JobTypeBatch, policy: policy(1, "fail"),
			steps: []step{
				{1 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{2 * time.Minute, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{2*time.Minute + time.Second, fail, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 1, time.Minute)},
			},
		},
		{
			name: "mode delay waits for the interval's end, then starts afresh", jobType: structs.JobTypeService, policy: policy(1, "delay"),
			steps: []step{
				{10 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{20 * time.Second, fail, actionRestart, 40 * time.Second, fmt.Sprintf(reasonDelayFmt, 1, time.Minute)},
				// The restart after the wait opened a new interval at t0+60s.
				{61 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{62 * time.Second, fail, actionRestart, 58 * time.Second, fmt.Sprintf(reasonDelayFmt, 1, time.Minute)},
			},
		},
		{
			name: "zero attempts with mode fail never restarts", jobType: structs.JobTypeService, policy: policy(0, "fail"),
			steps: []step{{0, fail, actionFail, 0, reasonNoRestarts}},
		},
		{
			name: "unrecoverable start errors fail at once", jobType: structs.JobTypeService, policy: policy(5, "delay"),
			steps: []step{{0, bad, actionFail, 0, reasonUnrecoverable}},
		},
		{
			name: "nil policy uses the job type's defaults", jobType: structs.JobTypeService, policy: nil,
			steps: []step{
				{0, fail, actionRestart, 15 * time.Second, reasonWithinPolicy},
				{time.Second, fail, actionRestart, 15 * time.Second, reasonWithinPolicy},
				{2 * time.Second, fail, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 2, 30*time.Minute)},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRestartTracker(tc.policy, tc.jobType, t0)
			rt.jitter = func() float64 { return tc.jitter }
			for i, s := range tc.steps {
				rt.now = func() time.Time { return t0.Add(s.At) }
				d := rt.next(s.Out)
				if d.Action != s.Action || d.Delay != s.Delay || d.Reason != s.Reason {
					t.Fatalf("step %d: got %v delay=%v reason=%q; want %v delay=%v reason=%q",
						i, d.Action, d.Delay, d.Reason, s.Action, s.Delay, s.Reason)
				}
			}
		})
	}
}

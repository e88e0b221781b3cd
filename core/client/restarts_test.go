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
		name     string
		behavior *structs.JobTypeBehavior
		policy   *structs.RestartPolicy
		jitter   float64
		steps    []step
	}{
		{
			name: "success of a type running to completion is done", behavior: runsToCompletionBehavior, policy: policy(3, "fail"),
			steps: []step{{0, ok, actionDone, 0, reasonSucceeded}},
		},
		{
			name:     "success of a third-party type declaring only runs_to_completion is done",
			behavior: &structs.JobTypeBehavior{RunsToCompletion: true}, policy: policy(3, "fail"),
			steps: []step{{0, ok, actionDone, 0, reasonSucceeded}},
		},
		{
			name: "success of a type that keeps running is restarted and counts", behavior: keepsRunningBehavior, policy: policy(1, "fail"),
			steps: []step{
				{0, ok, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{time.Second, ok, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 1, time.Minute)},
			},
		},
		{
			name: "success of a type declaring nothing is restarted", behavior: &structs.JobTypeBehavior{}, policy: policy(2, "fail"),
			steps: []step{{0, ok, actionRestart, 10 * time.Second, reasonWithinPolicy}},
		},
		{
			name: "success of a job carrying no declaration is restarted", behavior: nil, policy: policy(2, "fail"),
			steps: []step{{0, ok, actionRestart, 10 * time.Second, reasonWithinPolicy}},
		},
		{
			name: "failures restart until attempts are exhausted, mode fail", behavior: runsToCompletionBehavior, policy: policy(2, "fail"),
			steps: []step{
				{1 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{2 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{3 * time.Second, fail, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 2, time.Minute)},
			},
		},
		{
			name: "jitter adds up to a quarter of the delay", behavior: runsToCompletionBehavior, policy: policy(2, "fail"), jitter: 0.5,
			steps: []step{{0, fail, actionRestart, 10*time.Second + 1250*time.Millisecond, reasonWithinPolicy}},
		},
		{
			name: "a new interval resets the count", behavior: runsToCompletionBehavior, policy: policy(1, "fail"),
			steps: []step{
				{1 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{2 * time.Minute, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{2*time.Minute + time.Second, fail, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 1, time.Minute)},
			},
		},
		{
			name: "mode delay waits for the interval's end, then starts afresh", behavior: keepsRunningBehavior, policy: policy(1, "delay"),
			steps: []step{
				{10 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{20 * time.Second, fail, actionRestart, 40 * time.Second, fmt.Sprintf(reasonDelayFmt, 1, time.Minute)},
				// The restart after the wait opened a new interval at t0+60s.
				{61 * time.Second, fail, actionRestart, 10 * time.Second, reasonWithinPolicy},
				{62 * time.Second, fail, actionRestart, 58 * time.Second, fmt.Sprintf(reasonDelayFmt, 1, time.Minute)},
			},
		},
		{
			name: "zero attempts with mode fail never restarts", behavior: keepsRunningBehavior, policy: policy(0, "fail"),
			steps: []step{{0, fail, actionFail, 0, reasonNoRestarts}},
		},
		{
			name: "unrecoverable start errors fail at once", behavior: keepsRunningBehavior, policy: policy(5, "delay"),
			steps: []step{{0, bad, actionFail, 0, reasonUnrecoverable}},
		},
		{
			name: "nil policy uses the type's declared default", behavior: keepsRunningBehavior, policy: nil,
			steps: []step{
				{0, fail, actionRestart, 15 * time.Second, reasonWithinPolicy},
				{time.Second, fail, actionRestart, 15 * time.Second, reasonWithinPolicy},
				{2 * time.Second, fail, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 2, 30*time.Minute)},
			},
		},
		{
			name: "nil policy of a type running to completion uses its default", behavior: runsToCompletionBehavior, policy: nil,
			steps: []step{
				{0, fail, actionRestart, 15 * time.Second, reasonWithinPolicy},
				{time.Second, fail, actionRestart, 15 * time.Second, reasonWithinPolicy},
				{2 * time.Second, fail, actionRestart, 15 * time.Second, reasonWithinPolicy},
				{3 * time.Second, fail, actionFail, 0, fmt.Sprintf(reasonExhaustedFmt, 3, 24*time.Hour)},
			},
		},
		{
			name: "nil policy without a declared default never restarts", behavior: &structs.JobTypeBehavior{}, policy: nil,
			steps: []step{{0, fail, actionFail, 0, reasonNoRestarts}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRestartTracker(tc.policy, tc.behavior, t0)
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

package client

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Restart reasons, shown as a task event's RestartReason. The wording is
// Nomad's, so `alloc status` reads the same.
const (
	reasonWithinPolicy  = "Restart within policy"
	reasonUnrecoverable = "Error was unrecoverable"
	reasonNoRestarts    = "Policy allows no restarts"
	reasonDelayFmt      = "Exceeded allowed attempts %d in interval %v and mode is \"delay\""
	reasonExhaustedFmt  = "Exceeded allowed attempts %d in interval %v and mode is \"fail\""
	reasonSucceeded     = "Restart unnecessary as task terminated successfully"
)

// restartAction is what the task runner does after its task ended.
type restartAction int

const (
	// actionRestart: start the task again after the decision's delay.
	actionRestart restartAction = iota
	// actionDone: the task finished successfully and stays dead.
	actionDone
	// actionFail: the task stays dead and fails.
	actionFail
)

func (a restartAction) String() string {
	switch a {
	case actionRestart:
		return "restart"
	case actionDone:
		return "done"
	case actionFail:
		return "fail"
	}
	return fmt.Sprintf("restartAction(%d)", int(a))
}

// restartDecision is the restart tracker's verdict on one task exit.
type restartDecision struct {
	Action restartAction
	// Delay before the restart; only set for actionRestart.
	Delay time.Duration
	// Reason is the event's RestartReason.
	Reason string
	// ResetsCount tells the caller the restart closes a "delay" mode wait,
	// after which a fresh interval and attempt budget begin.
	ResetsCount bool
}

// taskOutcome describes how one run of a task ended, as far as the restart
// policy cares.
type taskOutcome struct {
	// Success: the task exited with code 0 (and was not signalled).
	Success bool
	// Unrecoverable: the driver refused the task config; starting the
	// same task again would fail the same way.
	Unrecoverable bool
}

// restartTracker applies a restart policy to a task's exits. It is not safe
// for concurrent use: one task runner owns it. The clock and the jitter
// source are fields so that tests decide them.
//
// Semantics (NOMAD-BEHAVIOR §1.3): a task of a job type that declares it
// runs to completion (JobTypeBehavior.RunsToCompletion, as batch and
// sysbatch do) is done when it exits 0; any other end counts as an attempt
// (for a type that keeps running, an exit 0 too: such a task is meant to
// run until stopped). Attempts within the policy interval restart after
// Delay plus up to 25% jitter. Past the budget, mode "fail" fails the task
// and mode "delay" waits for the interval to end, then starts over with a
// fresh budget.
type restartTracker struct {
	policy structs.RestartPolicy
	// runsToCompletion: an exit 0 ends the task for good.
	runsToCompletion bool

	// count is the attempts used in the interval that began at start.
	count int
	start time.Time

	now    func() time.Time
	jitter func() float64 // in [0, 1)
}

// newRestartTracker applies policy, the task's restart policy, to a task of
// a job whose type declares behavior (nil: a type that declares nothing,
// so the zero behaviour). The server fills every task's policy at
// registration; a task without one falls back to the type's declared
// DefaultRestart, and without that to the zero policy, which never
// restarts.
func newRestartTracker(policy *structs.RestartPolicy, behavior *structs.JobTypeBehavior, now time.Time) *restartTracker {
	var p structs.RestartPolicy
	switch {
	case policy != nil:
		p = *policy
	case behavior != nil && behavior.DefaultRestart != nil:
		p = *behavior.DefaultRestart
	}
	return &restartTracker{
		policy:           p,
		runsToCompletion: behavior != nil && behavior.RunsToCompletion,
		start:            now,
		now:              time.Now,
		jitter:           rand.Float64,
	}
}

// next decides what follows a task's end and records the attempt.
func (rt *restartTracker) next(out taskOutcome) restartDecision {
	if out.Success && rt.runsToCompletion {
		return restartDecision{Action: actionDone, Reason: reasonSucceeded}
	}
	if out.Unrecoverable {
		return restartDecision{Action: actionFail, Reason: reasonUnrecoverable}
	}
	if rt.policy.Attempts == 0 && rt.policy.Mode != structs.RestartPolicyModeDelay {
		return restartDecision{Action: actionFail, Reason: reasonNoRestarts}
	}

	now := rt.now()
	end := rt.start.Add(rt.policy.Interval)
	if !now.Before(end) {
		// A new interval begins with this failure; it is its first attempt.
		rt.start, rt.count = now, 0
		end = now.Add(rt.policy.Interval)
	}
	rt.count++
	if rt.count <= rt.policy.Attempts {
		return restartDecision{Action: actionRestart, Delay: rt.jittered(), Reason: reasonWithinPolicy}
	}
	if rt.policy.Mode == structs.RestartPolicyModeDelay {
		// Wait out the interval; the restart that follows starts a new one.
		wait := end.Sub(now)
		rt.start, rt.count = end, 0
		return restartDecision{
			Action: actionRestart, Delay: wait, ResetsCount: true,
			Reason: fmt.Sprintf(reasonDelayFmt, rt.policy.Attempts, rt.policy.Interval),
		}
	}
	return restartDecision{
		Action: actionFail,
		Reason: fmt.Sprintf(reasonExhaustedFmt, rt.policy.Attempts, rt.policy.Interval),
	}
}

// jittered spreads restarts of many tasks that failed together (e.g. on a
// dependency outage) so they do not all hit it again at the same instant.
func (rt *restartTracker) jittered() time.Duration {
	d := rt.policy.Delay
	return d + time.Duration(rt.jitter()*0.25*float64(d))
}

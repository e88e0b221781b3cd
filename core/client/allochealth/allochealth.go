// Package allochealth decides the deployment health of an allocation, as
// Nomad's task_states check decides it: healthy once every main task (and sidecar) has been running for the
// group's update.min_healthy_time without a restart; unhealthy as soon as
// one fails, restarts or stops, or when healthy_deadline passes first. The
// "checks" check (the default) also waits for every check of the alloc's
// native services to pass for min_healthy_time (DecideChecks); with
// "manual" the client reports nothing and an operator sets health through
// the API. Health is decided once per alloc (afresh when it moves to
// another deployment) and then reported with every update.
//
// The decisions are pure: the alloc runner gathers its tasks' states and
// the checks' passing time, decides, and reports.
package allochealth

import (
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Verdict is the outcome of one health evaluation.
type Verdict int

const (
	// Pending: no verdict yet.
	Pending Verdict = iota
	// Healthy: the alloc counts toward its deployment's progress.
	Healthy
	// Unhealthy: the alloc failed its deployment's health check.
	Unhealthy
)

// Task is what the decision reads of one task.
type Task struct {
	State   *structs.TaskState
	Tracked bool // main task or sidecar: must be running to be healthy
}

// Decide evaluates health at now for an alloc whose tracking began at
// start. It returns the verdict and, while pending, when to evaluate again
// without a task change (zero: only on a change).
func Decide(u *structs.UpdateStrategy, tasks []Task, start, now time.Time) (Verdict, time.Time) {
	if u == nil || u.HealthCheck == structs.UpdateHealthCheckManual {
		return Pending, time.Time{}
	}
	var deadline time.Time
	if u.HealthyDeadline > 0 {
		deadline = start.Add(u.HealthyDeadline)
	}
	// healthyAt: when every tracked task will have run for
	// min_healthy_time (from its start, or from the start of tracking for
	// one started before), zero while one is not running.
	var healthyAt time.Time
	allRunning := true
	for _, t := range tasks {
		if !t.Tracked {
			continue
		}
		st := t.State
		switch {
		case st == nil:
			allRunning = false
		case st.Failed || st.Restarts > 0 || st.State == structs.TaskStateDead:
			return Unhealthy, time.Time{}
		case st.State != structs.TaskStateRunning || st.StartedAt.IsZero():
			allRunning = false
		default:
			from := st.StartedAt
			if from.Before(start) {
				from = start
			}
			if ready := from.Add(u.MinHealthyTime); ready.After(healthyAt) {
				healthyAt = ready
			}
		}
	}
	if !allRunning {
		healthyAt = time.Time{}
	}
	switch {
	case !healthyAt.IsZero() && !now.Before(healthyAt) && (deadline.IsZero() || !healthyAt.After(deadline)):
		return Healthy, time.Time{}
	case !deadline.IsZero() && !now.Before(deadline):
		return Unhealthy, time.Time{}
	}
	next := deadline
	if !healthyAt.IsZero() && (next.IsZero() || healthyAt.Before(next)) {
		next = healthyAt
	}
	return Pending, next
}

// DecideChecks is the "checks" verdict of an alloc whose tasks are
// healthy: every check of its services must have passed for
// min_healthy_time (passingSince is zero while one does not pass) before
// healthy_deadline.
func DecideChecks(u *structs.UpdateStrategy, start, passingSince, now time.Time) (Verdict, time.Time) {
	var deadline, ready time.Time
	if u.HealthyDeadline > 0 {
		deadline = start.Add(u.HealthyDeadline)
	}
	if !passingSince.IsZero() {
		from := passingSince
		if from.Before(start) {
			from = start
		}
		ready = from.Add(u.MinHealthyTime)
	}
	switch {
	case !ready.IsZero() && !now.Before(ready) && (deadline.IsZero() || !ready.After(deadline)):
		return Healthy, time.Time{}
	case !deadline.IsZero() && !now.Before(deadline):
		return Unhealthy, time.Time{}
	}
	next := deadline
	if !ready.IsZero() && (next.IsZero() || ready.Before(next)) {
		next = ready
	}
	return Pending, next
}

package client

import (
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Deployment health of an allocation, as Nomad's task_states check decides
// it: healthy once every main task (and sidecar) has been running for the
// group's update.min_healthy_time without a restart; unhealthy as soon as
// one fails, restarts or stops, or when healthy_deadline passes first. The
// "checks" check (the default) also waits for every check of the alloc's
// native services to pass for min_healthy_time (decideChecksHealth); with
// "manual" the client reports nothing and an operator sets health through
// the API. Health is decided once per alloc (afresh when it moves to
// another deployment) and then reported with every update.

// healthVerdict is the outcome of one health evaluation.
type healthVerdict int

const (
	healthPending healthVerdict = iota
	healthHealthy
	healthUnhealthy
)

// healthTask is what the check reads of one task.
type healthTask struct {
	state   *structs.TaskState
	tracked bool // main task or sidecar: must be running to be healthy
}

// decideHealth evaluates health at now for an alloc whose tracking began at
// start. It returns the verdict and, while pending, when to evaluate again
// without a task change (zero: only on a change).
func decideHealth(u *structs.UpdateStrategy, tasks []healthTask, start, now time.Time) (healthVerdict, time.Time) {
	if u == nil || u.HealthCheck == structs.UpdateHealthCheckManual {
		return healthPending, time.Time{}
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
		if !t.tracked {
			continue
		}
		st := t.state
		switch {
		case st == nil:
			allRunning = false
		case st.Failed || st.Restarts > 0 || st.State == structs.TaskStateDead:
			return healthUnhealthy, time.Time{}
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
		return healthHealthy, time.Time{}
	case !deadline.IsZero() && !now.Before(deadline):
		return healthUnhealthy, time.Time{}
	}
	next := deadline
	if !healthyAt.IsZero() && (next.IsZero() || healthyAt.Before(next)) {
		next = healthyAt
	}
	return healthPending, next
}

// decideChecksHealth is the "checks" verdict of an alloc whose tasks are
// healthy: every check of its services must have passed for
// min_healthy_time (passingSince is zero while one does not pass) before
// healthy_deadline.
func decideChecksHealth(u *structs.UpdateStrategy, start, passingSince, now time.Time) (healthVerdict, time.Time) {
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
		return healthHealthy, time.Time{}
	case !deadline.IsZero() && !now.Before(deadline):
		return healthUnhealthy, time.Time{}
	}
	next := deadline
	if !ready.IsZero() && (next.IsZero() || ready.Before(next)) {
		next = ready
	}
	return healthPending, next
}

// healthTracked reports whether a task counts for health: main tasks and
// sidecars; prestart, poststart and poststop tasks that run to completion
// do not.
func healthTracked(t *structs.Task) bool {
	hook, sidecar := lifecycle(t)
	return hook == "" || sidecar
}

// allocHealth is an alloc runner's health tracking (guarded by ar.mu).
type allocHealth struct {
	deployment string // the deployment the verdict is for
	start      time.Time
	verdict    healthVerdict
	at         time.Time
}

// status is the DeploymentStatus to report, or nil while pending.
func (h *allocHealth) status() *structs.AllocDeploymentStatus {
	if h == nil || h.verdict == healthPending {
		return nil
	}
	ok := h.verdict == healthHealthy
	return &structs.AllocDeploymentStatus{Healthy: &ok, Timestamp: h.at}
}

// evalHealthLocked updates the runner's health verdict from its tasks'
// states (ar.mu held) and returns when to look again (zero: on a change).
//
// Outside a deployment the group's migrate block is the strategy (Nomad's
// migrate health_check, min_healthy_time and healthy_deadline), so that a
// drain migrating the group's allocations waits for each replacement to
// be healthy; without a migrate block nothing is judged.
func (ar *allocRunner) evalHealthLocked(states map[string]*structs.TaskState) time.Time {
	if ar.alloc.Job == nil {
		return time.Time{}
	}
	tg := ar.alloc.Job.LookupTaskGroup(ar.alloc.TaskGroup)
	if tg == nil {
		return time.Time{}
	}
	strategy := tg.Update
	if ar.alloc.DeploymentID == "" {
		strategy = tg.Migrate.HealthStrategy()
	} else if !tg.Update.HasDeployment() {
		strategy = nil
	}
	if strategy == nil {
		return time.Time{}
	}
	now := ar.now()
	if ar.health == nil || ar.health.deployment != ar.alloc.DeploymentID {
		// First look, or the alloc moved to another deployment (an
		// in-place update): health is judged afresh.
		ar.health = &allocHealth{deployment: ar.alloc.DeploymentID, start: now}
	}
	// Decided once; and an alloc the server stops is not judged by its
	// tasks' deaths.
	if ar.health.verdict != healthPending || ar.stopReq || ar.alloc.ServerTerminalStatus() {
		return time.Time{}
	}
	tasks := make([]healthTask, 0, len(ar.tasks))
	for _, tr := range ar.tasks {
		tasks = append(tasks, healthTask{state: states[tr.task.Name], tracked: healthTracked(tr.task)})
	}
	v, next := decideHealth(strategy, tasks, ar.health.start, now)
	if v == healthHealthy && strategy.HealthCheck != structs.UpdateHealthCheckTaskStates {
		if any, since := ar.svc.ChecksHealth(); any {
			v, next = decideChecksHealth(strategy, ar.health.start, since, now)
		}
	}
	if v != healthPending {
		ar.health.verdict, ar.health.at = v, now
		ar.logger.Info("allocation health decided", "deployment_id", ar.alloc.DeploymentID, "healthy", v == healthHealthy)
	}
	return next
}

func (ar *allocRunner) now() time.Time {
	if ar.cfg.Now != nil {
		return ar.cfg.Now()
	}
	return time.Now()
}

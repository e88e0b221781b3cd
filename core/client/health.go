package client

import (
	"time"

	"github.com/drover-org/drover/core/client/allochealth"
	"github.com/drover-org/drover/core/structs"
)

// The alloc runner's deployment health: it gathers its tasks' states and
// its checks' passing time, has core/client/allochealth decide, and
// reports the verdict with every update. Health is decided once per alloc
// (afresh when it moves to another deployment); with "manual" the client
// reports nothing and an operator sets health through the API.

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
	verdict    allochealth.Verdict
	at         time.Time
}

// status is the DeploymentStatus to report, or nil while pending.
func (h *allocHealth) status() *structs.AllocDeploymentStatus {
	if h == nil || h.verdict == allochealth.Pending {
		return nil
	}
	ok := h.verdict == allochealth.Healthy
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
	if ar.health.verdict != allochealth.Pending || ar.stopReq || ar.alloc.ServerTerminalStatus() {
		return time.Time{}
	}
	tasks := make([]allochealth.Task, 0, len(ar.tasks))
	for _, tr := range ar.tasks {
		tasks = append(tasks, allochealth.Task{State: states[tr.task.Name], Tracked: healthTracked(tr.task)})
	}
	v, next := allochealth.Decide(strategy, tasks, ar.health.start, now)
	if v == allochealth.Healthy && strategy.HealthCheck != structs.UpdateHealthCheckTaskStates {
		if any, since := ar.svc.ChecksHealth(); any {
			v, next = allochealth.DecideChecks(strategy, ar.health.start, since, now)
		}
	}
	if v != allochealth.Pending {
		ar.health.verdict, ar.health.at = v, now
		ar.logger.Info("allocation health decided", "deployment_id", ar.alloc.DeploymentID, "healthy", v == allochealth.Healthy)
	}
	return next
}

func (ar *allocRunner) now() time.Time {
	if ar.cfg.Now != nil {
		return ar.cfg.Now()
	}
	return time.Now()
}

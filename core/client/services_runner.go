package client

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-org/drover/core/client/services"
	"github.com/drover-org/drover/core/structs"
)

// The alloc runner's side of its native services (core/client/services):
// what the runner needs of them, and what they read of the runner and its
// tasks through services.Runner and services.Task.

// allocServices is what an alloc runner needs of its native services.
type allocServices interface {
	// Sync brings the registrations and checks in line with the tasks;
	// stopping deregisters them for good.
	Sync(stopping bool)
	// Persisted is the services' part of the runner's persisted state.
	Persisted() *services.Persisted
	// ChecksHealth tells whether the alloc's health waits for checks and
	// since when every such check has passed (zero: one does not).
	ChecksHealth() (bool, time.Time)
	// Results is the latest result of every check, by check ID.
	Results() map[string]*structs.CheckStatus
	// Close stops the checks and waits for them.
	Close()
}

var (
	_ allocServices   = (*services.Alloc)(nil)
	_ allocServices   = noServices{}
	_ services.Runner = svcRunner{}
	_ services.Task   = svcTask{}
)

// noServices is the services of an alloc whose group declares none.
type noServices struct{}

func (noServices) Sync(bool)                                {}
func (noServices) Persisted() *services.Persisted           { return nil }
func (noServices) ChecksHealth() (bool, time.Time)          { return false, time.Time{} }
func (noServices) Results() map[string]*structs.CheckStatus { return nil }
func (noServices) Close()                                   {}

// newAllocServices is the services of the alloc ar runs.
func newAllocServices(ar *allocRunner, tg *structs.TaskGroup, prior *persistedAlloc) allocServices {
	if !services.Declared(tg) {
		return noServices{}
	}
	var ps *services.Persisted
	if prior != nil {
		ps = prior.Services
	}
	return services.New(ar.ctx, svcRunner{ar}, services.Config{
		Registrar: ar.cfg.Services, Region: ar.cfg.Region, Path: ar.cfg.Path, Logger: ar.logger,
	}, ps)
}

// svcRunner is the alloc runner as its services see it.
type svcRunner struct{ ar *allocRunner }

func (r svcRunner) Alloc() *structs.Allocation { return r.ar.allocSnapshot() }
func (r svcRunner) Node() *structs.Node        { return r.ar.cfg.Node() }
func (r svcRunner) Persist()                   { r.ar.persist() }
func (r svcRunner) Changed()                   { r.ar.taskChanged() }
func (r svcRunner) Now() time.Time             { return r.ar.now() }

func (r svcRunner) Tasks() []services.Task {
	out := make([]services.Task, len(r.ar.tasks))
	for i, tr := range r.ar.tasks {
		out[i] = svcTask{tr}
	}
	return out
}

// svcTask is a task runner as the services see it.
type svcTask struct{ tr *taskRunner }

func (t svcTask) Spec() *structs.Task { return t.tr.task }
func (t svcTask) State() string {
	st, _ := t.tr.snapshot()
	return st.State
}
func (t svcTask) LastStart() time.Time { return t.tr.lastStart() }
func (t svcTask) RestartForCheck(ctx context.Context, check string) {
	t.tr.restartForCheck(ctx, check)
}
func (t svcTask) ExecContext() (map[string]string, string) { return t.tr.execContext() }

// AllocChecks returns the latest result of each check of an alloc's
// native services, by check ID, as Nomad's
// /v1/client/allocation/<id>/checks answers: unlike the registrations,
// each result carries its newest output. An unknown alloc is
// structs.ErrNotFound; one without checks answers an empty map.
func (c *Client) AllocChecks(allocID string) (map[string]*structs.CheckStatus, error) {
	r := c.runner(allocID)
	if r == nil {
		return nil, structs.NewError(structs.ErrNotFound, "allocation %s not found on this node", allocID)
	}
	out := r.svc.Results()
	if out == nil {
		out = map[string]*structs.CheckStatus{}
	}
	return out, nil
}

// restartForCheck stops the running task for a check_restart; its end
// counts against the restart policy, as a failure.
func (tr *taskRunner) restartForCheck(ctx context.Context, check string) {
	tr.mu.Lock()
	ok := tr.handle != nil && tr.state.State == structs.TaskStateRunning && !tr.tplStopIssued && !tr.killed
	if ok {
		tr.checkRestart, tr.tplStopIssued = true, true
	}
	tr.mu.Unlock()
	if !ok {
		return
	}
	drv, err := tr.ar.driver(tr.task.Driver)
	if err != nil {
		tr.logger.Warn("cannot restart the task for its check", "error", err)
		return
	}
	tr.emit(structs.NewTaskEvent(structs.TaskRestartSignal, fmt.Sprintf("healthcheck: check %q unhealthy", check)))
	tr.stopForTemplate(ctx, drv)
}

// takeCheckRestart reports and clears a check_restart's stop.
func (tr *taskRunner) takeCheckRestart() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.checkRestart
	if r {
		tr.checkRestart, tr.tplStopIssued, tr.tplRestart = false, false, false
	}
	return r
}

// lastStart is when the task's current run started (zero: not running).
func (tr *taskRunner) lastStart() time.Time {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.state.State != structs.TaskStateRunning {
		return time.Time{}
	}
	if tr.state.LastRestart.After(tr.state.StartedAt) {
		return tr.state.LastRestart
	}
	return tr.state.StartedAt
}

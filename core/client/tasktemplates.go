package client

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/drover-org/drover/core/client/taskfiles"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
)

// The task runner's side of its templates (rendered by core/client/taskfiles):
// following the services they read, and applying a re-rendered template's
// change_mode to the running task.

// taskTemplates is what a task runner needs of its rendered templates.
type taskTemplates interface {
	// EnvVars are the variables of the templates with env = true.
	EnvVars() map[string]string
	// Watched reports whether the templates read any service.
	Watched() bool
	// Watch follows the services until ctx ends, rendering again on a
	// change and handing the indexes of the rewritten templates to
	// onChange; retry is the wait after the n-th failed lookup.
	Watch(ctx context.Context, retry func(n int) time.Duration, onChange func([]int))
}

var _ taskTemplates = (*taskfiles.Renderer)(nil)

// allocNamespace is the namespace of an alloc's services.
func allocNamespace(a *structs.Allocation) string {
	ns := a.Namespace
	if ns == "" && a.Job != nil {
		ns = a.Job.Namespace
	}
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	return ns
}

// consulFromCatalogue reports whether the alloc's templates read drover's
// catalogue through Consul's functions (service, services): the job was
// registered when the servers served services without a provider
// themselves (server.default_service_provider = "nomad").
func consulFromCatalogue(a *structs.Allocation) bool {
	return a.Job != nil && a.Job.DefaultServiceProvider == structs.ServiceProviderNomad
}

// lookupServices is the service lookup templates use (nil: none).
func (ar *allocRunner) lookupServices() taskfiles.ServiceLookupFunc {
	if ar.cfg.LookupServices == nil {
		return nil
	}
	return ar.cfg.LookupServices
}

// watchTemplates starts following the services the task's templates read
// and returns the function that stops it (nil: nothing to follow).
func (tr *taskRunner) watchTemplates(ctx context.Context) func() {
	r := tr.tpl
	if r == nil || !r.Watched() {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Watch(wctx, backoff{Base: time.Second, Max: 30 * time.Second}.next, func(changed []int) { tr.templatesChanged(wctx, changed) })
	}()
	return func() {
		cancel()
		<-done
	}
}

// templatesChanged applies the change_mode of the templates rendered anew:
// a restart (also for env templates) wins over signals; noop does nothing.
func (tr *taskRunner) templatesChanged(ctx context.Context, changed []int) {
	restart := false
	var signals []string
	for _, i := range changed {
		t := tr.task.Templates[i]
		if t.Envvars {
			restart = true
		}
		switch t.ChangeMode {
		case "", structs.TemplateChangeModeRestart:
			restart = true
		case structs.TemplateChangeModeSignal:
			if t.ChangeSignal != "" && !slices.Contains(signals, t.ChangeSignal) {
				signals = append(signals, t.ChangeSignal)
			}
		}
	}
	if tr.dead() || tr.killRequested() || (!restart && len(signals) == 0) {
		return
	}
	// splay: a random wait of up to the templates' splay before acting,
	// so that the tasks of many allocations re-rendered by one change do
	// not all restart at once.
	if !waitSplay(ctx, templateSplay(tr.task.Templates, changed), randUpTo) || tr.dead() || tr.killRequested() {
		return
	}
	drv, err := tr.ar.driver(tr.task.Driver)
	if err != nil {
		tr.logger.Warn("cannot apply a template's change_mode", "error", err)
		return
	}
	if restart {
		tr.emit(structs.NewTaskEvent(structs.TaskRestartSignal, "Template with change_mode restart re-rendered"))
		if tr.claimTemplateStop(true) {
			tr.stopForTemplate(ctx, drv)
		}
		return
	}
	tr.mu.Lock()
	running := tr.handle != nil && tr.state.State == structs.TaskStateRunning
	tr.mu.Unlock()
	if !running {
		return // the next start reads the new files
	}
	for _, sig := range signals {
		tr.emit(structs.NewTaskEvent(structs.TaskSignaling, "Template re-rendered; sending "+sig))
		if err := drv.SignalTask(ctx, tr.id, sig); err != nil && ctx.Err() == nil {
			tr.logger.Warn("failed to signal the task for its template", "signal", sig, "error", err)
		}
	}
}

// claimTemplateStop decides, once per request, who stops the run for a
// template's restart: the watcher (request: it asks for the restart) when
// the task runs, else the run goroutine right after the start that raced
// with the request.
func (tr *taskRunner) claimTemplateStop(request bool) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if request {
		tr.tplRestart = true
	}
	if !tr.tplRestart || tr.tplStopIssued || tr.handle == nil || tr.state.State != structs.TaskStateRunning {
		return false
	}
	tr.tplStopIssued = true
	return true
}

// stopForTemplate stops the run; its end is judged a template restart.
func (tr *taskRunner) stopForTemplate(ctx context.Context, drv driver.Driver) {
	if err := drv.StopTask(ctx, tr.id, tr.killTimeout(), tr.task.KillSignal); err != nil && ctx.Err() == nil {
		tr.logger.Warn("failed to stop the task for its template's restart", "error", err)
	}
}

// takeTemplateRestart reports and clears a template's restart request.
func (tr *taskRunner) takeTemplateRestart() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.tplRestart && tr.tplStopIssued
	tr.tplRestart, tr.tplStopIssued = false, false
	return r
}

// applyTemplateEnv puts the env templates' latest variables into the
// driver config before a start (run goroutine only).
func (tr *taskRunner) applyTemplateEnv() {
	if tr.tpl == nil || tr.cfg == nil {
		return
	}
	for k, v := range tr.tpl.EnvVars() {
		tr.cfg.Env[k] = v
	}
}

// templateSplay is the longest splay of the changed templates.
func templateSplay(ts []*structs.Template, changed []int) time.Duration {
	var d time.Duration
	for _, i := range changed {
		if i >= 0 && i < len(ts) && ts[i] != nil {
			d = max(d, ts[i].Splay)
		}
	}
	return d
}

// randUpTo is a random duration in [0, d).
func randUpTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// waitSplay waits pick(splay); false when ctx ended first.
func waitSplay(ctx context.Context, splay time.Duration, pick func(time.Duration) time.Duration) bool {
	d := pick(splay)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// variableLooker is a server connection that serves templates' variables
// (the agent's and the in-process server's do).
type variableLooker interface {
	LookupVariables(ctx context.Context, args *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error)
}

// variableLookup is the variables read of templates with the node's
// credentials, or nil when srv serves none.
func variableLookup(srv any, nodeID, secretID string) taskfiles.VariableLookupFunc {
	vl, ok := srv.(variableLooker)
	if !ok {
		return nil
	}
	return func(ctx context.Context, args *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error) {
		a := *args
		a.NodeID, a.SecretID = nodeID, secretID
		return vl.LookupVariables(ctx, &a)
	}
}

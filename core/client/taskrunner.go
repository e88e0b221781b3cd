package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/client/taskenv"
	"github.com/drover-org/drover/core/client/taskfiles"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

const (
	// maxReattachTries bounds how often a task runner reattaches to its
	// task after losing the driver (a plugin crash or restart) before it
	// counts the run as a failure.
	maxReattachTries = 5
	reattachBackoff  = 500 * time.Millisecond
)

// taskRunner runs one task of an allocation through its driver: setup,
// start, wait, restart per policy, kill. Its state is reported to the alloc
// runner after every change.
//
// A task runner distinguishes being killed (the alloc is stopping: the task
// ends dead, not failed) from the client shutting down (ctx ends: the task
// keeps running and is recovered by the next client process).
type taskRunner struct {
	ar       *allocRunner
	task     *structs.Task
	id       string // driver task id, unique on the node
	logger   hclog.Logger
	restarts *restartTracker

	// cfg is built once by prepare and reused by every restart.
	cfg *driverpb.TaskConfig
	// csiSocket is where a CSI plugin task listens (csi_plugin), set by
	// prepare.
	csiSocket string

	mu       sync.Mutex
	state    *structs.TaskState
	handle   *driverpb.TaskHandle // set while a driver task exists
	launched bool
	killed   bool
	restored bool // resumed from a persisted state: no setup again
	// execEnv and execDir are the task's environment and directory once
	// prepared, for script checks run beside it.
	execEnv map[string]string
	execDir string
	// tplRestart: a template with change_mode restart was rendered
	// anew; the run's end is a restart that the policy does not count.
	tplRestart bool
	// tplStopIssued: the run was stopped for tplRestart (or
	// checkRestart) already.
	tplStopIssued bool
	// checkRestart: a check_restart stopped the run; the restart counts
	// against the restart policy, as a failure.
	checkRestart bool
	// userRestartReq: a user asked for the restart (RestartAlloc); it
	// rides on the template restart's stop and names its own reason.
	userRestartReq bool

	// tpl renders the task's templates (nil without templates); set by
	// prepare, used by the run goroutine and its template watcher.
	tpl taskTemplates

	killCh chan struct{} // closed by kill
	doneCh chan struct{} // closed when the runner is finished
}

func newTaskRunner(ar *allocRunner, task *structs.Task, prior *persistedTask) *taskRunner {
	tr := &taskRunner{
		ar:       ar,
		task:     task,
		id:       ar.id + "/" + task.Name,
		logger:   ar.logger.With("task", task.Name),
		restarts: newTaskRestartTracker(task, ar.typeBehavior()),
		killCh:   make(chan struct{}),
		doneCh:   make(chan struct{}),
	}
	if prior != nil && prior.State != nil {
		tr.state = copyTaskState(prior.State)
		tr.handle = prior.handle()
		tr.restored = true
		if tr.state.State == structs.TaskStateDead {
			// Finished in an earlier client process; nothing to run.
			tr.launched = true
			close(tr.doneCh)
		}
	} else {
		tr.state = &structs.TaskState{State: structs.TaskStatePending}
		tr.appendEvent(evReceived())
	}
	return tr
}

// newTaskRestartTracker is the task's restart tracker. A lifecycle task
// that is not a sidecar (an init or cleanup step) runs to completion
// whatever its job's type, as in Nomad: its exit 0 ends it for good.
func newTaskRestartTracker(task *structs.Task, behavior *structs.JobTypeBehavior) *restartTracker {
	rt := newRestartTracker(task.RestartPolicy, behavior, time.Now())
	if hook, sidecar := lifecycle(task); hook != "" && !sidecar {
		rt.runsToCompletion = true
	}
	return rt
}

// killRequested reports whether kill was called.
func (tr *taskRunner) killRequested() bool {
	select {
	case <-tr.killCh:
		return true
	default:
		return false
	}
}

// hasHandle reports whether a driver task exists for this runner.
func (tr *taskRunner) hasHandle() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.handle != nil
}

// snapshot returns a copy of the task state and the current handle.
func (tr *taskRunner) snapshot() (*structs.TaskState, *driverpb.TaskHandle) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return copyTaskState(tr.state), tr.handle
}

// dead reports whether the task has finished for good.
func (tr *taskRunner) dead() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.state.State == structs.TaskStateDead
}

// execContext is the environment and directory a command run in the
// task sees (nil before the task is prepared).
func (tr *taskRunner) execContext() (map[string]string, string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.execEnv, tr.execDir
}

// launch starts the runner's goroutine, once. A task that is already dead
// (killed before its lifecycle phase came, or restored dead) stays so.
func (tr *taskRunner) launch(wg *sync.WaitGroup) {
	tr.mu.Lock()
	if tr.launched {
		tr.mu.Unlock()
		return
	}
	tr.launched = true
	tr.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(tr.doneCh)
		tr.run(tr.ar.ctx)
	}()
}

// kill asks the task to stop for good; ev (may be nil) says why and is
// recorded first. It does not wait: doneCh closes when the task is dead.
func (tr *taskRunner) kill(ev *structs.TaskEvent) {
	tr.mu.Lock()
	if tr.killed || tr.state.State == structs.TaskStateDead {
		tr.mu.Unlock()
		return
	}
	tr.killed = true
	close(tr.killCh)
	if ev != nil {
		tr.appendEvent(ev)
	}
	if !tr.launched && tr.handle == nil {
		// Never started: dead at once, without failing. A restored task
		// with a handle is still running somewhere and must be stopped
		// through its driver, by its run goroutine.
		tr.launched = true
		tr.markDeadLocked(false)
		close(tr.doneCh)
	}
	tr.mu.Unlock()
	tr.ar.taskChanged()
}

// failBeforeStart marks a task that never ran dead and failed, e.g. when
// its alloc dir cannot be built.
func (tr *taskRunner) failBeforeStart(ev *structs.TaskEvent) {
	tr.mu.Lock()
	if tr.launched || tr.killed {
		tr.mu.Unlock()
		return
	}
	tr.launched = true
	tr.appendEvent(ev)
	tr.markDeadLocked(true)
	close(tr.doneCh)
	tr.mu.Unlock()
	tr.ar.taskChanged()
}

// update applies fn to the state under the lock, then reports.
func (tr *taskRunner) update(fn func(ts *structs.TaskState)) {
	tr.mu.Lock()
	fn(tr.state)
	tr.mu.Unlock()
	tr.ar.taskChanged()
}

func (tr *taskRunner) emit(ev *structs.TaskEvent) {
	tr.update(func(*structs.TaskState) { tr.appendEvent(ev) })
}

// appendEvent needs tr.mu (or exclusive access during construction).
func (tr *taskRunner) appendEvent(ev *structs.TaskEvent) {
	tr.state.Events = append(tr.state.Events, ev)
	if n := len(tr.state.Events); n > maxTaskEvents {
		tr.state.Events = append([]*structs.TaskEvent(nil), tr.state.Events[n-maxTaskEvents:]...)
	}
}

func (tr *taskRunner) markDeadLocked(failed bool) {
	tr.state.State = structs.TaskStateDead
	tr.state.Failed = tr.state.Failed || failed
	tr.state.FinishedAt = time.Now()
}

func (tr *taskRunner) finish(failed bool, evs ...*structs.TaskEvent) {
	tr.update(func(*structs.TaskState) {
		for _, ev := range evs {
			tr.appendEvent(ev)
		}
		tr.markDeadLocked(failed)
	})
}

// run is the task's life. It returns when the task is dead, or when ctx
// ends (client shutdown), leaving the task running for a later recovery.
func (tr *taskRunner) run(ctx context.Context) {
	tr.mu.Lock()
	restored := tr.restored
	// A task restored before it ever started (the client stopped while its
	// setup waited, for a template's service say) sets up as a new one.
	neverStarted := tr.handle == nil && tr.state.StartedAt.IsZero()
	tr.mu.Unlock()
	if !restored {
		tr.emit(evSetup())
	}
	if err := tr.prepare(ctx, !restored || neverStarted); err != nil {
		if ctx.Err() != nil {
			// The client is shutting down: the task stays pending, and
			// the next client process sets it up again.
			return
		}
		if tr.killRequested() {
			// Killed while its setup waited (a template's service): dead,
			// not failed.
			tr.finish(false)
			return
		}
		tr.logger.Error("task setup failed", "error", err)
		ev := evSetupFailure(err)
		if errors.Is(err, taskfiles.ErrArtifact) {
			ev.Type = structs.TaskArtifactDownloadFailed
		}
		tr.finish(true, ev)
		return
	}
	if stop := tr.superviseCSI(ctx); stop != nil {
		defer stop()
	}
	if stop := tr.watchTemplates(ctx); stop != nil {
		defer stop()
	}
	// A restored task waiting for its restart may still hold the handle
	// of the run that exited: that driver task goes first.
	if !tr.dropLeftover(ctx) {
		return
	}
	for {
		tr.applyTemplateEnv()
		res := tr.attempt(ctx)
		if res.shutdown || tr.crashAt(kpExited) {
			return
		}
		v := tr.judge(res)
		if !tr.settle(ctx, v) || v.dead {
			return
		}
		tr.logger.Info("restarting task", "delay", v.delay, "reason", v.reason)
		tr.ar.cfg.Metrics.TaskRestarted()
		timer := time.NewTimer(v.delay)
		select {
		case <-timer.C:
		case <-tr.killCh:
			timer.Stop()
			tr.finish(false)
			return
		case <-ctx.Done():
			timer.Stop()
			return
		}
	}
}

// prepare builds the task's directories and driver config and renders its
// templates; on a first run it also writes the dispatch payload and
// fetches the artifacts (a kill or the client's shutdown cancels them).
func (tr *taskRunner) prepare(ctx context.Context, first bool) error {
	ar := tr.ar
	dirs, err := ar.dir.buildTask(tr.task.Name)
	if err != nil {
		return err
	}
	alloc := ar.allocSnapshot()
	if first && tr.task.DispatchPayload != nil && tr.task.DispatchPayload.File != "" && alloc.Job != nil && len(alloc.Job.Payload) > 0 {
		if err := ar.dir.writeDispatchPayload(tr.task.Name, tr.task.DispatchPayload.File, alloc.Job.Payload); err != nil {
			return err
		}
	}
	env := taskenv.Build(taskenv.Input{
		Node: ar.cfg.Node(), Alloc: ar.withNetworkStatus(alloc), Group: ar.group(), Task: tr.task, Region: ar.cfg.Region,
		AllocDir: ar.dir.sharedDir(), TaskDir: dirs.Local, SecretsDir: dirs.Secrets, Path: ar.cfg.Path,
	})
	if tr.task.CSIPluginConfig != nil && ar.cfg.CSI != nil {
		sock, err := ar.cfg.CSI.Prepare(ar.id, tr.task.Name)
		if err != nil {
			return err
		}
		tr.csiSocket = sock
		// A driver without file system isolation is given the host's
		// socket; the task's own env may still set another endpoint.
		if _, own := tr.task.Env["CSI_ENDPOINT"]; !own {
			env.Env["CSI_ENDPOINT"] = "unix://" + sock
		}
	}
	if first && len(tr.task.Artifacts) > 0 {
		tr.emit(structs.NewTaskEvent(structs.TaskArtifactDownloadFn, "Client is downloading artifacts"))
		fctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			select {
			case <-tr.killCh:
				cancel()
			case <-fctx.Done():
			}
		}()
		err := taskfiles.FetchArtifacts(fctx, ar.dir.root, dirs.Dir, tr.task.Artifacts, env.Lookup)
		cancel()
		<-stopped
		if err != nil {
			return err
		}
	}
	if len(tr.task.Templates) > 0 {
		r := taskfiles.NewRenderer(ar.dir.root, dirs.Dir, tr.task.Templates, maps.Clone(env.Env), ar.lookupServices(), allocNamespace(alloc), tr.logger)
		if consulFromCatalogue(alloc) {
			r.ReadConsulFromCatalogue()
		}
		if lv := ar.cfg.LookupVariables; lv != nil {
			allocID, task := alloc.ID, tr.task.Name
			r.SetVariableLookup(func(ctx context.Context, args *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error) {
				a := *args
				a.AllocID, a.Task = allocID, task
				return lv(ctx, &a)
			})
		}
		// A template waiting for a service ends with a kill or the
		// client's shutdown; a restored task does not wait.
		rctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			select {
			case <-tr.killCh:
				cancel()
			case <-rctx.Done():
			}
		}()
		_, err := r.Render(rctx, first)
		cancel()
		<-stopped
		if err != nil {
			return fmt.Errorf("template: %w", err)
		}
		tr.tpl = r
		for k, v := range r.EnvVars() {
			env.Env[k] = v
		}
	}
	tr.mu.Lock()
	tr.execEnv, tr.execDir = maps.Clone(env.Env), dirs.Dir
	tr.mu.Unlock()
	confJSON, err := json.Marshal(taskenv.InterpolateConfig(map[string]any(tr.task.Config), env.Lookup))
	if err != nil {
		return fmt.Errorf("encode driver config: %w", err)
	}
	cpu, mem, memMax := taskenv.Limits(alloc, tr.task)
	netIso, err := ar.taskNetwork()
	if err != nil {
		return err
	}
	tr.cfg = &driverpb.TaskConfig{
		Id: tr.id, AllocId: ar.id, TaskName: tr.task.Name,
		ConfigJson: confJSON, Env: env.Env, User: tr.task.User,
		AllocDir: ar.dir.root, TaskDir: dirs.Dir,
		KillSignal: tr.task.KillSignal,
		Resources:  &driverpb.Resources{Cpu: cpu, MemoryMb: mem, MemoryMaxMb: memMax},
		Ports:      driverPorts(alloc),
		Mounts:     ar.driverMounts(tr.task),

		NetworkIsolation: netIso,
	}
	tr.cfg.Dns, tr.cfg.ResolvConfPath = ar.taskDNS()
	if rot := logRotation(tr.task.LogConfig); rot != nil {
		tr.cfg.StdoutPath = ar.dir.logBase(tr.task.Name, "stdout")
		tr.cfg.StderrPath = ar.dir.logBase(tr.task.Name, "stderr")
		tr.cfg.LogRotation = rot
	}
	return nil
}

// Nomad's defaults of the logs block.
const (
	defaultLogMaxFiles  = 10
	defaultLogMaxFileMB = 10
)

// logRotation turns the task's logs block into the driver's rotation; nil
// when logs are disabled (the driver then discards the output).
func logRotation(lc *structs.LogConfig) *driverpb.LogRotation {
	files, sizeMB := defaultLogMaxFiles, defaultLogMaxFileMB
	if lc != nil {
		if lc.Disabled {
			return nil
		}
		if lc.MaxFiles > 0 {
			files = lc.MaxFiles
		}
		if lc.MaxFileSizeMB > 0 {
			sizeMB = lc.MaxFileSizeMB
		}
	}
	return &driverpb.LogRotation{MaxFiles: int32(files), MaxFileSizeBytes: int64(sizeMB) << 20}
}

// attemptResult is how one run of the task ended.
type attemptResult struct {
	exit          *driverpb.ExitResult // nil when the task never ran
	err           error                // start or driver failure
	unrecoverable bool
	killed        bool
	shutdown      bool
	// events say how the run ended; they are recorded with its verdict,
	// in one write, so a crash cannot record them twice.
	events []*structs.TaskEvent
}

// attempt starts the task (or reattaches to a restored one) and waits for
// it to end. It leaves the handle of a run that ended in place: the exit
// path (settle) drops it once the run's verdict is persisted.
func (tr *taskRunner) attempt(ctx context.Context) attemptResult {
	tr.mu.Lock()
	handle := tr.handle
	tr.mu.Unlock()
	if handle == nil {
		select {
		case <-tr.killCh:
			return attemptResult{killed: true}
		default:
		}
	}
	drv, err := tr.ar.driver(tr.task.Driver)
	if err != nil {
		return attemptResult{err: err, events: []*structs.TaskEvent{evDriverFailure(err)}}
	}

	if handle != nil {
		if err := drv.RecoverTask(ctx, handle); err != nil {
			if ctx.Err() != nil {
				return attemptResult{shutdown: true}
			}
			tr.logger.Warn("failed to recover task", "error", err)
			return attemptResult{err: err, events: []*structs.TaskEvent{evRestoreFailed(err)}}
		}
		tr.logger.Info("recovered task", "pid", handle.GetPid())
	} else {
		// The run starts with the templates' latest files: a restart
		// asked for before this point is served by the start itself.
		tr.mu.Lock()
		tr.tplRestart, tr.tplStopIssued, tr.checkRestart = false, false, false
		tr.mu.Unlock()
		handle, err = tr.start(ctx, drv)
		if err != nil {
			if ctx.Err() != nil {
				return attemptResult{shutdown: true}
			}
			tr.logger.Error("failed to start task", "error", err)
			return attemptResult{err: err, unrecoverable: errors.Is(err, driver.ErrInvalidConfig),
				events: []*structs.TaskEvent{evDriverFailure(err)}}
		}
		tr.update(func(ts *structs.TaskState) {
			tr.handle = handle
			ts.State = structs.TaskStateRunning
			if ts.StartedAt.IsZero() {
				ts.StartedAt = time.Now()
			}
			tr.appendEvent(evStarted())
		})
		// A template changed while the task was starting: it may have
		// read the old file.
		if tr.claimTemplateStop(false) {
			tr.stopForTemplate(ctx, drv)
		}
	}

	exit, killed, err := tr.wait(ctx, drv)
	if ctx.Err() != nil {
		return attemptResult{shutdown: true}
	}
	res := attemptResult{exit: exit, err: err, killed: killed}
	if err != nil {
		res.events = []*structs.TaskEvent{evDriverFailure(err)}
	} else {
		res.events = []*structs.TaskEvent{evTerminated(exit)}
	}
	return res
}

// start asks the driver to start the task. A task with our id that the
// driver still tracks is a leftover of an earlier client (whose state was
// lost): it is destroyed and the start retried once.
func (tr *taskRunner) start(ctx context.Context, drv driver.Driver) (*driverpb.TaskHandle, error) {
	h, err := drv.StartTask(ctx, tr.cfg)
	if errors.Is(err, driver.ErrTaskExists) {
		tr.logger.Warn("destroying a leftover driver task with the same id", "task_id", tr.id)
		if derr := drv.DestroyTask(ctx, tr.id, true); derr != nil && !errors.Is(derr, driver.ErrTaskNotFound) {
			return nil, fmt.Errorf("%w (and destroying the leftover failed: %v)", err, derr)
		}
		h, err = drv.StartTask(ctx, tr.cfg)
	}
	return h, err
}

// wait waits for the task's exit, stopping it if it is killed meanwhile.
// When the driver goes away (a plugin restart) it reattaches with the
// task's handle; a task the driver cannot find again is lost, an error.
func (tr *taskRunner) wait(ctx context.Context, drv driver.Driver) (*driverpb.ExitResult, bool, error) {
	killingSent := false
	for try := 0; ; try++ {
		exit, killed, err := tr.waitOnce(ctx, drv, &killingSent)
		if err == nil || ctx.Err() != nil {
			return exit, killed, err
		}
		if try >= maxReattachTries {
			return nil, killed, fmt.Errorf("lost the task: %w", err)
		}
		tr.logger.Warn("lost contact with the task; reattaching", "error", err)
		select {
		case <-ctx.Done():
			return nil, killed, ctx.Err()
		case <-time.After(reattachBackoff):
		}
		d, derr := tr.ar.driver(tr.task.Driver)
		if derr != nil {
			continue
		}
		drv = d
		tr.mu.Lock()
		handle := tr.handle
		tr.mu.Unlock()
		if rerr := drv.RecoverTask(ctx, handle); errors.Is(rerr, driver.ErrTaskNotFound) {
			return nil, killed, fmt.Errorf("task is gone: %w", rerr)
		}
	}
}

type waitResult struct {
	exit *driverpb.ExitResult
	err  error
}

// waitOnce is one WaitTask call, raced against kill and ctx. It never
// returns before its WaitTask goroutine has.
func (tr *taskRunner) waitOnce(ctx context.Context, drv driver.Driver, killingSent *bool) (*driverpb.ExitResult, bool, error) {
	wctx, cancel := context.WithCancel(ctx)
	resCh := make(chan waitResult, 1)
	go func() {
		exit, err := drv.WaitTask(wctx, tr.id)
		resCh <- waitResult{exit, err}
	}()
	var got *waitResult
	defer func() {
		cancel()
		if got == nil {
			<-resCh
		}
	}()

	select {
	case r := <-resCh:
		got = &r
		return r.exit, false, r.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-tr.killCh:
	}

	// The task's shutdown_delay: it keeps running for a while after its
	// services were deregistered (an alloc stop; a sibling's failure or
	// a destroy does not wait).
	if !*killingSent && tr.ar.stopRequested() {
		d := tr.task.ShutdownDelay
		if d = tr.ar.shutdownDelay(&d); d > 0 {
			tr.emit(structs.NewTaskEvent(taskWaitingShutdownDelay, fmt.Sprintf("Waiting for shutdown_delay of %s before killing the task", d)))
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case r := <-resCh:
				t.Stop()
				got = &r
				return r.exit, true, r.err
			case <-ctx.Done():
				t.Stop()
				return nil, true, ctx.Err()
			}
		}
	}
	timeout := tr.killTimeout()
	if !*killingSent {
		*killingSent = true
		tr.emit(evKilling(timeout))
	}
	if err := drv.StopTask(ctx, tr.id, timeout, tr.task.KillSignal); err != nil && ctx.Err() == nil {
		tr.logger.Warn("failed to stop task; forcing", "error", err)
		_ = drv.DestroyTask(ctx, tr.id, true)
	}
	select {
	case r := <-resCh:
		got = &r
		return r.exit, true, r.err
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}

// superviseCSI starts the supervisor of a CSI plugin task and returns the
// function that stops it (nil for other tasks). A task dead for good
// leaves the node's plugins; one merely left behind by a stopping client
// stays, to be supervised again after the restart.
func (tr *taskRunner) superviseCSI(ctx context.Context) func() {
	csi := tr.ar.cfg.CSI
	if tr.task.CSIPluginConfig == nil || csi == nil || tr.csiSocket == "" {
		return nil
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		csi.Supervise(ctx, stop, tr.ar.id, tr.task.Name, tr.task.CSIPluginConfig, tr.csiSocket, tr.emit)
	}()
	return func() {
		close(stop)
		wg.Wait()
		if tr.dead() {
			csi.Remove(tr.ar.id, tr.task.Name)
		}
	}
}

// killTimeout is the task's kill_timeout, capped by the client's
// max_kill_timeout.
func (tr *taskRunner) killTimeout() time.Duration {
	return capKillTimeout(tr.task.KillTimeout, tr.ar.cfg.MaxKillTimeout)
}

// capKillTimeout caps d at limit (no cap without a limit).
func capKillTimeout(d, limit time.Duration) time.Duration {
	if limit > 0 && d > limit {
		return limit
	}
	return d
}

package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

const (
	// checkpointFile is the log copy's checkpoint, in the task dir.
	checkpointFile = ".drover-docker-logs.json"
	// logDrainTimeout bounds how long the watcher waits for the log copy
	// to finish after the container exited before reporting the exit.
	logDrainTimeout = 5 * time.Second
)

// task is one tracked container.
type task struct {
	id        string
	st        handleState
	startedAt time.Time
	done      chan struct{} // closed once result is set

	mu          sync.Mutex
	result      *driverpb.ExitResult
	completedAt time.Time
	killed      bool   // StopTask escalated to SIGKILL
	stopWatch   func() // ends the watcher and log copy
}

func (t *task) exited() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

func (t *task) handle() (*driverpb.TaskHandle, error) {
	raw, err := json.Marshal(t.st)
	if err != nil {
		return nil, err
	}
	return &driverpb.TaskHandle{Id: t.id, StartedAtUnixNano: t.startedAt.UnixNano(), State: raw}, nil
}

// StartTask implements driver.Driver: it ensures the image (pulling only
// when absent or force_pull), creates the labelled container and starts
// it. A container of the same task left from a lost handle is adopted
// when running and replaced when exited, so a task never runs twice.
func (d *Driver) StartTask(ctx context.Context, cfg *driverpb.TaskConfig) (*driverpb.TaskHandle, error) {
	if cfg.GetId() == "" || cfg.GetAllocId() == "" || cfg.GetTaskName() == "" {
		return nil, fmt.Errorf("%w: task id, alloc_id and task_name are required", driver.ErrInvalidConfig)
	}
	if !filepath.IsAbs(cfg.GetTaskDir()) || !filepath.IsAbs(cfg.GetAllocDir()) {
		return nil, fmt.Errorf("%w: task_dir and alloc_dir must be absolute paths, got %q and %q", driver.ErrInvalidConfig, cfg.GetTaskDir(), cfg.GetAllocDir())
	}
	tc, err := parseTaskConfig(cfg.GetConfigJson(), d.cfg)
	if err != nil {
		return nil, err
	}
	killSignal := cfg.GetKillSignal()
	if killSignal == "" {
		killSignal = driver.DefaultKillSignal
	}
	if _, err := driver.ParseSignal(killSignal); err != nil {
		return nil, fmt.Errorf("%w: kill_signal: %v", driver.ErrInvalidConfig, err)
	}
	opts, err := createOptions(cfg, tc, d.cfg)
	if err != nil {
		return nil, err
	}
	for _, w := range unsupported(tc) {
		d.logger.Warn("docker task config field accepted but not honoured", "task_id", cfg.GetId(), "field", w.field, "reason", w.why)
	}
	logs := logSpec{AllocDir: cfg.GetAllocDir(), Stdout: cfg.GetStdoutPath(), Stderr: cfg.GetStderrPath(), Checkpoint: filepath.Join(cfg.GetTaskDir(), checkpointFile)}
	if lr := cfg.GetLogRotation(); lr != nil {
		if lr.GetMaxFiles() < 1 || lr.GetMaxFileSizeBytes() < 1 {
			return nil, fmt.Errorf("%w: log_rotation needs max_files and max_file_size_bytes of at least 1", driver.ErrInvalidConfig)
		}
		logs.MaxFiles, logs.MaxSize = int(lr.GetMaxFiles()), lr.GetMaxFileSizeBytes()
	}

	tracked, release, err := d.reserve(cfg.GetId())
	if err != nil {
		return nil, err
	}
	if tracked {
		return nil, fmt.Errorf("%w: %q", driver.ErrTaskExists, cfg.GetId())
	}
	defer release()

	imageID, err := d.ensureImage(ctx, tc)
	if err != nil {
		return nil, err
	}
	if err := d.joinNetwork(ctx, cfg, tc, &opts); err != nil {
		return nil, err
	}
	started := false
	if cfg.GetNetworkIsolation() != nil {
		// A start that fails leaves no pause container behind.
		defer func() {
			if !started {
				d.leaveNetwork(context.WithoutCancel(ctx), cfg.GetAllocId())
			}
		}()
	}
	// The bind sources are checked (and, where a task could swap them,
	// pinned) only now, right before the engine mounts them.
	binds, releaseBinds, err := pinBinds(cfg, opts.HostConfig.Binds)
	if err != nil {
		return nil, err
	}
	defer releaseBinds()
	opts.HostConfig.Binds = binds
	containerID, adopted, err := d.createContainer(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	if !adopted {
		// A new run of the task copies its logs from the start.
		_ = removeFile(logs.Checkpoint)
		if _, err := d.engine.ContainerStart(ctx, containerID, client.ContainerStartOptions{}); err != nil {
			d.removeContainer(containerID)
			return nil, fmt.Errorf("start container for image %q: %w", tc.Image, err)
		}
	}
	t := &task{
		id: cfg.GetId(), startedAt: time.Now(), done: make(chan struct{}),
		st: handleState{
			Version: stateVersion, ContainerID: containerID, ImageID: imageID,
			AllocID: cfg.GetAllocId(), TaskName: cfg.GetTaskName(), KillSignal: killSignal, Logs: logs,
			Netns: cfg.GetNetworkIsolation() != nil,
		},
	}
	h, err := t.handle()
	if err != nil {
		d.removeContainer(containerID)
		return nil, err
	}
	d.acquireImage(imageID)
	d.track(t)
	started = true
	d.logger.Info("task started", "task_id", t.id, "container_id", shortID(containerID), "image", tc.Image, "adopted", adopted)
	return h, nil
}

// createContainer creates the task's container, or finds the one an
// earlier StartTask of the same task left behind (its handle was lost):
// a running one is adopted, an exited one removed and created afresh.
func (d *Driver) createContainer(ctx context.Context, cfg *driverpb.TaskConfig, opts client.ContainerCreateOptions) (id string, adopted bool, err error) {
	for attempt := 0; attempt < 2; attempt++ {
		res, err := d.engine.ContainerCreate(ctx, opts)
		if err == nil {
			return res.ID, false, nil
		}
		if !cerrdefs.IsConflict(err) {
			return "", false, fmt.Errorf("create container for image %q: %w", opts.Config.Image, err)
		}
		existing, ierr := d.engine.ContainerInspect(ctx, opts.Name, client.ContainerInspectOptions{})
		if ierr != nil {
			return "", false, fmt.Errorf("create container: name %q is taken and cannot be inspected: %w", opts.Name, ierr)
		}
		c := existing.Container
		if c.Config == nil || !ownedBy(c.Config.Labels, cfg.GetAllocId(), cfg.GetTaskName()) {
			return "", false, fmt.Errorf("create container: name %q is taken by a container drover did not create for this task", opts.Name)
		}
		// A container a destroyed run left for removal (the engine did
		// not answer then) is replaced, never adopted.
		if c.State != nil && c.State.Running && !d.removalPending(c.ID) {
			return c.ID, true, nil
		}
		if _, err := d.engine.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return "", false, fmt.Errorf("remove exited container %s of an earlier run: %w", shortID(c.ID), err)
		}
	}
	return "", false, fmt.Errorf("create container: name %q stays taken", opts.Name)
}

// track registers a task and starts its watcher.
func (d *Driver) track(t *task) {
	ctx, cancel := context.WithCancel(d.bg)
	t.stopWatch = cancel
	d.tasks.Add(t.id, t)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.watch(ctx, t)
	}()
}

// watch copies the container's logs and waits for it to exit, then
// records the exit result from inspect (exit code, OOM kill). It returns
// without a result when ctx ends (destroy, shutdown).
//
// While the engine does not answer the task stays running: the wait is
// re-established with backoff, and a container that exited meanwhile is
// reported with its real exit code once the engine answers. Only an
// outage longer than engine_outage_timeout ends the task, with an error.
func (d *Driver) watch(ctx context.Context, t *task) {
	logsDone := make(chan struct{})
	logCtx, stopLogs := context.WithCancel(ctx)
	defer stopLogs()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(logsDone)
		d.followLogs(logCtx, t)
	}()

	var (
		state       *container.State
		bo          backoff
		outageSince time.Time
	)
	for {
		began := time.Now()
		wr := d.engine.ContainerWait(ctx, t.st.ContainerID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		var waitErr error
		select {
		case <-ctx.Done():
			return
		case <-wr.Result:
		case waitErr = <-wr.Error:
			if ctx.Err() != nil {
				return
			}
		}
		// Inspect is the truth either way: the exit state after a wait
		// that ended, whether the engine answers after one that failed.
		insp, err := d.engine.ContainerInspect(ctx, t.st.ContainerID, client.ContainerInspectOptions{})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if cerrdefs.IsNotFound(err) {
				stopLogs()
				<-logsDone
				d.finish(t, &driverpb.ExitResult{ExitCode: -1, Err: "container was removed outside drover; its exit status is lost"}, time.Now())
				return
			}
			if outageSince.IsZero() {
				// The outage starts now, not when the broken wait began:
				// that wait may have held for hours.
				outageSince = time.Now()
				d.logger.Warn("docker engine does not answer; the task stays running and its container is watched again when it does",
					"task_id", t.id, "container_id", shortID(t.st.ContainerID), "engine_outage_timeout", d.cfg.engineOutage, "error", err)
			}
			if out := time.Since(outageSince); out >= d.cfg.engineOutage {
				stopLogs()
				<-logsDone
				d.finish(t, &driverpb.ExitResult{ExitCode: -1, Err: fmt.Sprintf(
					"docker engine unreachable for %s (engine_outage_timeout %s), the container's state is unknown: %v",
					out.Round(time.Second), d.cfg.engineOutage, err)}, time.Now())
				return
			}
			if !bo.wait(ctx) {
				return
			}
			continue
		}
		if !outageSince.IsZero() {
			d.logger.Info("docker engine answers again; watching the container", "task_id", t.id,
				"container_id", shortID(t.st.ContainerID), "outage", time.Since(outageSince).Round(time.Millisecond))
			outageSince = time.Time{}
		}
		if insp.Container.State != nil && insp.Container.State.Running {
			// Woke early (engine restart) or the wait broke: wait again.
			// A wait that held for a while was established; one that
			// fails at once is paced.
			if waitErr == nil || time.Since(began) >= engineBackoffMax {
				bo.reset()
				continue
			}
			d.logger.Warn("waiting on container failed; retrying", "task_id", t.id, "error", waitErr)
			if !bo.wait(ctx) {
				return
			}
			continue
		}
		state = insp.Container.State
		break
	}

	timer := time.NewTimer(logDrainTimeout)
	select {
	case <-logsDone:
	case <-timer.C:
		stopLogs()
		<-logsDone
	case <-ctx.Done():
		timer.Stop()
		return
	}
	timer.Stop()
	killed := t.wasKilled()
	if state != nil && state.ExitCode == 137 && !state.OOMKilled && !killed {
		state = d.settleOOM(ctx, t, state)
	}
	d.finish(t, exitResult(state, killed), finishedAt(state))
}

// followLogs copies the container's output until it ends with the
// container. A copy cut short while the container still runs (the engine
// restarted, a connection dropped) resumes from its checkpoint, retrying
// with backoff while the engine does not answer.
func (d *Driver) followLogs(ctx context.Context, t *task) {
	var bo backoff
	for failing := false; ; {
		began := time.Now()
		err := copyLogs(ctx, d.engine, t.st.ContainerID, t.st.Logs)
		if ctx.Err() != nil {
			return
		}
		insp, ierr := d.engine.ContainerInspect(ctx, t.st.ContainerID, client.ContainerInspectOptions{})
		if ierr == nil && (insp.Container.State == nil || !insp.Container.State.Running) {
			return // the output ended with the container
		}
		if cerrdefs.IsNotFound(ierr) {
			return
		}
		if ierr == nil && time.Since(began) >= engineBackoffMax {
			bo.reset() // the copy held for a while: resume at once
			failing = false
		}
		// Once per run of failures: an outage would repeat it every pause.
		if !failing {
			d.logger.Warn("container log copy cut short; resuming", "task_id", t.id, "error", err, "engine_error", ierr)
			failing = true
		}
		if !bo.wait(ctx) {
			return
		}
	}
}

// oomSettle bounds how long an exit by SIGKILL that drover did not send
// waits for the engine to record an OOM kill: the engine learns of the
// kernel's OOM kill by an event that may reach it after the exit.
const oomSettle = 2 * time.Second

// settleOOM inspects the exited container again until it reports an OOM
// kill or oomSettle passes, and returns the latest state.
func (d *Driver) settleOOM(ctx context.Context, t *task, state *container.State) *container.State {
	deadline := time.Now().Add(oomSettle)
	for time.Now().Before(deadline) {
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return state
		}
		insp, err := d.engine.ContainerInspect(ctx, t.st.ContainerID, client.ContainerInspectOptions{})
		if err != nil || insp.Container.State == nil {
			return state
		}
		if insp.Container.State.OOMKilled {
			return insp.Container.State
		}
	}
	return state
}

func (t *task) wasKilled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.killed
}

// exitResult maps the engine's final state to the driver's result.
func exitResult(s *container.State, killed bool) *driverpb.ExitResult {
	if s == nil {
		return &driverpb.ExitResult{ExitCode: -1, Err: "container state unknown"}
	}
	r := &driverpb.ExitResult{ExitCode: int32(s.ExitCode), OomKilled: s.OOMKilled, Err: s.Error}
	if s.OOMKilled || killed {
		if s.ExitCode > 128 && s.ExitCode < 128+65 {
			r.Signal = int32(s.ExitCode - 128)
		}
	}
	return r
}

func finishedAt(s *container.State) time.Time {
	if s != nil {
		if t, err := time.Parse(time.RFC3339Nano, s.FinishedAt); err == nil && t.Year() > 1 {
			return t
		}
	}
	return time.Now()
}

func (d *Driver) finish(t *task, r *driverpb.ExitResult, at time.Time) {
	t.mu.Lock()
	if t.result != nil {
		t.mu.Unlock()
		return
	}
	t.result, t.completedAt = r, at
	t.mu.Unlock()
	close(t.done)
	d.logger.Info("task exited", "task_id", t.id, "container_id", shortID(t.st.ContainerID),
		"exit_code", r.ExitCode, "oom_killed", r.OomKilled)
}

// WaitTask implements driver.Driver.
func (d *Driver) WaitTask(ctx context.Context, id string) (*driverpb.ExitResult, error) {
	t, err := d.lookup(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.done:
		t.mu.Lock()
		defer t.mu.Unlock()
		return cloneResult(t.result), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func cloneResult(r *driverpb.ExitResult) *driverpb.ExitResult {
	return &driverpb.ExitResult{ExitCode: r.ExitCode, Signal: r.Signal, OomKilled: r.OomKilled, Err: r.Err}
}

// StopTask implements driver.Driver: the signal, up to timeout for the
// container to exit, then SIGKILL.
func (d *Driver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	t, err := d.lookup(id)
	if err != nil {
		return err
	}
	if signal == "" {
		signal = t.st.KillSignal
	}
	if _, err := driver.ParseSignal(signal); err != nil {
		return err
	}
	if t.exited() {
		return nil
	}
	if timeout > 0 {
		if err := d.kill(ctx, t, signal); err != nil {
			return err
		}
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-t.done:
			return nil
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t.mu.Lock()
	t.killed = true
	t.mu.Unlock()
	if err := d.kill(ctx, t, "SIGKILL"); err != nil {
		return err
	}
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kill sends signal to the container's main process; a container that is
// no longer running is not an error. While the engine does not answer it
// retries with backoff, so a stop asked for during an outage reaches the
// container when the engine is back; it gives up when the task ends (the
// watcher's engine_outage_timeout bounds that) or ctx does.
func (d *Driver) kill(ctx context.Context, t *task, signal string) error {
	var bo backoff
	for logged := false; ; logged = true {
		_, err := d.engine.ContainerKill(ctx, t.st.ContainerID, client.ContainerKillOptions{Signal: signal})
		if err == nil || cerrdefs.IsConflict(err) || cerrdefs.IsNotFound(err) || t.exited() {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !engineUnreachable(err) {
			return fmt.Errorf("signal %s to container %s: %w", signal, shortID(t.st.ContainerID), err)
		}
		if !logged {
			d.logger.Warn("docker engine does not answer; the signal is sent when it does", "task_id", t.id, "signal", signal, "error", err)
		}
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-t.done:
				cancel()
			case <-wctx.Done():
			}
		}()
		ok := bo.wait(wctx)
		cancel()
		if !ok {
			if t.exited() {
				return nil
			}
			return ctx.Err()
		}
	}
}

// SignalTask implements driver.Driver.
func (d *Driver) SignalTask(ctx context.Context, id string, signal string) error {
	t, err := d.lookup(id)
	if err != nil {
		return err
	}
	if _, err := driver.ParseSignal(signal); err != nil {
		return err
	}
	if t.exited() {
		return fmt.Errorf("%w: %q", driver.ErrTaskNotRunning, id)
	}
	return d.kill(ctx, t, signal)
}

// DestroyTask implements driver.Driver: it forgets the task, removes its
// container (unless gc.container = false) and releases its image, which
// is removed after gc.image_delay once no task uses it (unless gc.image =
// false).
func (d *Driver) DestroyTask(ctx context.Context, id string, force bool) error {
	t, err := d.lookup(id)
	if err != nil {
		return err
	}
	if !t.exited() {
		if !force {
			return fmt.Errorf("%w: %q", driver.ErrTaskRunning, id)
		}
		if err := d.StopTask(ctx, id, 0, "SIGKILL"); err != nil {
			return err
		}
	}
	if !d.tasks.Remove(id, t) {
		return nil // a concurrent destroy won
	}
	t.stopWatch()
	if d.cfg.GC.gcContainer() {
		_, err := d.engine.ContainerRemove(ctx, t.st.ContainerID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil || cerrdefs.IsNotFound(err):
		case engineUnreachable(err):
			// The task ended without the engine (engine_outage_timeout):
			// its container may still run, and must not outlive it.
			d.logger.Warn("docker engine does not answer; the task's container is removed when it does", "task_id", id, "container_id", shortID(t.st.ContainerID))
			d.removeLater(t.st.ContainerID)
		default:
			d.logger.Warn("removing container failed", "task_id", id, "container_id", shortID(t.st.ContainerID), "error", err)
		}
	}
	_ = removeFile(t.st.Logs.Checkpoint)
	d.releaseImage(t.st.ImageID)
	if t.st.Netns {
		d.leaveNetwork(ctx, t.st.AllocID)
	}
	d.logger.Debug("task destroyed", "task_id", id, "container_id", shortID(t.st.ContainerID))
	return nil
}

// removeContainer cleans up after a failed start.
func (d *Driver) removeContainer(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.engine.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		d.logger.Warn("removing container after a failed start failed", "container_id", shortID(id), "error", err)
	}
}

// InspectTask implements driver.Driver.
func (d *Driver) InspectTask(_ context.Context, id string) (*driverpb.TaskStatus, error) {
	t, err := d.lookup(id)
	if err != nil {
		return nil, err
	}
	st := &driverpb.TaskStatus{Id: id, State: driverpb.TaskState_TASK_STATE_RUNNING, StartedAtUnixNano: t.startedAt.UnixNano()}
	if t.exited() {
		t.mu.Lock()
		st.State = driverpb.TaskState_TASK_STATE_EXITED
		st.ExitResult = cloneResult(t.result)
		st.CompletedAtUnixNano = t.completedAt.UnixNano()
		t.mu.Unlock()
	}
	return st, nil
}

// RecoverTask implements driver.Driver: it finds the handle's container
// and watches it again (resuming the log copy at its checkpoint). A
// container that exited meanwhile is reported with its exit code from
// the engine; a removed one is ErrTaskNotFound. While the engine does not
// answer the task is recovered from its handle alone, as running. Nothing
// is ever started.
func (d *Driver) RecoverTask(ctx context.Context, h *driverpb.TaskHandle) error {
	if h.GetId() == "" {
		return fmt.Errorf("%w: handle id is required", driver.ErrInvalidConfig)
	}
	st, err := decodeState(h)
	if err != nil {
		return err
	}
	tracked, release, err := d.reserve(h.GetId())
	if err != nil {
		return err
	}
	if tracked {
		return nil
	}
	defer release()
	insp, err := d.engine.ContainerInspect(ctx, st.ContainerID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: container %s of task %q is gone", driver.ErrTaskNotFound, shortID(st.ContainerID), h.GetId())
	}
	running := false
	switch {
	case err == nil:
		if c := insp.Container; c.Config == nil || !ownedBy(c.Config.Labels, st.AllocID, st.TaskName) {
			return fmt.Errorf("%w: container %s does not carry the labels of task %q", driver.ErrInvalidConfig, shortID(st.ContainerID), h.GetId())
		}
		running = insp.Container.State != nil && insp.Container.State.Running
	case engineUnreachable(err) && ctx.Err() == nil:
		// The engine is away, not the container: the task is tracked
		// from its handle, and the watcher finds the container when the
		// engine answers (or ends the task after engine_outage_timeout).
		d.logger.Warn("docker engine does not answer; recovering the task from its handle", "task_id", h.GetId(),
			"container_id", shortID(st.ContainerID), "error", err)
	default:
		return fmt.Errorf("inspect container %s: %w", shortID(st.ContainerID), err)
	}
	t := &task{id: h.GetId(), st: *st, startedAt: time.Unix(0, h.GetStartedAtUnixNano()), done: make(chan struct{})}
	d.acquireImage(st.ImageID)
	d.track(t)
	d.logger.Info("task recovered", "task_id", t.id, "container_id", shortID(st.ContainerID), "running", running, "engine_answered", err == nil)
	return nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

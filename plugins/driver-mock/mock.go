// Package mock is mock_driver, Nomad's test driver: a task that runs no
// process, only does what its config says (run for a while, print,
// exit with a code, a signal or an error, fail to start, answer a signal
// with an error), so jobs written for Nomad's own tests run unchanged.
// The -dev agent enables it, as Nomad's development builds carry it.
//
// A mock task lives in the plugin process. Its handle carries its config
// and start time, so a new plugin process recovers it and lets it run out
// the rest of its run_for, as Nomad's mock does.
package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/safefs"
)

const (
	// Name is the driver name jobspecs use.
	Name = "mock_driver"
	// Version is this driver's version.
	Version = "0.1.0"
	// AttrDriver is the node attribute Nomad's mock sets.
	AttrDriver = "driver.mock"

	// DisabledDescription is the health description of a driver the
	// operator has not enabled.
	DisabledDescription = `disabled: mock_driver is Nomad's test driver; the -dev agent enables it, or plugin "mock_driver" { config { enabled = true } }`

	// ErrPluginShutdown is the exit error of a task whose
	// plugin_exit_after elapsed, Nomad's words.
	ErrPluginShutdown = "plugin is shut down"
)

// Driver is the mock driver. Call New.
type Driver struct {
	logger  hclog.Logger
	cfg     *PluginConfig
	started time.Time
	tasks   driver.Tasks[*task]

	// ctx ends when Close is called; every task's goroutine stops with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ driver.Driver          = (*Driver)(nil)
	_ driver.ConfigValidator = (*Driver)(nil)
)

// New returns a mock driver with cfg (nil: enabled, the -dev agent's). A
// nil logger discards logs. Close stops its tasks' goroutines.
func New(logger hclog.Logger, cfg *PluginConfig) *Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg == nil {
		cfg = &PluginConfig{Enabled: true}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Driver{logger: logger.Named(Name), cfg: cfg, started: time.Now(), ctx: ctx, cancel: cancel}
}

// Close stops every task's goroutine (the tasks are left as they are, for
// a new plugin process to recover) and waits for them.
func (d *Driver) Close() {
	d.cancel()
	d.wg.Wait()
}

// Serve runs this process as the mock_driver plugin, configured from
// ConfigEnvVar. A bad config is fatal: the agent validated it already.
func Serve() {
	logger := driver.NewLogger("")
	cfg, err := ParsePluginConfig([]byte(os.Getenv(ConfigEnvVar)))
	if err != nil {
		logger.Error("invalid plugin config", "error", err)
		os.Exit(1)
	}
	d := New(logger, cfg)
	d.logger.Info("mock_driver configured", "enabled", cfg.Enabled)
	driver.ServeWithLogger(d, logger)
	d.Close()
}

// ValidateConfig implements driver.ConfigValidator.
func (d *Driver) ValidateConfig(_ context.Context, raw []byte) error {
	_, err := ParsePluginConfig(raw)
	return driver.InvalidPluginConfig(err)
}

// Info implements driver.Driver.
func (d *Driver) Info(context.Context) (*driverpb.InfoResponse, error) {
	return &driverpb.InfoResponse{Name: Name, Version: Version}, nil
}

// Fingerprint implements driver.Driver: healthy when enabled, until
// shutdown_periodic_duration after start where shutdown_periodic_after
// is set.
func (d *Driver) Fingerprint(context.Context) (*driverpb.FingerprintResponse, error) {
	if !d.cfg.Enabled {
		return &driverpb.FingerprintResponse{HealthDescription: DisabledDescription}, nil
	}
	if d.cfg.ShutdownPeriodicAfter && time.Since(d.started) >= d.cfg.shutdownAfter {
		return &driverpb.FingerprintResponse{HealthDescription: "disabled"}, nil
	}
	return &driverpb.FingerprintResponse{
		Detected: true, Healthy: true, HealthDescription: "Healthy",
		Attributes: map[string]string{AttrDriver: "true"},
	}, nil
}

// state is the handle's state: enough to run the task out after a
// plugin restart.
type state struct {
	Config    json.RawMessage `json:"config"`
	StartedAt int64           `json:"started_at_unix_nano"`
	Stdout    string          `json:"stdout,omitempty"`
	Stderr    string          `json:"stderr,omitempty"`
	AllocDir  string          `json:"alloc_dir,omitempty"`
	MaxFiles  int             `json:"max_files,omitempty"`
	MaxSize   int64           `json:"max_size,omitempty"`
}

type task struct {
	id        string
	plan      *plan
	startedAt time.Time

	// kill is closed by StopTask or a forced DestroyTask (once).
	kill     chan struct{}
	killOnce sync.Once

	done        chan struct{}
	result      *driverpb.ExitResult
	completedAt time.Time
}

func (t *task) stop() { t.killOnce.Do(func() { close(t.kill) }) }

func (t *task) exited() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// StartTask implements driver.Driver.
func (d *Driver) StartTask(ctx context.Context, cfg *driverpb.TaskConfig) (*driverpb.TaskHandle, error) {
	if !d.cfg.Enabled {
		return nil, fmt.Errorf("%w: mock_driver is %s", driver.ErrInvalidConfig, DisabledDescription)
	}
	if cfg.GetId() == "" {
		return nil, fmt.Errorf("%w: task id is required", driver.ErrInvalidConfig)
	}
	p, err := parseTaskConfig(cfg.GetConfigJson())
	if err != nil {
		return nil, err
	}
	st := state{Config: append(json.RawMessage(nil), cfg.GetConfigJson()...), Stdout: cfg.GetStdoutPath(),
		Stderr: cfg.GetStderrPath(), AllocDir: cfg.GetAllocDir()}
	if len(st.Config) == 0 {
		st.Config = json.RawMessage("{}")
	}
	if lr := cfg.GetLogRotation(); lr != nil {
		st.MaxFiles, st.MaxSize = int(lr.GetMaxFiles()), lr.GetMaxFileSizeBytes()
		if st.MaxFiles < 1 || st.MaxSize < 1 {
			return nil, fmt.Errorf("%w: log_rotation needs max_files and max_file_size_bytes of at least 1", driver.ErrInvalidConfig)
		}
	}
	tracked, release, err := d.tasks.Reserve(cfg.GetId())
	if err != nil {
		return nil, err
	}
	if tracked {
		return nil, fmt.Errorf("%w: %q", driver.ErrTaskExists, cfg.GetId())
	}
	defer release()
	if p.startBlock > 0 {
		timer := time.NewTimer(p.startBlock)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
	if p.startError != "" {
		if p.recoverable {
			return nil, errors.New(p.startError)
		}
		return nil, fmt.Errorf("%w: %s", driver.ErrInvalidConfig, p.startError)
	}
	if p.driverIP != "" || p.driverPorts != "" || p.advertise {
		d.logger.Warn("driver_ip, driver_advertise and driver_port_map are accepted but not reported: drover's driver protocol has no driver network",
			"task_id", cfg.GetId())
	}
	now := time.Now()
	st.StartedAt = now.UnixNano()
	t, err := d.run(cfg.GetId(), p, st, now, 0)
	if err != nil {
		return nil, err
	}
	return t.handle(st)
}

func (t *task) handle(st state) (*driverpb.TaskHandle, error) {
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &driverpb.TaskHandle{Id: t.id, StartedAtUnixNano: st.StartedAt, State: raw}, nil
}

// run tracks the task and starts its goroutine; ran is how much of
// run_for has passed already (recovery).
func (d *Driver) run(id string, p *plan, st state, startedAt time.Time, ran time.Duration) (*task, error) {
	stdout, err := openOutput(st, st.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := openOutput(st, st.Stderr)
	if err != nil {
		_ = stdout.Close()
		return nil, err
	}
	t := &task{id: id, plan: p, startedAt: startedAt, kill: make(chan struct{}), done: make(chan struct{})}
	d.tasks.Add(id, t)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.runTask(t, stdout, stderr, ran)
	}()
	d.logger.Debug("task started", "task_id", id, "run_for", p.runFor)
	return t, nil
}

// runTask is one task's life: its output, then its exit when run_for
// elapses, it is stopped (after kill_after), or plugin_exit_after
// elapses. The driver's Close leaves it unfinished.
func (d *Driver) runTask(t *task, stdout, stderr io.WriteCloser, ran time.Duration) {
	p := t.plan
	var outs sync.WaitGroup
	outErr := make(chan error, 2)
	quit := make(chan struct{}) // ends the output writers early
	for _, o := range []struct {
		w io.WriteCloser
		o output
	}{{stdout, p.stdout}, {stderr, p.stderr}} {
		outs.Add(1)
		go func() {
			defer outs.Done()
			defer o.w.Close()
			if err := writeOutput(o.w, o.o, quit, d.ctx.Done()); err != nil {
				outErr <- err
			}
		}()
	}
	finish := func(res *driverpb.ExitResult) {
		close(quit)
		outs.Wait()
		t.result = res
		t.completedAt = time.Now()
		close(t.done)
		d.logger.Debug("task exited", "task_id", t.id, "exit_code", res.GetExitCode(), "signal", res.GetSignal(), "err", res.GetErr())
	}
	runFor := time.NewTimer(max(p.runFor-ran, 0))
	defer runFor.Stop()
	var pluginExit <-chan time.Time
	if p.pluginExit > 0 {
		tm := time.NewTimer(max(p.pluginExit-ran, 0))
		defer tm.Stop()
		pluginExit = tm.C
	}
	exit := &driverpb.ExitResult{ExitCode: p.exit.Code, Signal: p.exit.Signal, Err: p.exit.Err}
	select {
	case <-runFor.C:
		outs.Wait() // the whole output is written before the exit
		finish(exit)
	case <-t.kill:
		finish(exit)
	case <-pluginExit:
		finish(&driverpb.ExitResult{Err: ErrPluginShutdown})
	case err := <-outErr:
		finish(&driverpb.ExitResult{Err: "write task output: " + err.Error()})
	case <-d.ctx.Done():
		close(quit)
		outs.Wait()
	}
}

// writeOutput writes o.s once, then o.repeat more times o.every apart.
func writeOutput(w io.Writer, o output, quit, closed <-chan struct{}) error {
	if o.s == "" {
		return nil
	}
	if _, err := io.WriteString(w, o.s); err != nil {
		return err
	}
	for range o.repeat {
		timer := time.NewTimer(o.every)
		select {
		case <-quit:
			timer.Stop()
			return nil
		case <-closed:
			timer.Stop()
			return nil
		case <-timer.C:
		}
		if _, err := io.WriteString(w, o.s); err != nil {
			return err
		}
	}
	return nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// openOutput opens a stream's log beneath the allocation directory
// without following a symlink: rotated files <base>.<n> when rotation is
// set, else the file in append mode; no path discards.
func openOutput(st state, path string) (io.WriteCloser, error) {
	if path == "" {
		return nopCloser{io.Discard}, nil
	}
	if st.AllocDir == "" {
		return nil, fmt.Errorf("%w: alloc_dir is required with stdout_path or stderr_path", driver.ErrInvalidConfig)
	}
	root, err := safefs.Open(st.AllocDir)
	if err != nil {
		return nil, fmt.Errorf("open task output: %w", err)
	}
	defer root.Close()
	rel, err := driver.RelBeneath(root.Name(), path)
	if err != nil {
		return nil, fmt.Errorf("%w: task output: %v", driver.ErrInvalidConfig, err)
	}
	if st.MaxFiles > 0 {
		return driver.OpenRotatingLogIn(root, rel, st.MaxFiles, st.MaxSize)
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open task output: %w", err)
	}
	return f, nil
}

// WaitTask implements driver.Driver.
func (d *Driver) WaitTask(ctx context.Context, id string) (*driverpb.ExitResult, error) {
	t, err := d.tasks.Get(id)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.done:
		return proto.Clone(t.result).(*driverpb.ExitResult), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// StopTask implements driver.Driver: the task exits kill_after after the
// stop (at once without it), whatever the timeout; the signal is checked
// and otherwise ignored, as a mock task has no process.
func (d *Driver) StopTask(ctx context.Context, id string, _ time.Duration, signal string) error {
	t, err := d.tasks.Get(id)
	if err != nil {
		return err
	}
	if signal != "" {
		if _, err := driver.ParseSignal(signal); err != nil {
			return err
		}
	}
	if t.exited() {
		return nil
	}
	if t.plan.killAfter > 0 {
		timer := time.NewTimer(t.plan.killAfter)
		select {
		case <-t.done:
			timer.Stop()
			return nil
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
	t.stop()
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// DestroyTask implements driver.Driver.
func (d *Driver) DestroyTask(ctx context.Context, id string, force bool) error {
	t, err := d.tasks.Get(id)
	if err != nil {
		return err
	}
	if !t.exited() {
		if !force {
			return fmt.Errorf("%w: destroy %q without force", driver.ErrTaskRunning, id)
		}
		t.stop()
		select {
		case <-t.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d.tasks.Remove(id, t)
	return nil
}

// InspectTask implements driver.Driver.
func (d *Driver) InspectTask(_ context.Context, id string) (*driverpb.TaskStatus, error) {
	t, err := d.tasks.Get(id)
	if err != nil {
		return nil, err
	}
	st := &driverpb.TaskStatus{Id: id, State: driverpb.TaskState_TASK_STATE_RUNNING, StartedAtUnixNano: t.startedAt.UnixNano()}
	if t.exited() {
		st.State = driverpb.TaskState_TASK_STATE_EXITED
		st.CompletedAtUnixNano = t.completedAt.UnixNano()
		st.ExitResult = proto.Clone(t.result).(*driverpb.ExitResult)
	}
	return st, nil
}

// SignalTask implements driver.Driver: signal_error is the answer, if set.
func (d *Driver) SignalTask(_ context.Context, id string, signal string) error {
	t, err := d.tasks.Get(id)
	if err != nil {
		return err
	}
	if _, err := driver.ParseSignal(signal); err != nil {
		return err
	}
	if t.exited() {
		return fmt.Errorf("%w: %q has exited", driver.ErrTaskNotRunning, id)
	}
	if t.plan.signalError != "" {
		return errors.New(t.plan.signalError)
	}
	return nil
}

// RecoverTask implements driver.Driver: the task runs out what is left
// of its run_for (a task whose run_for passed meanwhile exits at once).
func (d *Driver) RecoverTask(_ context.Context, h *driverpb.TaskHandle) error {
	if h.GetId() == "" {
		return fmt.Errorf("%w: handle has no task id", driver.ErrInvalidConfig)
	}
	var st state
	if err := json.Unmarshal(h.GetState(), &st); err != nil || st.StartedAt == 0 {
		return fmt.Errorf("%w: not a mock_driver handle: %v", driver.ErrInvalidConfig, err)
	}
	p, err := parseTaskConfig(st.Config)
	if err != nil {
		return err
	}
	tracked, release, err := d.tasks.Reserve(h.GetId())
	if err != nil {
		return err
	}
	if tracked {
		return nil
	}
	defer release()
	startedAt := time.Unix(0, st.StartedAt)
	_, err = d.run(h.GetId(), p, st, startedAt, max(time.Since(startedAt), 0))
	return err
}

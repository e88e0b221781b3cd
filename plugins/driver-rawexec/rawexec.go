// Package rawexec is the raw_exec task driver: it runs a task's command as
// a plain process on the host, like Nomad's raw_exec, but not as a back
// door: the driver is off unless the operator enables it, each task runs
// as the user it names (root only where the operator allows it), in a
// cgroup of its own that carries its memory and cpu limits and through
// which its whole process tree is killed on stop.
//
// Tasks must outlive the driver plugin process, so a task is never the
// driver's own child. The driver re-executes its own binary once as a task
// supervisor (see supervisor.go) in a session of its own; the supervisor
// starts each task's command in a further new session, waits for it and
// records its exit result in a file. A new driver process recovers a task
// from its handle by watching that supervisor and file (see recover.go).
package rawexec

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

const (
	// Name is the driver name jobspecs use (`driver = "raw_exec"`).
	Name = "raw_exec"
	// Version is this driver's version.
	Version = "0.1.0"
	// AttrDriver is the node attribute whose presence tells the scheduler
	// the driver is usable on the node.
	AttrDriver = "driver.raw_exec"
	// AttrCgroups tells which cgroup version isolates the tasks: "v1",
	// "v2", or "off" (no_cgroups).
	AttrCgroups = "driver.raw_exec.cgroups"

	// defaultPollInterval paces watching a recovered task, which is not
	// our child and so cannot be waited for.
	defaultPollInterval = 100 * time.Millisecond
)

// Driver is the raw_exec driver. The zero value is not usable; call New.
type Driver struct {
	logger hclog.Logger

	// shimExe and shimArgs are how the driver re-executes itself as the
	// task supervisor: same binary, same arguments, so whichever entry
	// point led here (a standalone binary, `drover __plugin driver-rawexec`,
	// a test binary) leads the supervisor to Serve again, which then runs
	// the supervisor.
	shimExe    string
	shimExeErr error
	shimArgs   []string
	// shimEnv is added to the supervisor's environment; tests use it to
	// tune the race detector's exit delay.
	shimEnv []string

	// supMu guards sup, the supervisor new tasks go to (nil: none yet,
	// or let go). supIdle is how long it is kept without a task.
	supMu   sync.Mutex
	sup     *supervisor
	supIdle time.Duration
	// closing: Shutdown was called; a supervisor is let go as soon as it
	// is idle, without the idle delay. live holds every supervisor
	// started and not yet reaped.
	closing bool
	live    map[*supervisor]struct{}

	pollInterval time.Duration

	cfg *PluginConfig
	// cgroupRoot is where the hierarchies are looked for; tests point it
	// at a directory that is not one.
	cgroupRoot string

	cgMu sync.Mutex
	cg   *cgroupHost // found on first use; nil until found

	tasks driver.Tasks[*task]
}

var _ driver.Driver = (*Driver)(nil)

// New returns a raw_exec driver with the -dev agent's configuration
// (DevConfig: enabled, any user, cgroups where the host has them), for
// embedding in tests. A nil logger discards logs.
func New(logger hclog.Logger) *Driver {
	return NewConfigured(logger, DevConfig())
}

// NewConfigured returns a raw_exec driver that tracks no task yet, with
// the given plugin config (nil: the defaults, which leave it disabled).
func NewConfigured(logger hclog.Logger, cfg *PluginConfig) *Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg == nil {
		cfg, _ = ParsePluginConfig(nil)
	}
	exe, err := os.Executable()
	return &Driver{
		logger:       logger.Named(Name),
		shimExe:      exe,
		shimExeErr:   err,
		shimArgs:     append([]string(nil), os.Args[1:]...),
		pollInterval: defaultPollInterval,
		supIdle:      defaultSupervisorIdle,
		cfg:          cfg,
		cgroupRoot:   cgroupRoot,
	}
}

// SetSupervisorIdle sets how long the driver keeps a task supervisor that
// has no task left before letting it exit (default 5 s; 0: at once). For
// tests that wait for the supervisor to go; call it before the first task
// starts.
func (d *Driver) SetSupervisorIdle(idle time.Duration) {
	d.supMu.Lock()
	defer d.supMu.Unlock()
	d.supIdle = idle
}

// Serve runs this process as the raw_exec plugin, configured from
// ConfigEnvVar, or as the task supervisor when the driver started it as one. Entry
// points must call it before doing anything else that a supervisor should not do
// (parse flags, open files, log). A bad config is fatal: the agent
// validated it already, so it can only come from a hand-started plugin.
func Serve() {
	if os.Getenv(ShimEnvVar) != "" {
		os.Exit(runSupervisor())
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Level:      hclog.Trace,
		Output:     os.Stderr,
		JSONFormat: true, // go-plugin re-emits JSON log lines in the host's logger
	})
	cfg, err := ParsePluginConfig([]byte(os.Getenv(ConfigEnvVar)))
	if err != nil {
		logger.Error("invalid plugin config", "error", err)
		os.Exit(1)
	}
	d := NewConfigured(logger, cfg)
	d.logger.Info("raw_exec configured", "enabled", cfg.Enabled, ConfigKeyNoCgroups, cfg.NoCgroups,
		ConfigKeyDeniedHostUsers, cfg.DeniedHostUsers, "cgroups_optional", cfg.CgroupsOptional)
	if cfg.Enabled && cfg.NoCgroups {
		d.logger.Warn("no_cgroups is set: tasks run without memory or cpu limits, and processes that leave a task's process group survive it")
	}
	driver.Serve(d)
}

// DisabledDescription is the health description of a driver the operator
// has not enabled.
const DisabledDescription = `disabled: raw_exec runs tasks directly on the host; enable it with plugin "raw_exec" { config { enabled = true } } in the agent config`

// cgroups returns the host's cgroup layout; nil with a nil error when the
// driver runs tasks without cgroups (no_cgroups, or -dev on a host without
// a writable hierarchy). The error names the missing controller.
func (d *Driver) cgroups() (*cgroupHost, error) {
	if d.cfg.NoCgroups {
		return nil, nil
	}
	d.cgMu.Lock()
	defer d.cgMu.Unlock()
	if d.cg != nil {
		return d.cg, nil
	}
	h, err := detectCgroups(d.cgroupRoot)
	if err != nil {
		if d.cfg.CgroupsOptional {
			return nil, nil
		}
		return nil, err
	}
	d.cg = h
	return h, nil
}

// Info implements driver.Driver.
func (d *Driver) Info(context.Context) (*driverpb.InfoResponse, error) {
	return &driverpb.InfoResponse{Name: Name, Version: Version, FsIsolation: driver.FSIsolationNone}, nil
}

// Fingerprint implements driver.Driver. A driver the operator has not
// enabled is undetected, with the reason, so the scheduler places nothing
// on it. Enabled, it is healthy where its process bookkeeping works
// (Linux, whose /proc lets the driver tell a live task from a recycled
// pid) and, unless no_cgroups, where a cgroup hierarchy is writable.
func (d *Driver) Fingerprint(context.Context) (*driverpb.FingerprintResponse, error) {
	if !d.cfg.Enabled {
		return &driverpb.FingerprintResponse{HealthDescription: DisabledDescription}, nil
	}
	if runtime.GOOS != "linux" {
		return &driverpb.FingerprintResponse{
			HealthDescription: fmt.Sprintf("raw_exec is not supported on %s", runtime.GOOS),
		}, nil
	}
	if d.shimExeErr != nil {
		return &driverpb.FingerprintResponse{
			Detected:          true,
			HealthDescription: fmt.Sprintf("cannot locate own executable for the task supervisor: %v", d.shimExeErr),
		}, nil
	}
	cg, err := d.cgroups()
	if err != nil {
		return &driverpb.FingerprintResponse{Detected: true, HealthDescription: err.Error()}, nil
	}
	mode := "off"
	switch {
	case cg != nil && cg.v2:
		mode = "v2"
	case cg != nil:
		mode = "v1"
	}
	return &driverpb.FingerprintResponse{
		Detected:          true,
		Healthy:           true,
		HealthDescription: "Healthy",
		Attributes:        map[string]string{AttrDriver: "1", AttrCgroups: mode},
	}, nil
}

// lookup returns the tracked task with this id.
func (d *Driver) lookup(id string) (*task, error) { return d.tasks.Get(id) }

// reserve claims id for a StartTask or RecoverTask in flight
// (driver.Tasks.Reserve).
func (d *Driver) reserve(id string) (tracked bool, release func(), err error) {
	return d.tasks.Reserve(id)
}

// track registers a started or recovered task and starts its watcher;
// watch is nil for a task that has already exited.
func (d *Driver) track(t *task, watch func()) {
	d.tasks.Add(t.id, t)
	if watch != nil {
		go watch()
	}
}

// envList renders env as the "K=V" list exec wants, sorted so the order
// is stable.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

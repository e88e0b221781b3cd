// Package rawexec is the raw_exec task driver: it runs a task's command as
// a plain process on the host, without isolation or resource limits, like
// Nomad's raw_exec.
//
// Tasks must outlive the driver plugin process, so a task is never the
// driver's own child. The driver re-executes its own binary as a small shim
// (see shim.go) in a session of its own; the shim starts the command in a
// further new session, waits for it and records the exit result in a file.
// A new driver process recovers a task from its handle by watching that
// shim and file (see recover.go).
package rawexec

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
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

	// defaultPollInterval paces watching a recovered task, which is not
	// our child and so cannot be waited for.
	defaultPollInterval = 100 * time.Millisecond
)

// Driver is the raw_exec driver. The zero value is not usable; call New.
type Driver struct {
	logger hclog.Logger

	// shimExe and shimArgs are how the driver re-executes itself as the
	// shim: same binary, same arguments, so whichever entry point led here
	// (a standalone binary, `drover __plugin driver-rawexec`, a test binary) leads
	// the shim to Serve again, which then runs the shim.
	shimExe    string
	shimExeErr error
	shimArgs   []string
	// shimEnv is added to the shim's environment; tests use it to tune
	// the race detector's exit delay.
	shimEnv []string

	pollInterval time.Duration

	tasks driver.Tasks[*task]
}

var _ driver.Driver = (*Driver)(nil)

// New returns a raw_exec driver that tracks no task yet. A nil logger
// discards logs.
func New(logger hclog.Logger) *Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	exe, err := os.Executable()
	return &Driver{
		logger:       logger.Named(Name),
		shimExe:      exe,
		shimExeErr:   err,
		shimArgs:     append([]string(nil), os.Args[1:]...),
		pollInterval: defaultPollInterval,
	}
}

// Serve runs this process as the raw_exec plugin, or as a task shim when the
// driver started it as one. Entry points must call it before doing anything
// else that a shim should not do (parse flags, open files, log).
func Serve() {
	if os.Getenv(ShimEnvVar) != "" {
		os.Exit(runShim())
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Level:      hclog.Trace,
		Output:     os.Stderr,
		JSONFormat: true, // go-plugin re-emits JSON log lines in the host's logger
	})
	driver.Serve(New(logger))
}

// Info implements driver.Driver.
func (d *Driver) Info(context.Context) (*driverpb.InfoResponse, error) {
	return &driverpb.InfoResponse{Name: Name, Version: Version}, nil
}

// Fingerprint implements driver.Driver. raw_exec needs nothing but the
// kernel, so it is healthy wherever its process bookkeeping works: Linux,
// whose /proc lets the driver tell a live task from a recycled pid.
func (d *Driver) Fingerprint(context.Context) (*driverpb.FingerprintResponse, error) {
	if runtime.GOOS != "linux" {
		return &driverpb.FingerprintResponse{
			HealthDescription: fmt.Sprintf("raw_exec is not supported on %s", runtime.GOOS),
		}, nil
	}
	if d.shimExeErr != nil {
		return &driverpb.FingerprintResponse{
			Detected:          true,
			HealthDescription: fmt.Sprintf("cannot locate own executable for the task shim: %v", d.shimExeErr),
		}, nil
	}
	return &driverpb.FingerprintResponse{
		Detected:          true,
		Healthy:           true,
		HealthDescription: "Healthy",
		Attributes:        map[string]string{AttrDriver: "1"},
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

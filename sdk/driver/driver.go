// Package driver is the task driver plugin kind: the Driver interface a
// driver implements, the go-plugin glue that carries it over gRPC, and
// Serve, which a driver binary's main calls.
//
// A driver runs the tasks of allocations on one client node. Tasks outlive
// the driver process: the client agent restarts its plugins, and itself,
// without stopping the work they run. StartTask therefore returns a
// TaskHandle whose opaque state the client persists; after a restart the
// client hands it to RecoverTask of the new driver process.
//
// The message types are the generated ones of sdk/proto/driver.proto
// (package driverpb); their field comments are the reference for units
// and defaults.
package driver

import (
	"context"
	"time"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// DefaultKillSignal is the signal StopTask sends when neither the request
// nor the task's kill_signal names one.
const DefaultKillSignal = "SIGTERM"

// Driver is what a task driver plugin implements and what the client agent
// calls. Every method honours ctx cancellation; methods that wait (WaitTask,
// StopTask, DestroyTask with force) return ctx.Err() when ctx ends first,
// leaving the task as it is.
//
// Errors a caller acts on are the sentinels of this package (see errors.go),
// wrapped with context and compared with errors.Is; they survive the gRPC
// boundary. Any other error is an operational failure of the driver.
//
// Returned messages belong to the caller; implementations must not keep or
// mutate them after returning, nor keep the messages passed in.
type Driver interface {
	// Info reports the driver's name (as jobspecs reference it, e.g.
	// "raw_exec") and version.
	Info(ctx context.Context) (*driverpb.InfoResponse, error)

	// Fingerprint reports whether the driver is usable on this node and the
	// node attributes it contributes.
	Fingerprint(ctx context.Context) (*driverpb.FingerprintResponse, error)

	// StartTask starts the task and returns its handle once the task's
	// process exists. ErrTaskExists: the id is tracked already.
	// ErrInvalidConfig: the config cannot run (bad config_json, missing
	// command, unknown user...); nothing was started.
	StartTask(ctx context.Context, cfg *driverpb.TaskConfig) (*driverpb.TaskHandle, error)

	// WaitTask blocks until the task exits and returns its exit result.
	// It returns at once for an exited task and may be called any number of
	// times, concurrently. ErrTaskNotFound: unknown or destroyed id.
	WaitTask(ctx context.Context, id string) (*driverpb.ExitResult, error)

	// StopTask sends signal (empty: the task's kill_signal, else
	// DefaultKillSignal) to the task, waits up to timeout for it to exit,
	// then kills it. It returns once the task has exited; stopping an exited
	// task is a no-op. ErrInvalidSignal: unknown signal name.
	StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error

	// DestroyTask forgets the task and removes the driver's own files for
	// it (never the task's output). ErrTaskRunning: the task still runs and
	// force is false; with force the task is killed first.
	DestroyTask(ctx context.Context, id string, force bool) error

	// InspectTask reports the task's state, and its exit result once it
	// has exited.
	InspectTask(ctx context.Context, id string) (*driverpb.TaskStatus, error)

	// SignalTask sends a signal to the task's main process.
	// ErrTaskNotRunning: the task has exited. ErrInvalidSignal: unknown name.
	SignalTask(ctx context.Context, id string, signal string) error

	// RecoverTask reattaches to a task an earlier driver process started,
	// from the handle StartTask returned then. A tracked id is a no-op. A
	// task that exited meanwhile is recovered as exited with its recorded
	// result. ErrTaskNotFound: the task is gone and left no result (e.g. the
	// node rebooted). ErrInvalidConfig: the handle is not one of this
	// driver's.
	RecoverTask(ctx context.Context, handle *driverpb.TaskHandle) error
}

// ConfigValidator is implemented by a driver that takes a plugin config
// (the agent's `plugin "<driver>" { config { ... } }` block): the agent
// asks it to check one before starting the driver with it, so a bad key or
// value fails the agent's start naming the field and the rule. A Driver
// that does not implement it accepts every config.
type ConfigValidator interface {
	// ValidateConfig checks configJSON (empty: no config block) as the
	// driver would take it at start, without applying it. A refusal wraps
	// ErrInvalidPluginConfig (see InvalidPluginConfig) and says which
	// field breaks which rule.
	ValidateConfig(ctx context.Context, configJSON []byte) error
}

// Client is what the host holds of a driver plugin: the Driver, the
// plugin-config check, which every client answers (a plugin that does not
// check its config accepts every one), and exec, which a driver without
// it refuses with ErrExecUnsupported.
type Client interface {
	Driver
	ConfigValidator
	Execer
}

package driver

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/drover-org/drover/sdk/shared"
)

// Errors a caller of a Driver acts on. Implementations wrap them with
// context (fmt.Errorf("%w: ...")); the gRPC adapters carry the kind across
// the plugin boundary, so errors.Is works on both sides.
var (
	// ErrTaskNotFound: the driver tracks no task with this id.
	ErrTaskNotFound = errors.New("task not found")
	// ErrTaskExists: StartTask with an id the driver already tracks.
	ErrTaskExists = errors.New("task already exists")
	// ErrInvalidConfig: the task config or handle cannot be used; retrying
	// the same request fails the same way.
	ErrInvalidConfig = errors.New("invalid task config")
	// ErrInvalidSignal: a signal name the driver does not know.
	ErrInvalidSignal = errors.New("invalid signal")
	// ErrTaskRunning: the call needs an exited task.
	ErrTaskRunning = errors.New("task is running")
	// ErrTaskNotRunning: the call needs a running task.
	ErrTaskNotRunning = errors.New("task is not running")
	// ErrInvalidPluginConfig: ValidateConfig refused the plugin config.
	// Build it with InvalidPluginConfig, which keeps the message the
	// driver's own (the field and the rule) for the agent to show.
	ErrInvalidPluginConfig = errors.New("invalid plugin config")
)

// InvalidPluginConfig marks err, a driver's refusal of its plugin config,
// as ErrInvalidPluginConfig without changing its message: the agent puts
// the stanza's position and the plugin's name in front of it.
func InvalidPluginConfig(err error) error {
	if err == nil {
		return nil
	}
	return pluginConfigError{err}
}

type pluginConfigError struct{ err error }

func (e pluginConfigError) Error() string   { return e.err.Error() }
func (e pluginConfigError) Unwrap() []error { return []error{ErrInvalidPluginConfig, e.err} }

// errorCodec carries the kinds across the plugin boundary. The reason
// disambiguates kinds that share a code; the code alone still maps back to
// the most likely kind for plugins written without this SDK.
var errorCodec = &shared.ErrorCodec{
	Domain: "driver.drover.io",
	Kinds: []shared.ErrorKind{
		{Err: ErrTaskNotFound, Code: codes.NotFound, Reason: "TASK_NOT_FOUND"},
		{Err: ErrTaskExists, Code: codes.AlreadyExists, Reason: "TASK_EXISTS"},
		{Err: ErrInvalidPluginConfig, Code: codes.InvalidArgument, Reason: "INVALID_PLUGIN_CONFIG"},
		{Err: ErrInvalidConfig, Code: codes.InvalidArgument, Reason: "INVALID_CONFIG"},
		{Err: ErrInvalidSignal, Code: codes.InvalidArgument, Reason: "INVALID_SIGNAL"},
		{Err: ErrTaskRunning, Code: codes.FailedPrecondition, Reason: "TASK_RUNNING"},
		{Err: ErrTaskNotRunning, Code: codes.FailedPrecondition, Reason: "TASK_NOT_RUNNING"},
		{Err: ErrExecUnsupported, Code: codes.Unimplemented, Reason: "EXEC_UNSUPPORTED"},
	},
	ByCode: func(c codes.Code) error {
		switch c {
		case codes.NotFound:
			return ErrTaskNotFound
		case codes.AlreadyExists:
			return ErrTaskExists
		case codes.InvalidArgument:
			return ErrInvalidConfig
		}
		return nil
	},
}

// toStatus converts an implementation's error into a status for the wire.
func toStatus(err error) error { return errorCodec.ToStatus(err) }

// fromStatus converts a call's error back into one that unwraps to its kind.
func fromStatus(err error) error { return errorCodec.FromStatus(err) }

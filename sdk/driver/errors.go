package driver

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
)

// errorDomain names drover's driver errors in a gRPC ErrorInfo detail.
const errorDomain = "driver.drover.io"

// errorKinds maps each sentinel to its gRPC code and ErrorInfo reason. The
// reason disambiguates kinds that share a code; the code alone still maps
// back to the most likely kind for plugins written without this SDK.
var errorKinds = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ErrTaskNotFound, codes.NotFound, "TASK_NOT_FOUND"},
	{ErrTaskExists, codes.AlreadyExists, "TASK_EXISTS"},
	{ErrInvalidConfig, codes.InvalidArgument, "INVALID_CONFIG"},
	{ErrInvalidSignal, codes.InvalidArgument, "INVALID_SIGNAL"},
	{ErrTaskRunning, codes.FailedPrecondition, "TASK_RUNNING"},
	{ErrTaskNotRunning, codes.FailedPrecondition, "TASK_NOT_RUNNING"},
}

// toStatus converts an implementation's error into a gRPC status error for
// the wire. Errors that already are statuses pass through unchanged.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	for _, k := range errorKinds {
		if !errors.Is(err, k.err) {
			continue
		}
		st, derr := status.New(k.code, err.Error()).WithDetails(&errdetails.ErrorInfo{
			Reason: k.reason,
			Domain: errorDomain,
		})
		if derr != nil {
			return status.Error(k.code, err.Error())
		}
		return st.Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// fromStatus converts an error returned by a gRPC call back into an error
// that unwraps to the matching sentinel (or context error) and still
// reports its gRPC status, so status.Code keeps working too.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	kind := kindOf(st)
	if kind == nil {
		// Transport and unclassified failures keep gRPC's full text,
		// which names the code (e.g. Unavailable when the plugin died).
		return err
	}
	return &rpcError{st: st, kind: kind}
}

func kindOf(st *status.Status) error {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != errorDomain {
			continue
		}
		for _, k := range errorKinds {
			if k.reason == info.GetReason() {
				return k.err
			}
		}
	}
	switch st.Code() {
	case codes.NotFound:
		return ErrTaskNotFound
	case codes.AlreadyExists:
		return ErrTaskExists
	case codes.InvalidArgument:
		return ErrInvalidConfig
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	}
	return nil
}

// rpcError is a driver error that crossed the plugin boundary.
type rpcError struct {
	st   *status.Status
	kind error
}

func (e *rpcError) Error() string { return e.st.Message() }

func (e *rpcError) Unwrap() error { return e.kind }

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

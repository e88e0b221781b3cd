package csibridge

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Errors a caller of a Bridge acts on. They mirror the CSI status codes a
// driver returns; a bridge maps the driver's code onto the kind and wraps
// it with context (fmt.Errorf("%w: ...")). The gRPC adapters carry the
// kind across the plugin boundary, so errors.Is works on both sides.
var (
	// ErrNotFound: the driver knows no such volume (or node). On a release
	// call (ControllerUnpublish, NodeUnstage, NodeUnpublish, DeleteVolume)
	// the caller treats it as already done.
	ErrNotFound = errors.New("not found")
	// ErrInvalidArgument: the request is malformed, names an unknown mode
	// or is over the size limits; retrying it fails the same way.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrFailedPrecondition: the driver refuses in the volume's current
	// state (e.g. still published elsewhere).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrAlreadyExists: a conflicting volume or publication exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrUnavailable: the driver socket is missing or refuses connections,
	// or the driver reports itself unavailable. Retryable.
	ErrUnavailable = errors.New("driver unavailable")
	// ErrOutOfRange: a capacity the driver cannot provide.
	ErrOutOfRange = errors.New("out of range")
	// ErrResourceExhausted: the driver or node ran out of something, such
	// as the node's volume limit.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrAborted: another operation on the volume is in flight. Retryable.
	ErrAborted = errors.New("aborted")
	// ErrUnimplemented: the driver does not implement the CSI RPC (it
	// lacks the service or capability); check the Fingerprint first.
	ErrUnimplemented = errors.New("not implemented by the driver")
)

// Kinds lists every sentinel of this package.
var Kinds = []error{
	ErrNotFound, ErrInvalidArgument, ErrFailedPrecondition, ErrAlreadyExists,
	ErrUnavailable, ErrOutOfRange, ErrResourceExhausted, ErrAborted, ErrUnimplemented,
}

// errorDomain names drover's CSI bridge errors in a gRPC ErrorInfo detail.
const errorDomain = "csibridge.drover.io"

// errorKinds maps each sentinel to its gRPC code and ErrorInfo reason.
// Every kind has a code of its own, so the code alone maps back for a
// bridge written without this SDK, except Unimplemented: without the
// detail it means the plugin does not serve the protocol, and stays a
// plain status.
var errorKinds = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ErrNotFound, codes.NotFound, "NOT_FOUND"},
	{ErrInvalidArgument, codes.InvalidArgument, "INVALID_ARGUMENT"},
	{ErrFailedPrecondition, codes.FailedPrecondition, "FAILED_PRECONDITION"},
	{ErrAlreadyExists, codes.AlreadyExists, "ALREADY_EXISTS"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	{ErrOutOfRange, codes.OutOfRange, "OUT_OF_RANGE"},
	{ErrResourceExhausted, codes.ResourceExhausted, "RESOURCE_EXHAUSTED"},
	{ErrAborted, codes.Aborted, "ABORTED"},
	{ErrUnimplemented, codes.Unimplemented, "UNIMPLEMENTED"},
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
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.Unimplemented, codes.Unavailable:
		// Without the detail these come from gRPC itself: the plugin does
		// not serve the protocol, or the plugin process is gone. Neither
		// is the driver's doing.
		return nil
	}
	for _, k := range errorKinds {
		if k.code == st.Code() {
			return k.err
		}
	}
	return nil
}

// rpcError is a bridge error that crossed the plugin boundary.
type rpcError struct {
	st   *status.Status
	kind error
}

func (e *rpcError) Error() string { return e.st.Message() }

func (e *rpcError) Unwrap() error { return e.kind }

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

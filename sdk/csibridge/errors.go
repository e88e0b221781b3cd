package csibridge

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/drover-org/drover/sdk/shared"
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

// errorCodec carries the kinds across the plugin boundary. Every kind has
// a code of its own, so the code alone maps back for a bridge written
// without this SDK, except Unimplemented and Unavailable: without the
// detail they come from gRPC itself (the plugin does not serve the
// protocol, or its process is gone), not from the driver, and stay plain
// statuses.
var errorCodec = &shared.ErrorCodec{
	Domain: "csibridge.drover.io",
	Kinds: []shared.ErrorKind{
		{Err: ErrNotFound, Code: codes.NotFound, Reason: "NOT_FOUND"},
		{Err: ErrInvalidArgument, Code: codes.InvalidArgument, Reason: "INVALID_ARGUMENT"},
		{Err: ErrFailedPrecondition, Code: codes.FailedPrecondition, Reason: "FAILED_PRECONDITION"},
		{Err: ErrAlreadyExists, Code: codes.AlreadyExists, Reason: "ALREADY_EXISTS"},
		{Err: ErrUnavailable, Code: codes.Unavailable, Reason: "UNAVAILABLE"},
		{Err: ErrOutOfRange, Code: codes.OutOfRange, Reason: "OUT_OF_RANGE"},
		{Err: ErrResourceExhausted, Code: codes.ResourceExhausted, Reason: "RESOURCE_EXHAUSTED"},
		{Err: ErrAborted, Code: codes.Aborted, Reason: "ABORTED"},
		{Err: ErrUnimplemented, Code: codes.Unimplemented, Reason: "UNIMPLEMENTED"},
	},
	ByCode: func(c codes.Code) error {
		switch c {
		case codes.NotFound:
			return ErrNotFound
		case codes.InvalidArgument:
			return ErrInvalidArgument
		case codes.FailedPrecondition:
			return ErrFailedPrecondition
		case codes.AlreadyExists:
			return ErrAlreadyExists
		case codes.OutOfRange:
			return ErrOutOfRange
		case codes.ResourceExhausted:
			return ErrResourceExhausted
		case codes.Aborted:
			return ErrAborted
		}
		return nil
	},
}

// toStatus converts an implementation's error into a status for the wire.
func toStatus(err error) error { return errorCodec.ToStatus(err) }

// fromStatus converts a call's error back into one that unwraps to its kind.
func fromStatus(err error) error { return errorCodec.FromStatus(err) }

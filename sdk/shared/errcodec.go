package shared

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorKind ties one of a plugin kind's sentinel errors to the gRPC code
// and ErrorInfo reason it travels as.
type ErrorKind struct {
	Err    error
	Code   codes.Code
	Reason string
}

// ErrorCodec carries a plugin kind's sentinel errors across the plugin
// boundary: the plugin side turns an error wrapping a sentinel into a
// status with the kind's code and an ErrorInfo detail (Domain, Reason);
// the host side turns that status back into an error that unwraps to the
// sentinel, so errors.Is works on both sides.
type ErrorCodec struct {
	// Domain names the plugin kind's errors in the ErrorInfo detail.
	Domain string
	Kinds  []ErrorKind
	// ByCode maps a status without the detail (a plugin built without
	// this SDK) to a sentinel by its code alone, or nil to leave it a
	// plain status error. Canceled and DeadlineExceeded map to the
	// context errors before it is asked.
	ByCode func(codes.Code) error
}

// ToStatus converts an implementation's error into a gRPC status error for
// the wire. Errors that already are statuses pass through unchanged.
func (c *ErrorCodec) ToStatus(err error) error {
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
	for _, k := range c.Kinds {
		if !errors.Is(err, k.Err) {
			continue
		}
		st, derr := status.New(k.Code, err.Error()).WithDetails(&errdetails.ErrorInfo{Reason: k.Reason, Domain: c.Domain})
		if derr != nil {
			return status.Error(k.Code, err.Error())
		}
		return st.Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// FromStatus converts an error returned by a gRPC call back into an error
// that unwraps to the matching sentinel (or context error) and still
// reports its gRPC status, so status.Code keeps working too. Transport and
// unclassified failures are returned as they are: gRPC's text names the
// code (e.g. Unavailable when the plugin died).
func (c *ErrorCodec) FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	kind := c.kindOf(st)
	if kind == nil {
		return err
	}
	return &rpcError{st: st, kind: kind}
}

func (c *ErrorCodec) kindOf(st *status.Status) error {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != c.Domain {
			continue
		}
		for _, k := range c.Kinds {
			if k.Reason == info.GetReason() {
				return k.Err
			}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	}
	if c.ByCode != nil {
		return c.ByCode(st.Code())
	}
	return nil
}

// rpcError is a plugin's error that crossed the plugin boundary.
type rpcError struct {
	st   *status.Status
	kind error
}

func (e *rpcError) Error() string { return e.st.Message() }

func (e *rpcError) Unwrap() error { return e.kind }

// GRPCStatus lets status.FromError and status.Code see the original status.
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

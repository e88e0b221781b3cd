package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-org/drover/core/structs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Keys of the structpb.Struct that a handler error carries in its status
// details. The detail is what tells a handler's error apart from a transport
// failure that happens to share its gRPC code (Unavailable above all), so
// every handler error carries one, kinded or not.
const (
	detailKind       = "drover_error_kind"
	detailValidation = "drover_validation_errors"
)

// kindCodes maps a structs kind name to the gRPC code a handler error of that
// kind is sent with. The code is for humans and generic gRPC tooling; the
// caller rebuilds the kind from the detail, never from the code.
var kindCodes = map[string]codes.Code{
	"not_found":         codes.NotFound,
	"permission_denied": codes.PermissionDenied,
	"no_leader":         codes.Unavailable,
	"invalid":           codes.InvalidArgument,
	"conflict":          codes.FailedPrecondition,
	"unavailable":       codes.Unavailable,
	"too_large":         codes.ResourceExhausted,
}

// toStatus turns a handler's error into the status sent on the wire: the
// mapped code, the original message and a detail with the kind name (and the
// rule list of a ValidationError).
//
// A handler that gave up because its context ended (the caller's deadline or
// cancel, carried to the server) is sent as the bare gRPC code, without a
// detail, so that the caller sees its own context's error rather than a
// handler error that merely reads the same.
func toStatus(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return encodeStatus(err, codeOf(err))
}

func codeOf(err error) codes.Code {
	if c, ok := kindCodes[structs.KindName(err)]; ok {
		return c
	}
	return codes.Unknown
}

func encodeStatus(err error, code codes.Code) error {
	fields := map[string]any{detailKind: structs.KindName(err)}
	var ve *structs.ValidationError
	if errors.As(err, &ve) {
		list := make([]any, len(ve.Errors))
		for i, e := range ve.Errors {
			list[i] = e
		}
		fields[detailValidation] = list
	}
	st := status.New(code, err.Error())
	detail, derr := structpb.NewStruct(fields)
	if derr != nil {
		// Only invalid UTF-8 in a rule text gets here; the message still
		// carries the whole text.
		delete(fields, detailValidation)
		detail, _ = structpb.NewStruct(fields)
	}
	if withDetail, werr := st.WithDetails(detail); werr == nil {
		st = withDetail
	}
	return st.Err()
}

// remoteError keeps a handler's exact message when the rebuilt cause (a
// ValidationError) would print differently, e.g. because the handler wrapped
// it with context.
type remoteError struct {
	msg   string
	cause error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.cause }

// fromStatus turns the error of a gRPC invocation back into a drover error.
// A handler's error comes back with its kind and message; a failure to reach
// or talk to the peer becomes ErrUnavailable, unless the caller's own context
// ended, in which case the context's error is what the caller gets.
func fromStatus(ctx context.Context, addr, method string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return structs.NewError(structs.ErrUnavailable, "rpc %s to %s: %v", method, addr, err)
	}
	if rebuilt, ok := fromDetails(st); ok {
		return rebuilt
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded:
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("rpc %s to %s: %w", method, addr, ctxErr)
		}
		// The peer enforces the deadline we sent it, and on a loaded
		// machine its timer can fire (and reset the stream) before ours
		// has marked ctx done: past our deadline, the deadline is why.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			return fmt.Errorf("rpc %s to %s: %w", method, addr, context.DeadlineExceeded)
		}
		return structs.NewError(structs.ErrUnavailable, "rpc %s to %s: %s", method, addr, st.Message())
	case codes.Unavailable:
		return structs.NewError(structs.ErrUnavailable, "rpc %s to %s: %s", method, addr, st.Message())
	case codes.ResourceExhausted:
		// gRPC refused a message over a size limit, on either side.
		return structs.NewError(structs.ErrTooLarge, "rpc %s to %s: %s (a server accepts requests up to %d bytes)",
			method, addr, st.Message(), structs.MaxRPCRequestBytes)
	}
	// The peer answered but not through a handler: an unknown method, a
	// message over the size limit, a codec failure. Retrying elsewhere will
	// not help, so these stay unkinded.
	return fmt.Errorf("rpc %s to %s: %s: %s", method, addr, st.Code(), st.Message())
}

// fromDetails rebuilds a handler's error from the status detail, if the
// status has one.
func fromDetails(st *status.Status) (error, bool) {
	for _, d := range st.Details() {
		s, ok := d.(*structpb.Struct)
		if !ok {
			continue
		}
		kindVal, ok := s.GetFields()[detailKind]
		if !ok {
			continue
		}
		kind := kindVal.GetStringValue()
		if listVal, ok := s.GetFields()[detailValidation]; ok {
			values := listVal.GetListValue().GetValues()
			ve := &structs.ValidationError{Errors: make([]string, len(values))}
			for i, v := range values {
				ve.Errors[i] = v.GetStringValue()
			}
			if ve.Error() == st.Message() {
				return ve, true
			}
			return &remoteError{msg: st.Message(), cause: ve}, true
		}
		return structs.FromKind(kind, st.Message()), true
	}
	return nil, false
}

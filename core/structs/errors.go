package structs

import (
	"errors"
	"fmt"
	"net/http"
)

// Error kinds a caller acts on. They survive RPC and leader forwarding as
// kinds (see Kind / FromKind), never as matched message strings.
var (
	ErrNotFound         = errors.New("not found")
	ErrPermissionDenied = errors.New("Permission denied")
	ErrNoLeader         = errors.New("No cluster leader")
	ErrInvalid          = errors.New("invalid request")
	ErrConflict         = errors.New("conflict")
	ErrUnavailable      = errors.New("unavailable")
	// ErrTooLarge: the input is over a size limit (HTTP 413).
	ErrTooLarge = errors.New("too large")
)

// KindError attaches a kind to a message: errors.Is(err, kind) holds and
// Error() is the message alone.
type KindError struct {
	Kind error
	Msg  string
}

func (e *KindError) Error() string { return e.Msg }

// Unwrap exposes the kind.
func (e *KindError) Unwrap() error { return e.Kind }

// NewError builds a kinded error with a formatted message.
func NewError(kind error, format string, args ...any) error {
	return &KindError{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Kinds by wire name, for crossing RPC.
var kindNames = map[string]error{
	"not_found":         ErrNotFound,
	"permission_denied": ErrPermissionDenied,
	"no_leader":         ErrNoLeader,
	"invalid":           ErrInvalid,
	"conflict":          ErrConflict,
	"unavailable":       ErrUnavailable,
	"too_large":         ErrTooLarge,
}

// KindName returns the wire name of err's kind, or "" for an unkinded error.
func KindName(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return "invalid"
	}
	for name, k := range kindNames {
		if errors.Is(err, k) {
			return name
		}
	}
	return ""
}

// FromKind rebuilds a kinded error from its wire name and message.
func FromKind(name, msg string) error {
	if k, ok := kindNames[name]; ok {
		return &KindError{Kind: k, Msg: msg}
	}
	return errors.New(msg)
}

// HTTPStatus maps an error's kind to an HTTP status code.
func HTTPStatus(err error) int {
	var ve *ValidationError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &ve), errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrPermissionDenied):
		return http.StatusForbidden
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

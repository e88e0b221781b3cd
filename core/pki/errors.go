package pki

import (
	"errors"
	"fmt"

	"github.com/drover-org/drover/core/structs"
)

// Reasons a caller may act on. Every error of this package that refuses a
// peer or an input wraps one of them and also a structs kind
// (ErrPermissionDenied, ErrInvalid, or ErrUnavailable for a
// failure that trying again cures), so an RPC layer maps it to the right
// status without knowing this package.
var (
	// ErrMalformedToken: a join token is not in the DRJT-1 format.
	ErrMalformedToken = errors.New("malformed join token")
	// ErrJoinRefused: a join request does not prove the token or asks for
	// something the token does not grant.
	ErrJoinRefused = errors.New("join refused")
	// ErrChallenge: a join challenge is unknown, already used or expired.
	ErrChallenge = errors.New("invalid join challenge")
	// ErrUntrusted: a certificate does not chain to the cluster CA, is
	// outside its validity, or names no identity of the cluster.
	ErrUntrusted = errors.New("untrusted certificate")
	// ErrPinMismatch: the server of a join does not prove the CA whose
	// fingerprint the join token carries.
	ErrPinMismatch = errors.New("server does not match the join token's CA")
	// ErrNotAllowed: an authenticated peer's role does not allow an action.
	ErrNotAllowed = errors.New("role not allowed")
)

// pkiError carries a structs kind, a reason of this package and a message.
type pkiError struct {
	kind, reason error
	msg          string
}

func (e *pkiError) Error() string   { return e.msg }
func (e *pkiError) Unwrap() []error { return []error{e.kind, e.reason} }

func denied(reason error, format string, args ...any) error {
	return &pkiError{kind: structs.ErrPermissionDenied, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// retry is a failure the caller cures by trying again (a new challenge).
func retry(reason error, format string, args ...any) error {
	return &pkiError{kind: structs.ErrUnavailable, reason: reason, msg: fmt.Sprintf(format, args...)}
}

func invalid(reason error, format string, args ...any) error {
	return &pkiError{kind: structs.ErrInvalid, reason: reason, msg: fmt.Sprintf(format, args...)}
}

package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/core/structs"
)

// ErrPluginUnavailable means the plugin process is not there to answer: it
// is down (restarting) or died during the call. The request may be retried
// later unchanged; a worker hands its eval back. It is of the kind
// structs.ErrUnavailable, so callers outside the host, and clients across
// RPC, need to know only that one kind.
var ErrPluginUnavailable = structs.NewError(structs.ErrUnavailable, "plugin unavailable")

// ErrUnknownPlugin means no configured plugin has the name, or it does not
// serve the kind asked for.
var ErrUnknownPlugin = errors.New("unknown plugin")

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("plugin host closed")

// UnknownJobTypeError refuses a job whose type no scheduler plugin serves.
// Its message is shown to the user at submit time.
type UnknownJobTypeError struct {
	Type   string
	Served []string // sorted
}

func (e *UnknownJobTypeError) Error() string {
	return fmt.Sprintf("job type %q is not served by any scheduler plugin (served: %s)",
		e.Type, strings.Join(e.Served, ", "))
}

// unavailable wraps err, from a call to plugin name, with
// ErrPluginUnavailable.
func unavailable(name string, err error) error {
	return fmt.Errorf("%w: plugin %q: %w", ErrPluginUnavailable, name, err)
}

// classify turns the error of a call into what the caller acts on. A call
// failed because the plugin died when gRPC reports Unavailable (the
// connection is gone) or Canceled although the caller did not cancel (the
// plugin's connection was torn down), or when the instance is known to be
// down (exited or broken). Everything else, the plugin's own refusals
// included, passes through unchanged.
func classify(ctx context.Context, name string, down bool, err error) error {
	if err == nil || errors.Is(err, ErrPluginUnavailable) {
		return err
	}
	if ctx.Err() != nil {
		return err // the caller gave up; the plugin is not to blame
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled:
		return unavailable(name, err)
	}
	if down {
		return unavailable(name, err)
	}
	return err
}

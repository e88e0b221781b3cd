// Package bridge is drover's CSI bridge: the csi-bridge plugin that runs
// next to each client agent and speaks the CSI gRPC spec (v1.13) to CSI
// driver unix sockets on the client's behalf.
//
// It is stateless. Every request names the driver's socket; mount state
// lives in the kernel and claim state in Raft, so the agent may restart or
// replace the bridge at any moment. The only thing it keeps is a cache of
// connections (conns.go), which it may drop at will.
//
// The bridge never retries: a driver error is mapped onto the kinds of
// sdk/csibridge and returned, and the caller (the client's CSI hooks, the
// server's volume watcher) decides when to try again.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/csibridge"
)

const (
	// Name is the plugin's name in the agent's catalog.
	Name = "csi-bridge"
	// Version is this bridge's version.
	Version = "0.1.0"

	// DefaultCallTimeout bounds a driver call whose context has no
	// deadline.
	DefaultCallTimeout = 30 * time.Second
	// DefaultIdleTimeout is how long an unused driver connection is kept.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultMaxConns bounds the cached driver connections.
	DefaultMaxConns = 64

	// maxDriverMessage bounds how much of a driver's error message the
	// bridge passes on.
	maxDriverMessage = 1024
)

// Options tune a Bridge; zero values take the defaults.
type Options struct {
	CallTimeout time.Duration
	IdleTimeout time.Duration
	MaxConns    int
}

// Bridge implements csibridge.Bridge against CSI drivers. The zero value is
// not usable; call New. It is safe for concurrent use.
type Bridge struct {
	logger      hclog.Logger
	callTimeout time.Duration
	conns       *conns
}

var _ csibridge.Bridge = (*Bridge)(nil)

// New returns a bridge. A nil logger discards logs.
func New(logger hclog.Logger, opts Options) *Bridge {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	return &Bridge{
		logger:      logger,
		callTimeout: opts.CallTimeout,
		conns:       newConns(opts.IdleTimeout, opts.MaxConns),
	}
}

// Close closes the cached driver connections; later calls fail.
func (b *Bridge) Close() {
	b.conns.close()
}

// Serve runs this process as the csi-bridge plugin until the agent closes
// the connection.
func Serve() {
	logger := csibridge.NewLogger("")
	b := New(logger, Options{})
	defer b.Close()
	csibridge.ServeWithLogger(b, logger)
}

// clients are the CSI service clients of one driver connection.
type clients struct {
	identity   csi.IdentityClient
	controller csi.ControllerClient
	node       csi.NodeClient
}

// call runs fn, one CSI RPC (or, for a fingerprint, a few), against the
// driver at socket with a deadline, maps its error and logs one line. The
// log line names the RPC, socket and volume, never secrets or contexts.
func (b *Bridge) call(ctx context.Context, rpc, socket, volume string, fn func(context.Context, clients) error) error {
	start := time.Now()
	err := b.callConn(ctx, rpc, socket, fn)
	if err != nil {
		b.logger.Debug("csi call", "rpc", rpc, "socket", socket, "volume", volume,
			"duration", time.Since(start), "error_kind", kindName(err))
	} else {
		b.logger.Debug("csi call", "rpc", rpc, "socket", socket, "volume", volume,
			"duration", time.Since(start))
	}
	return err
}

func (b *Bridge) callConn(ctx context.Context, rpc, socket string, fn func(context.Context, clients) error) error {
	if socket == "" || !filepath.IsAbs(socket) {
		return fmt.Errorf("%w: socket must be an absolute path, got %q", csibridge.ErrInvalidArgument, socket)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.callTimeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("csi %s at %s: %w", rpc, socket, err)
	}
	cn, err := b.conns.get(socket)
	if err != nil {
		return err
	}
	err = fn(ctx, clients{
		identity:   csi.NewIdentityClient(cn.cc),
		controller: csi.NewControllerClient(cn.cc),
		node:       csi.NewNodeClient(cn.cc),
	})
	err = driverError(rpc, socket, err)
	b.conns.put(cn, errors.Is(err, csibridge.ErrUnavailable))
	return err
}

// codeKinds maps the CSI status codes a driver returns onto the bridge's
// error kinds.
var codeKinds = map[codes.Code]error{
	codes.NotFound:           csibridge.ErrNotFound,
	codes.InvalidArgument:    csibridge.ErrInvalidArgument,
	codes.FailedPrecondition: csibridge.ErrFailedPrecondition,
	codes.AlreadyExists:      csibridge.ErrAlreadyExists,
	codes.Unavailable:        csibridge.ErrUnavailable,
	codes.OutOfRange:         csibridge.ErrOutOfRange,
	codes.ResourceExhausted:  csibridge.ErrResourceExhausted,
	codes.Aborted:            csibridge.ErrAborted,
	codes.Unimplemented:      csibridge.ErrUnimplemented,
	codes.DeadlineExceeded:   context.DeadlineExceeded,
	codes.Canceled:           context.Canceled,
}

// driverError turns the error of a CSI RPC into one of the bridge's kinds,
// naming the RPC and socket. An error that already has a kind (the
// bridge's own refusals) passes unchanged. Codes without a kind
// (Internal, Unknown, PermissionDenied...) keep the code's name.
func driverError(rpc, socket string, err error) error {
	if err == nil {
		return nil
	}
	for _, k := range csibridge.Kinds {
		if errors.Is(err, k) {
			return err
		}
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("csi %s at %s: %w", rpc, socket, err)
	}
	msg := driverMessage(st.Message())
	if kind, ok := codeKinds[st.Code()]; ok {
		return fmt.Errorf("%w: csi %s at %s: %s", kind, rpc, socket, msg)
	}
	return fmt.Errorf("csi %s at %s: %s: %s", rpc, socket, st.Code(), msg)
}

// driverMessage bounds a message of the driver's to maxDriverMessage
// bytes, cut on a rune boundary.
func driverMessage(msg string) string {
	if len(msg) <= maxDriverMessage {
		return msg
	}
	msg = msg[:maxDriverMessage]
	for len(msg) > 0 && !utf8.ValidString(msg) {
		msg = msg[:len(msg)-1]
	}
	return msg + "..."
}

// kindName names err's kind for the log.
func kindName(err error) string {
	for _, k := range csibridge.Kinds {
		if errors.Is(err, k) {
			return k.Error()
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "other"
}

// invalidDriverReply reports a driver reply that breaks the CSI spec.
func invalidDriverReply(what string) error {
	return errors.New("the driver's reply breaks the CSI spec: " + what)
}

// invalid reports a request the bridge refuses before calling the driver.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{csibridge.ErrInvalidArgument}, args...)...)
}

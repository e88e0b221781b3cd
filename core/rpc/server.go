package rpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"

	"github.com/drover-org/drover/core/structs"
)

// ServiceName is the one gRPC service every drover endpoint is registered
// under; "Job.Register" is served at "/drover.rpc.v1.Agent/Job.Register".
const ServiceName = "drover.rpc.v1.Agent"

// MaxMessageBytes bounds one RPC message in either direction, as for plugins
// (sdk/shared): a plan for a system job on 10,000+ nodes is far past gRPC's
// 4 MiB default.
const MaxMessageBytes = 512 << 20

// Keepalive timings. Blocking queries hold an RPC open for up to five
// minutes with no traffic, so a dead peer (power loss, partition) is only
// noticed through pings; deadlines are never imposed by this layer. A
// client pings after 30 s without traffic and gives the server 20 s to
// answer: a leader busy with a large plan and thousands of blocking
// queries answering at once may take seconds to answer a ping, and a
// connection closed for that makes its node handshake again, adding to
// the load (a dead server is still noticed within 50 s, well inside a
// heartbeat TTL plus grace). 10,000 nodes ping 333 times a second in all
// at these timings, not 1,000 (the servers ping idle clients only every
// minute).
const (
	clientKeepaliveTime    = 30 * time.Second
	clientKeepaliveTimeout = 20 * time.Second
	serverKeepaliveTime    = time.Minute
	serverKeepaliveTimeout = 20 * time.Second
	// Below the client's ping interval, so the server never closes a
	// healthy client's connection with "too_many_pings".
	serverMinPingInterval = 5 * time.Second
)

// Server serves the registered handlers. Register every handler with Handle
// before the first Serve: gRPC freezes its service table once it serves.
type Server struct {
	logger hclog.Logger
	grpc   *grpc.Server

	// authz, when set, decides every call before its handler runs.
	authz atomic.Pointer[Authorizer]
	// preauthz, when set, decides every call from its method and peer
	// alone, before its message is read.
	preauthz atomic.Pointer[PreAuthorizer]

	mu      sync.Mutex
	methods []grpc.MethodDesc
	names   map[string]bool
	serving bool
	// public serves callers without a certificate (ServePublic).
	public  *grpc.Server
	stopped bool
}

// NewServer returns a server. tlsCfg is the server side of mutual TLS (see
// TLSConfig), or nil for plaintext. Connections that a TLS Mux already
// terminated are served as they are; tlsCfg is only used to terminate TLS on
// connections from a listener without a Mux in front.
func NewServer(tlsCfg *tls.Config, logger hclog.Logger) *Server {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Server{
		logger: logger.Named("rpc"),
		names:  make(map[string]bool),
	}
	opts := []grpc.ServerOption{
		grpc.Creds(newServerCreds(tlsCfg)),
		grpc.InTapHandle(s.tap),
		// Requests are inputs at the edge (forwarded HTTP writes, client
		// updates) and are capped like them; answers (a node's allocs)
		// may be larger.
		grpc.MaxRecvMsgSize(structs.MaxRPCRequestBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    serverKeepaliveTime,
			Timeout: serverKeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             serverMinPingInterval,
			PermitWithoutStream: true,
		}),
	}
	s.grpc = grpc.NewServer(opts...)
	return s
}

// PreAuthorizer decides whether the caller (PeerTLS(ctx)) may call method
// at all, from the call's headers: it runs before the request is read, so
// a caller refused here cannot make the server receive or decode a large
// message. An error, which should wrap structs.ErrPermissionDenied, is the
// call's answer. Decisions that need the request belong to the Authorizer.
type PreAuthorizer func(ctx context.Context, method string) error

// SetPreAuthorizer makes fn decide every call from now on, before its
// message is read (nil: none).
func (s *Server) SetPreAuthorizer(fn PreAuthorizer) {
	if fn == nil {
		s.preauthz.Store(nil)
		return
	}
	s.preauthz.Store(&fn)
}

// tap runs the PreAuthorizer on a call's headers.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	pa := s.preauthz.Load()
	if pa == nil {
		return ctx, nil
	}
	method, ok := strings.CutPrefix(info.FullMethodName, "/"+ServiceName+"/")
	if !ok {
		return ctx, nil // not ours: gRPC answers Unimplemented
	}
	if err := (*pa)(ctx, method); err != nil {
		return nil, toStatus(err)
	}
	return ctx, nil
}

// Authorizer decides whether the caller of method may make the call req
// (the decoded request, *Req of the handler). It runs before the handler;
// an error, which should wrap structs.ErrPermissionDenied, is the call's
// answer. PeerTLS gives the caller's TLS state.
type Authorizer func(ctx context.Context, method string, req any) error

// SetAuthorizer makes fn decide every call from now on (nil: every call is
// allowed, as without one). Set it before Serve.
func (s *Server) SetAuthorizer(fn Authorizer) {
	if fn == nil {
		s.authz.Store(nil)
		return
	}
	s.authz.Store(&fn)
}

// PeerTLS is the TLS state of the connection a call came in on, or nil for
// a plaintext connection.
func PeerTLS(ctx context.Context) *tls.ConnectionState {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		st := ti.State
		return &st
	}
	return nil
}

// Handle exposes fn as the unary method named method (e.g. "Job.Register").
// The error fn returns reaches the caller with its structs kind and message
// (see Call). Handle panics when called after Serve, for a duplicate method
// or for a malformed name: all are wiring bugs caught at startup.
func Handle[Req, Resp any](s *Server, method string, fn func(ctx context.Context, req *Req) (*Resp, error)) {
	if method == "" || strings.ContainsAny(method, "/ ") {
		panic(fmt.Sprintf("rpc: invalid method name %q", method))
	}
	full := "/" + ServiceName + "/" + method
	logger := s.logger.With("method", method)
	desc := grpc.MethodDesc{
		MethodName: method,
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			var raw rawRequest
			if err := dec(&raw); err != nil {
				return nil, err
			}
			req := new(Req)
			if err := unmarshal(raw.data, req); err != nil {
				// A kinded error, so that a forwarded HTTP write
				// answers 400 rather than 500.
				return nil, encodeStatus(structs.NewError(structs.ErrInvalid, "decode %s request: %v", method, err), codes.InvalidArgument)
			}
			if az := s.authz.Load(); az != nil {
				if err := (*az)(ctx, method, req); err != nil {
					return nil, toStatus(err)
				}
			}
			call := func(ctx context.Context, r any) (any, error) {
				return invoke(ctx, logger, fn, r.(*Req))
			}
			if icpt == nil {
				return call(ctx, req)
			}
			return icpt(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, call)
		},
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		panic(fmt.Sprintf("rpc: Handle(%q) after Serve: register every handler before the server starts", method))
	}
	if s.names[method] {
		panic(fmt.Sprintf("rpc: duplicate handler for %q", method))
	}
	s.names[method] = true
	s.methods = append(s.methods, desc)
}

// invoke runs one handler. A panic is logged and returned as an internal
// error: one buggy endpoint must not take the agent, and Raft with it, down.
func invoke[Req, Resp any](ctx context.Context, logger hclog.Logger, fn func(context.Context, *Req) (*Resp, error), req *Req) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			logger.Error("handler panicked", "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, encodeStatus(fmt.Errorf("internal error: handler panicked: %v", p), codes.Internal)
		}
	}()
	out, err := fn(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	if out == nil {
		out = new(Resp)
	}
	return out, nil
}

// Serve accepts connections on ln until Stop. It may be called for several
// listeners; the first call freezes the set of handlers.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.freezeLocked()
	s.mu.Unlock()
	s.logger.Debug("serving", "addr", ln.Addr().String())
	return s.grpc.Serve(ln)
}

// freezeLocked registers the handlers on the main server, once. s.mu is
// held.
func (s *Server) freezeLocked() {
	if s.serving {
		return
	}
	s.serving = true
	s.grpc.RegisterService(&grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*any)(nil),
		Methods:     s.methods,
		Metadata:    "drover/core/rpc",
	}, nil)
}

// Stop closes the listeners and every connection at once, the public
// server's too; in-flight calls see their context canceled. There is no
// graceful variant on purpose: a graceful stop would wait out every
// five-minute blocking query.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	pub := s.public
	s.mu.Unlock()
	if pub != nil {
		pub.Stop()
	}
	s.grpc.Stop()
}

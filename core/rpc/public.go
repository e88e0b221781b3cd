package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
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

// The public side of an RPC port: callers that presented no certificate
// (a joining agent, or anyone who can reach the port) reach a gRPC server
// of their own that serves only the methods named for it (the join
// exchange) under tight limits, decided before a message is read:
//
//   - a method not served publicly is refused from its headers alone
//     (PermissionDenied), so its body is never read;
//   - a message is at most PublicLimits.MaxRecvMsgSize, and the HTTP/2
//     windows are fixed and small, so a caller cannot push more than a
//     window before gRPC refuses an oversized message from its length
//     prefix;
//   - calls are rate limited per source host, connections are capped per
//     host and in all, live at most MaxConnAge, and carry few streams.
//
// Authenticated peers never share these limits: the Mux hands their
// connections to the main server (see WithPublicSplit).

// PublicLimits bound what callers without a certificate may do. A zero
// field takes its default.
type PublicLimits struct {
	// MaxRecvMsgSize bounds one request (default 16 KiB: a join request
	// is about 1 KiB).
	MaxRecvMsgSize int
	// MaxConns bounds the public connections open at once, from all
	// sources (default 128); MaxConnsPerHost those from one source host
	// (default 8). A connection over either is closed at once.
	MaxConns, MaxConnsPerHost int
	// CallsPerSecond and CallBurst are the per-host token bucket of calls
	// (default 10 a second, bursts of 20). A call over it fails with
	// ErrUnavailable ("retry later") before its message is read.
	CallsPerSecond float64
	CallBurst      int
	// MaxConnAge closes a public connection after this long (default 30
	// s); idle ones close after a third of it.
	MaxConnAge time.Duration
}

// Public limit defaults.
const (
	DefaultPublicMaxRecvMsgSize  = 16 << 10
	DefaultPublicMaxConns        = 128
	DefaultPublicMaxConnsPerHost = 8
	DefaultPublicCallsPerSecond  = 10
	DefaultPublicCallBurst       = 20
	DefaultPublicMaxConnAge      = 30 * time.Second
	// publicWindow is the fixed HTTP/2 window (stream and connection) of
	// public connections: gRPC's minimum, and a fixed window turns off the
	// dynamic growth that would let a caller push megabytes.
	publicWindow = 64 << 10
	// publicMaxStreams is the concurrent calls one public connection may
	// have: a join makes one at a time.
	publicMaxStreams = 2
	// publicMaxHeaderBytes bounds a public call's headers.
	publicMaxHeaderBytes = 8 << 10
	// maxRateHosts bounds the per-host rate table; past it, hosts whose
	// bucket is full again are forgotten, and if none is, new hosts are
	// refused until one is.
	maxRateHosts = 4096
)

func (l PublicLimits) withDefaults() PublicLimits {
	if l.MaxRecvMsgSize <= 0 {
		l.MaxRecvMsgSize = DefaultPublicMaxRecvMsgSize
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultPublicMaxConns
	}
	if l.MaxConnsPerHost <= 0 {
		l.MaxConnsPerHost = DefaultPublicMaxConnsPerHost
	}
	if l.CallsPerSecond <= 0 {
		l.CallsPerSecond = DefaultPublicCallsPerSecond
	}
	if l.CallBurst <= 0 {
		l.CallBurst = DefaultPublicCallBurst
	}
	if l.MaxConnAge <= 0 {
		l.MaxConnAge = DefaultPublicMaxConnAge
	}
	return l
}

// ServePublic serves methods (registered with Handle) to the connections of
// ln, which are those of callers without a certificate (Mux.PublicListener),
// under lim. It returns when Stop is called or ln fails. Call it at most
// once; like Serve, it freezes the set of handlers.
func (s *Server) ServePublic(ln net.Listener, methods []string, lim PublicLimits) error {
	lim = lim.withDefaults()
	allowed := make(map[string]bool, len(methods))
	for _, m := range methods {
		allowed["/"+ServiceName+"/"+m] = true
	}
	rate := newHostRate(lim.CallsPerSecond, lim.CallBurst)
	logger := s.logger.Named("public")
	tapFn := func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if !allowed[info.FullMethodName] {
			return nil, encodeStatus(structs.NewError(structs.ErrPermissionDenied,
				"Permission denied: the caller presented no certificate; only the join exchange is served without one"), codes.PermissionDenied)
		}
		host := PeerHost(ctx)
		if !rate.allow(host, time.Now()) {
			logger.Debug("public call over the rate limit", "remote_host", host, "method", info.FullMethodName)
			return nil, encodeStatus(structs.NewError(structs.ErrUnavailable,
				"rate limited: more than %g calls a second without a certificate from %s; retry later", lim.CallsPerSecond, host), codes.ResourceExhausted)
		}
		return ctx, nil
	}
	opts := []grpc.ServerOption{
		grpc.Creds(publicCreds{}),
		grpc.InTapHandle(tapFn),
		grpc.MaxRecvMsgSize(lim.MaxRecvMsgSize),
		grpc.MaxSendMsgSize(1 << 20),
		grpc.InitialWindowSize(publicWindow),
		grpc.InitialConnWindowSize(publicWindow),
		grpc.MaxConcurrentStreams(publicMaxStreams),
		grpc.MaxHeaderListSize(publicMaxHeaderBytes),
		grpc.ConnectionTimeout(HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     max(lim.MaxConnAge/3, time.Second),
			MaxConnectionAge:      lim.MaxConnAge,
			MaxConnectionAgeGrace: 5 * time.Second,
			Time:                  serverKeepaliveTime,
			Timeout:               serverKeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             serverMinPingInterval,
			PermitWithoutStream: true,
		}),
	}
	gs := grpc.NewServer(opts...)

	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return grpc.ErrServerStopped
	}
	if s.public != nil {
		s.mu.Unlock()
		return errors.New("rpc: ServePublic called twice")
	}
	s.freezeLocked()
	var descs []grpc.MethodDesc
	for _, d := range s.methods {
		if allowed["/"+ServiceName+"/"+d.MethodName] {
			descs = append(descs, d)
		}
	}
	gs.RegisterService(&grpc.ServiceDesc{ServiceName: ServiceName, HandlerType: (*any)(nil), Methods: descs, Metadata: "drover/core/rpc"}, nil)
	s.public = gs
	s.mu.Unlock()

	logger.Debug("serving callers without a certificate", "addr", ln.Addr().String(), "methods", methods)
	return gs.Serve(newCapListener(ln, lim.MaxConns, lim.MaxConnsPerHost, logger))
}

// PeerHost is the host (IP) of the caller of ctx's call, or "" if unknown.
func PeerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	return hostOf(p.Addr)
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

// publicCreds accept only connections whose TLS a Mux terminated: the
// public server never speaks plaintext and never does TLS itself.
type publicCreds struct{}

func (publicCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if st := tlsStateOf(conn); st != nil {
		return conn, credentials.TLSInfo{
			State:          *st,
			CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
		}, nil
	}
	return nil, nil, errors.New("rpc: the public server takes only connections a TLS mux terminated")
}

func (publicCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("rpc: server credentials cannot dial")
}

func (publicCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (c publicCreds) Clone() credentials.TransportCredentials { return c }

func (publicCreds) OverrideServerName(string) error { return nil }

// tlsStated is a connection whose TLS was terminated before gRPC saw it.
type tlsStated interface {
	connTLSState() *tls.ConnectionState
}

func tlsStateOf(c net.Conn) *tls.ConnectionState {
	if ts, ok := c.(tlsStated); ok {
		return ts.connTLSState()
	}
	return nil
}

// capListener bounds the connections open at once, in all and per source
// host; one over a bound is closed as soon as it is accepted.
type capListener struct {
	net.Listener
	max, perHost int
	logger       hclog.Logger

	mu     sync.Mutex
	total  int
	byHost map[string]int
}

func newCapListener(ln net.Listener, maxConns, perHost int, logger hclog.Logger) *capListener {
	return &capListener{Listener: ln, max: maxConns, perHost: perHost, logger: logger, byHost: make(map[string]int)}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := hostOf(c.RemoteAddr())
		l.mu.Lock()
		ok := l.total < l.max && l.byHost[host] < l.perHost
		if ok {
			l.total++
			l.byHost[host]++
		}
		total, mine := l.total, l.byHost[host]
		l.mu.Unlock()
		if !ok {
			l.logger.Debug("public connection over the limit closed", "remote_host", host, "open", total, "open_from_host", mine)
			_ = c.Close()
			continue
		}
		return &cappedConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

func (l *capListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byHost[host]--; l.byHost[host] <= 0 {
		delete(l.byHost, host)
	}
}

type cappedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func (c *cappedConn) connTLSState() *tls.ConnectionState { return tlsStateOf(c.Conn) }

// hostRate is a token bucket per source host.
type hostRate struct {
	rate  float64
	burst float64

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newHostRate(perSecond float64, burst int) *hostRate {
	return &hostRate{rate: perSecond, burst: float64(burst), buckets: make(map[string]*bucket)}
}

func (r *hostRate) allow(host string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[host]
	if b == nil {
		if len(r.buckets) >= maxRateHosts {
			for h, o := range r.buckets {
				if o.tokens+now.Sub(o.last).Seconds()*r.rate >= r.burst {
					delete(r.buckets, h)
				}
			}
			if len(r.buckets) >= maxRateHosts {
				return false
			}
		}
		b = &bucket{tokens: r.burst, last: now}
		r.buckets[host] = b
	}
	b.tokens = min(r.burst, b.tokens+now.Sub(b.last).Seconds()*r.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

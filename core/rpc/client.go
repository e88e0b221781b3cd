package rpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/drover-org/drover/core/structs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// The reconnect backoff of a connection that failed: gRPC's (1 s, times
// 1.6 per failure), capped at reconnectMaxDelay (120 s by default: a
// restarted server must be reachable again within seconds, not minutes)
// and jittered by ±reconnectJitter (gRPC's 0.2), so that thousands of
// clients that lost their server at once (a leader change, a restart)
// spread their reconnects over several seconds rather than handshaking in
// step, and a server whose handshake slots are full (Mux,
// WithHandshakeLimit) is not retried at once.
const (
	reconnectMaxDelay = 15 * time.Second
	reconnectJitter   = 0.5
)

// NoLeaderPatience is how long a client stays with a server that answers
// "no leader" (structs.ErrNoLeader) before it moves to the next one.
// During an election every server answers so, and a server forwards a
// client's call to the leader once there is one: moving at once would
// only make every node of the fleet handshake with another server, all at
// the same moment, on servers busy electing. A server cut off from the
// others for longer is left. (A server that is unreachable or shut down
// answers ErrUnavailable, and is left at once.)
const NoLeaderPatience = 5 * time.Second

// ReconnectBackoff is the backoff every Conn reconnects with.
func ReconnectBackoff() backoff.Config {
	bo := backoff.DefaultConfig
	bo.MaxDelay = reconnectMaxDelay
	bo.Jitter = reconnectJitter
	return bo
}

// Conn is a client connection to one agent. It is safe for concurrent use
// and multiplexes every call over one HTTP/2 connection.
type Conn struct {
	addr string
	cc   *grpc.ClientConn
}

// Dial returns a connection to addr ("host:port"). It connects lazily, on
// the first Call, and reconnects by itself after a failure, so a Conn to a
// peer that is down is still a valid Conn. tlsCfg is the client side of
// mutual TLS (see TLSConfig), or nil for plaintext.
func Dial(addr string, tlsCfg *tls.Config) (*Conn, error) {
	return newConn(addr, tlsCfg)
}

// DialFrom is Dial from a fixed local (source) IP. The node simulator
// (core/nodesim) gives each simulated node its own loopback address, as
// each real node has a host of its own, so that the servers' per-host
// limits (public join rate, pending connections) see the nodes apart.
func DialFrom(addr string, localIP net.IP, tlsCfg *tls.Config) (*Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: localIP}}
	return newConn(addr, tlsCfg, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", a)
	}))
}

// newConn is Dial with extra gRPC options (tests count the bytes sent).
func newConn(addr string, tlsCfg *tls.Config, extra ...grpc.DialOption) (*Conn, error) {
	creds := insecure.NewCredentials()
	if tlsCfg != nil {
		creds = credentials.NewTLS(tlsCfg)
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: ReconnectBackoff()}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                clientKeepaliveTime,
			Timeout:             clientKeepaliveTimeout,
			PermitWithoutStream: true,
		}),
		grpc.WithDefaultCallOptions(
			grpc.CallContentSubtype(CodecName),
			grpc.MaxCallRecvMsgSize(MaxMessageBytes),
			grpc.MaxCallSendMsgSize(MaxMessageBytes),
		),
	}, extra...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("rpc dial %s: %w", addr, err)
	}
	return &Conn{addr: addr, cc: cc}, nil
}

// Addr is the address the connection was dialed with.
func (c *Conn) Addr() string { return c.addr }

// Close closes the connection; calls in flight fail with ErrUnavailable.
func (c *Conn) Close() error { return c.cc.Close() }

// Call invokes method on the peer and waits for its answer, for as long as
// ctx allows: blocking queries pass a context without deadline or with their
// own.
//
// A handler's error comes back with its kind (errors.Is(err,
// structs.ErrNotFound) holds) and its exact message; a
// *structs.ValidationError comes back as one, rules included. A peer that
// cannot be reached or is lost mid-call yields an error wrapping
// structs.ErrUnavailable; if ctx ended, the error wraps ctx.Err() instead.
func Call[Req, Resp any](ctx context.Context, c *Conn, method string, req *Req) (*Resp, error) {
	if req == nil {
		req = new(Req)
	}
	resp := new(Resp)
	if err := c.cc.Invoke(ctx, "/"+ServiceName+"/"+method, req, resp); err != nil {
		return nil, fromStatus(ctx, c.addr, method, err)
	}
	return resp, nil
}

// Pool shares one Conn per address among all callers, as servers and
// clients talk to the same few peers over and over.
type Pool struct {
	tlsCfg *tls.Config

	mu     sync.Mutex
	conns  map[string]*Conn
	closed bool
	// retired are connections Refresh took out of use, closed after
	// their grace period or with the pool.
	retired map[*Conn]*time.Timer
}

// NewPool returns an empty pool whose connections use tlsCfg (nil:
// plaintext).
func NewPool(tlsCfg *tls.Config) *Pool {
	return &Pool{tlsCfg: tlsCfg, conns: make(map[string]*Conn)}
}

// Get returns the pool's connection to addr, dialing it on first use. Do not
// Close the returned Conn: the pool owns it.
func (p *Pool) Get(addr string) (*Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, structs.NewError(structs.ErrUnavailable, "rpc: connection pool is closed")
	}
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := Dial(addr, p.tlsCfg)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Remove closes and forgets the connection to addr, for a peer that left
// the cluster for good.
func (p *Pool) Remove(addr string) {
	p.mu.Lock()
	c, ok := p.conns[addr]
	delete(p.conns, addr)
	p.mu.Unlock()
	if ok {
		_ = c.Close()
	}
}

// Refresh makes later Gets dial new connections (which present the TLS
// config's current certificate, after a renewal); the connections in use
// are closed after grace, so calls in flight on them, blocking queries
// included, may finish first.
func (p *Pool) Refresh(grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.retired == nil {
		p.retired = make(map[*Conn]*time.Timer)
	}
	for addr, c := range p.conns {
		delete(p.conns, addr)
		c := c
		p.retired[c] = time.AfterFunc(grace, func() {
			p.mu.Lock()
			_, ok := p.retired[c]
			delete(p.retired, c)
			p.mu.Unlock()
			if ok {
				_ = c.Close()
			}
		})
	}
}

// Close closes every connection; later Gets fail with ErrUnavailable.
func (p *Pool) Close() {
	p.mu.Lock()
	conns := p.conns
	retired := p.retired
	p.conns, p.retired = nil, nil
	p.closed = true
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	for c, t := range retired {
		t.Stop()
		_ = c.Close()
	}
}

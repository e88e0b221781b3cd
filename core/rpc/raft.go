package rpc

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// defaultRaftDialTimeout applies when Raft passes no timeout.
const defaultRaftDialTimeout = 10 * time.Second

// RaftLayer is the raft.StreamLayer of a multiplexed RPC port: it accepts
// the Raft connections a Mux routes to it and dials peers' muxes, speaking
// TLS first when configured and then the RaftTag byte that makes the remote
// mux route the connection to Raft.
//
// The layer owns every connection it hands to Raft and closes them all on
// Close: NetworkTransport's reader goroutines block in Read and only a closed
// connection releases them.
type RaftLayer struct {
	ln        net.Listener
	advertise net.Addr
	tlsCfg    *tls.Config

	mu     sync.Mutex
	conns  map[*raftConn]struct{}
	closed bool
}

var _ raft.StreamLayer = (*RaftLayer)(nil)

// HostPort is an advertise address kept as written ("s1:4647"): Raft
// stores it in its configuration and peers resolve it when they dial, so a
// hostname keeps working when the host's IP changes or differs per network.
type HostPort string

// Network implements net.Addr.
func (HostPort) Network() string { return "tcp" }

func (h HostPort) String() string { return string(h) }

// NewRaftLayer wraps ln, normally Mux.RaftListener. advertise is the
// address peers reach this server at; nil means ln.Addr(), which must then
// be a specific IP (Raft stores the address in its configuration, and
// 0.0.0.0 means nothing to a peer). tlsCfg is the client side of mutual
// TLS, or nil for plaintext.
func NewRaftLayer(ln net.Listener, advertise net.Addr, tlsCfg *tls.Config) (*RaftLayer, error) {
	if advertise == nil {
		advertise = ln.Addr()
	}
	switch a := advertise.(type) {
	case *net.TCPAddr:
		if a.IP == nil || a.IP.IsUnspecified() {
			return nil, fmt.Errorf("raft layer: advertise address %v is not a usable IP; set an advertise address", advertise)
		}
	case HostPort:
		host, port, err := net.SplitHostPort(string(a))
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("raft layer: advertise address %q is not host:port", string(a))
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("raft layer: advertise address %v is not a usable IP; set an advertise address", advertise)
		}
	default:
		return nil, fmt.Errorf("raft layer: advertise address %v is not a TCP address", advertise)
	}
	if tlsCfg != nil {
		// No ALPN: the mux's TLS config selects only "h2", and a client
		// that offered a protocol the server lacks would be refused.
		tlsCfg = tlsCfg.Clone()
		tlsCfg.NextProtos = nil
	}
	return &RaftLayer{
		ln:        ln,
		advertise: advertise,
		tlsCfg:    tlsCfg,
		conns:     make(map[*raftConn]struct{}),
	}, nil
}

// Accept waits for the next inbound Raft connection.
func (l *RaftLayer) Accept() (net.Conn, error) {
	c, err := l.ln.Accept()
	if err != nil {
		return nil, err
	}
	rc, ok := l.track(c)
	if !ok {
		_ = c.Close()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.advertise, Err: net.ErrClosed}
	}
	return rc, nil
}

// Close stops accepting and closes every Raft connection of this layer,
// inbound and outbound. The Mux, which gRPC shares, stays open.
func (l *RaftLayer) Close() error {
	err := l.ln.Close()
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = make(map[*raftConn]struct{})
	l.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
	return err
}

// Addr is the advertised address, which Raft records as this server's.
func (l *RaftLayer) Addr() net.Addr { return l.advertise }

// Dial connects to a peer's RPC port and asks its mux for Raft. With TLS,
// the handshake and the tag byte are both done within timeout.
func (l *RaftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 {
		timeout = defaultRaftDialTimeout
	}
	deadline := time.Now().Add(timeout)
	d := net.Dialer{Deadline: deadline}
	raw, err := d.Dial("tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("raft dial %s: %w", address, err)
	}
	conn, err := l.greet(raw, deadline)
	if err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("raft dial %s: %w", address, err)
	}
	rc, ok := l.track(conn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("raft dial %s: %w", address, errLayerClosed)
	}
	return rc, nil
}

var errLayerClosed = errors.New("raft layer closed")

// greet does TLS if configured and writes the tag byte.
func (l *RaftLayer) greet(raw net.Conn, deadline time.Time) (net.Conn, error) {
	if err := raw.SetDeadline(deadline); err != nil {
		return nil, err
	}
	conn := raw
	if l.tlsCfg != nil {
		tc := tls.Client(raw, l.tlsCfg)
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tc
	}
	if _, err := conn.Write([]byte{RaftTag}); err != nil {
		return nil, fmt.Errorf("write raft tag: %w", err)
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return conn, nil
}

func (l *RaftLayer) track(c net.Conn) (*raftConn, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, false
	}
	rc := &raftConn{Conn: c, layer: l}
	l.conns[rc] = struct{}{}
	return rc, true
}

// raftConn removes itself from its layer when Raft closes it.
type raftConn struct {
	net.Conn
	layer *RaftLayer
}

func (c *raftConn) Close() error {
	c.layer.mu.Lock()
	delete(c.layer.conns, c)
	c.layer.mu.Unlock()
	return c.Conn.Close()
}

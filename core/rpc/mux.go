package rpc

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// First bytes that tell the kinds of connection apart.
const (
	// RaftTag is the byte a RaftLayer writes right after connecting (inside
	// TLS when TLS is on); the mux consumes it before Raft reads.
	RaftTag byte = 'R'
	// grpcFirstByte starts the HTTP/2 client preface "PRI * HTTP/2.0",
	// which a gRPC client sends before anything else. The mux does not
	// consume it.
	grpcFirstByte byte = 'P'
	// tlsHandshakeRecord starts a TLS ClientHello.
	tlsHandshakeRecord byte = 0x16
)

// HandshakeTimeout bounds how long a new connection may take to send its
// first byte and finish TLS, so that idle or slow sockets cannot pile up.
const HandshakeTimeout = 10 * time.Second

// Mux splits the connections of one listener between gRPC and Raft, so an
// agent needs one RPC port (Nomad's 4647 carries both the same way). With a
// TLS config every connection must start with TLS; the mux terminates it and
// routes on the first byte inside, so both gRPC and Raft get mutual TLS from
// one place and a plaintext connection never reaches either.
//
// One goroutine owns the listener; each new connection is classified on a
// goroutine of its own so that a slow handshake cannot stall the others.
// Close stops all of them.
type Mux struct {
	ln       net.Listener
	tlsCfg   *tls.Config
	raftAuth func(tls.ConnectionState) error
	split    bool
	logger   hclog.Logger

	grpcL *subListener
	raftL *subListener
	pubL  *subListener

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]struct{} // accepted, not yet handed out
	byHost  map[string]int        // pending connections per source host
	closed  bool

	maxPending, maxPendingPerHost int
	handshakeTimeout              time.Duration

	// handshakes holds a token per TLS handshake in progress; a
	// connection waits at most handshakeWait for one (see
	// WithHandshakeLimit).
	handshakes    chan struct{}
	handshakeWait time.Duration
	// refused counts connections closed for want of a handshake slot.
	refused atomic.Int64
}

// Bounds on the TLS handshakes a mux runs at once. A server handshake
// costs a signature and a key exchange (about a millisecond of CPU each):
// when thousands of clients reconnect at once (a leader change, a
// restart), running them all at once makes every one slow, past its
// deadline, and the clients retry into the same storm. Bounded, the
// handshakes admitted finish fast; a connection that finds no slot within
// DefaultHandshakeWait is closed before its handshake (the client sees an
// unavailable server and retries after its jittered backoff, or another
// server).
const (
	DefaultMaxHandshakes = 32
	DefaultHandshakeWait = 2 * time.Second
)

// WithHandshakeLimit bounds the TLS handshakes in progress (zero:
// DefaultMaxHandshakes) and how long a connection waits for one to end
// before it is closed (zero: DefaultHandshakeWait).
func WithHandshakeLimit(n int, wait time.Duration) MuxOption {
	return func(m *Mux) {
		if n > 0 {
			m.handshakes = make(chan struct{}, n)
		}
		if wait > 0 {
			m.handshakeWait = wait
		}
	}
}

// RefusedHandshakes counts the connections closed because no handshake
// slot came free in time.
func (m *Mux) RefusedHandshakes() int64 { return m.refused.Load() }

// errHandshakeBusy: every handshake slot stayed taken for the wait.
var errHandshakeBusy = errors.New("too many TLS handshakes in progress; closed before the handshake")

// Bounds on the connections a mux holds before they are classified (the
// TLS handshake and first byte, at most HandshakeTimeout each): nobody is
// authenticated yet, so these bound what anyone who reaches the port can
// make it hold. A connection over a bound is closed at once.
const (
	DefaultMaxPendingConns        = 1024
	DefaultMaxPendingConnsPerHost = 128
)

// WithPendingLimits sets the bounds on connections not yet classified, in
// all and per source host (zero: the defaults).
func WithPendingLimits(total, perHost int) MuxOption {
	return func(m *Mux) {
		if total > 0 {
			m.maxPending = total
		}
		if perHost > 0 {
			m.maxPendingPerHost = perHost
		}
	}
}

// MuxOption tunes a Mux.
type MuxOption func(*Mux)

// WithRaftAuth makes the mux hand a Raft connection to Raft only when auth
// accepts the TLS state of the peer (a server's certificate); others are
// closed. It needs TLS: without a TLS config every Raft connection is
// refused. Use it when the TLS config lets peers without a certificate in
// (the join exchange).
func WithRaftAuth(auth func(tls.ConnectionState) error) MuxOption {
	return func(m *Mux) { m.raftAuth = auth }
}

// WithPublicSplit makes the mux hand the gRPC connections of peers that
// presented no verified certificate to PublicListener instead of
// GRPCListener, so that a server of their own (Server.ServePublic) serves
// them under tight limits and the main server only ever sees
// authenticated peers. Use it with a TLS config that lets peers without a
// certificate in (the join exchange); without TLS it has no effect.
func WithPublicSplit() MuxOption {
	return func(m *Mux) { m.split = true }
}

// withHandshakeTimeout replaces HandshakeTimeout (tests).
func withHandshakeTimeout(d time.Duration) MuxOption {
	return func(m *Mux) { m.handshakeTimeout = d }
}

// NewMux starts routing the connections of ln. tlsCfg is the server side of
// mutual TLS (see TLSConfig), or nil for plaintext. The Mux owns ln.
func NewMux(ln net.Listener, tlsCfg *tls.Config, logger hclog.Logger, opts ...MuxOption) *Mux {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if tlsCfg != nil {
		tlsCfg = withH2(tlsCfg)
	}
	m := &Mux{
		ln:      ln,
		tlsCfg:  tlsCfg,
		logger:  logger.Named("rpc-mux"),
		grpcL:   newSubListener(ln.Addr()),
		raftL:   newSubListener(ln.Addr()),
		pubL:    newSubListener(ln.Addr()),
		done:    make(chan struct{}),
		pending: make(map[net.Conn]struct{}),
		byHost:  make(map[string]int),

		maxPending:        DefaultMaxPendingConns,
		maxPendingPerHost: DefaultMaxPendingConnsPerHost,
		handshakeTimeout:  HandshakeTimeout,
		handshakes:        make(chan struct{}, DefaultMaxHandshakes),
		handshakeWait:     DefaultHandshakeWait,
	}
	for _, o := range opts {
		o(m)
	}
	m.wg.Add(1)
	go m.run()
	return m
}

// GRPCListener yields the gRPC connections, for Server.Serve.
func (m *Mux) GRPCListener() net.Listener { return m.grpcL }

// PublicListener yields the gRPC connections of peers without a verified
// certificate, with WithPublicSplit (none otherwise), for
// Server.ServePublic.
func (m *Mux) PublicListener() net.Listener { return m.pubL }

// RaftListener yields the Raft connections, tag byte consumed, for
// NewRaftLayer.
func (m *Mux) RaftListener() net.Listener { return m.raftL }

// Addr is the address of the underlying listener.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Close stops accepting, closes both sub-listeners and every connection
// not yet handed out, and waits for the mux's goroutines. Connections
// already handed out belong to their consumer.
func (m *Mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.mu.Lock()
		m.closed = true
		for c := range m.pending {
			_ = c.Close()
		}
		m.mu.Unlock()
	})
	m.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (m *Mux) run() {
	defer m.wg.Done()
	// Whatever ends the loop, consumers must see their listener closed
	// rather than block in Accept forever.
	defer m.grpcL.Close()
	defer m.raftL.Close()
	defer m.pubL.Close()

	var delay time.Duration
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				m.logger.Error("listener closed underneath the mux", "error", err)
				return
			}
			// Most likely out of file descriptors: back off rather than
			// spin, as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			m.logger.Error("accept failed", "error", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-m.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		delay = 0
		switch m.track(conn) {
		case trackClosed:
			_ = conn.Close()
			return
		case trackFull:
			m.logger.Debug("too many connections awaiting their handshake; closed one", "remote_addr", conn.RemoteAddr().String())
			_ = conn.Close()
			continue
		}
		m.wg.Add(1)
		go m.route(conn)
	}
}

type trackResult int

const (
	tracked trackResult = iota
	trackClosed
	trackFull
)

func (m *Mux) track(c net.Conn) trackResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return trackClosed
	}
	host := hostOf(c.RemoteAddr())
	if len(m.pending) >= m.maxPending || m.byHost[host] >= m.maxPendingPerHost {
		return trackFull
	}
	m.pending[c] = struct{}{}
	m.byHost[host]++
	return tracked
}

func (m *Mux) untrack(c net.Conn) {
	m.mu.Lock()
	if _, ok := m.pending[c]; ok {
		delete(m.pending, c)
		host := hostOf(c.RemoteAddr())
		if m.byHost[host]--; m.byHost[host] <= 0 {
			delete(m.byHost, host)
		}
	}
	m.mu.Unlock()
}

// route classifies one connection and hands it to its listener.
func (m *Mux) route(raw net.Conn) {
	defer m.wg.Done()
	conn, target, err := m.classify(raw)
	m.untrack(raw)
	if errors.Is(err, errHandshakeBusy) {
		m.refused.Add(1)
		m.logger.Debug("closed a connection before its TLS handshake: too many in progress", "remote_addr", raw.RemoteAddr().String())
		_ = raw.Close()
		return
	}
	if err != nil {
		m.logger.Warn("rejected connection", "remote_addr", raw.RemoteAddr().String(), "error", err)
		_ = raw.Close()
		return
	}
	if !target.deliver(conn, m.done) {
		_ = conn.Close()
	}
}

// errUnknownFirstByte is returned for a connection that is neither gRPC nor
// Raft (nor TLS, when TLS is on).
type errUnknownFirstByte struct {
	b      byte
	inside bool
}

func (e errUnknownFirstByte) Error() string {
	where := ""
	if e.inside {
		where = " inside TLS"
	}
	return fmt.Sprintf("unknown first byte 0x%02x%s", e.b, where)
}

func (m *Mux) classify(raw net.Conn) (*muxConn, *subListener, error) {
	if err := raw.SetDeadline(time.Now().Add(m.handshakeTimeout)); err != nil {
		return nil, nil, err
	}
	conn := newMuxConn(raw)
	first, err := conn.peekByte()
	if err != nil {
		return nil, nil, fmt.Errorf("read first byte: %w", err)
	}
	if m.tlsCfg != nil {
		if first != tlsHandshakeRecord {
			return nil, nil, fmt.Errorf("TLS is required: %w", errUnknownFirstByte{b: first})
		}
		if err := m.acquireHandshake(); err != nil {
			return nil, nil, err
		}
		// The handshake has its full time from when it may start.
		if err := raw.SetDeadline(time.Now().Add(m.handshakeTimeout)); err != nil {
			m.releaseHandshake()
			return nil, nil, err
		}
		tc := tls.Server(conn, m.tlsCfg)
		err := tc.Handshake()
		m.releaseHandshake()
		if err != nil {
			return nil, nil, fmt.Errorf("TLS handshake: %w", err)
		}
		state := tc.ConnectionState()
		conn = newMuxConn(tc)
		conn.tlsState = &state
		if first, err = conn.peekByte(); err != nil {
			return nil, nil, fmt.Errorf("read first byte inside TLS: %w", err)
		}
	}
	if err := raw.SetDeadline(time.Time{}); err != nil {
		return nil, nil, err
	}
	switch first {
	case grpcFirstByte:
		if m.split && m.tlsCfg != nil && (conn.tlsState == nil || len(conn.tlsState.VerifiedChains) == 0) {
			return conn, m.pubL, nil
		}
		return conn, m.grpcL, nil
	case RaftTag:
		if m.raftAuth != nil {
			if conn.tlsState == nil {
				return nil, nil, errors.New("raft connection without TLS refused")
			}
			if err := m.raftAuth(*conn.tlsState); err != nil {
				return nil, nil, fmt.Errorf("raft connection refused: %w", err)
			}
		}
		if _, err := conn.r.Discard(1); err != nil {
			return nil, nil, err
		}
		return conn, m.raftL, nil
	}
	return nil, nil, errUnknownFirstByte{b: first, inside: m.tlsCfg != nil}
}

// acquireHandshake takes a handshake slot, waiting at most handshakeWait
// (errHandshakeBusy) or until the mux closes.
func (m *Mux) acquireHandshake() error {
	select {
	case m.handshakes <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(m.handshakeWait)
	defer t.Stop()
	select {
	case m.handshakes <- struct{}{}:
		return nil
	case <-t.C:
		return errHandshakeBusy
	case <-m.done:
		return net.ErrClosed
	}
}

func (m *Mux) releaseHandshake() { <-m.handshakes }

// muxConn is a connection whose first bytes were peeked: reads go through
// the buffer that holds them, so nothing is lost. tlsState is set when the
// mux terminated TLS, for the gRPC server's credentials.
type muxConn struct {
	net.Conn
	r        *bufio.Reader
	tlsState *tls.ConnectionState
}

func newMuxConn(c net.Conn) *muxConn {
	return &muxConn{Conn: c, r: bufio.NewReader(c)}
}

func (c *muxConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *muxConn) connTLSState() *tls.ConnectionState { return c.tlsState }

func (c *muxConn) peekByte() (byte, error) {
	b, err := c.r.Peek(1)
	if err != nil {
		return 0, err
	}
	return b[0], nil
}

// subListener is one of the mux's outputs: a net.Listener fed by the mux.
type subListener struct {
	addr   net.Addr
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newSubListener(addr net.Addr) *subListener {
	return &subListener{addr: addr, ch: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for the next connection of this kind.
func (l *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops this listener only; the mux keeps routing the other kind and
// closes connections of this kind from then on.
func (l *subListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is the mux's listening address.
func (l *subListener) Addr() net.Addr { return l.addr }

// deliver hands c to Accept; the channel is unbuffered so a connection is
// never stranded in a buffer when the listener closes.
func (l *subListener) deliver(c net.Conn, done <-chan struct{}) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.closed:
		return false
	case <-done:
		return false
	}
}

package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/drover-org/drover/sdk/csibridge"
)

// conns caches one gRPC client connection per driver socket, so a
// fingerprint every few seconds does not redial. It is a cache, not state:
// dropping every entry at any moment loses nothing.
//
// A connection is dropped when a call on it finds the driver unavailable
// (so a restarted driver is redialled at once, not after gRPC's reconnect
// backoff), when it has been idle for idleTimeout (swept on the next
// call; gRPC's own idle mode closes its transport meanwhile), and, least
// recently used first, when more than maxConns sockets are cached.
type conns struct {
	idleTimeout time.Duration
	maxConns    int
	now         func() time.Time

	mu     sync.Mutex
	m      map[string]*conn
	closed bool
}

// conn is one cached connection. users counts calls in flight; a dropped
// connection is closed when its last user is done.
type conn struct {
	socket   string
	cc       *grpc.ClientConn
	users    int
	lastUsed time.Time
	dropped  bool
}

func newConns(idleTimeout time.Duration, maxConns int) *conns {
	return &conns{idleTimeout: idleTimeout, maxConns: maxConns, now: time.Now, m: map[string]*conn{}}
}

// errClosed is returned by calls made after Close.
var errClosed = errors.New("csi bridge is closed")

// get returns a connection to the driver at socket for one call; the
// caller hands it back with put. A socket that does not exist, or is not
// a socket, fails with ErrUnavailable without dialling: the driver is not
// running (yet, or any more).
func (c *conns) get(socket string) (*conn, error) {
	if err := checkSocket(socket); err != nil {
		c.drop(socket)
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	now := c.now()
	c.sweepLocked(now)
	cn := c.m[socket]
	if cn == nil {
		cc, err := dial(socket)
		if err != nil {
			return nil, fmt.Errorf("%w: dial csi driver at %s: %v", csibridge.ErrUnavailable, socket, err)
		}
		cn = &conn{socket: socket, cc: cc}
		c.m[socket] = cn
	}
	cn.users++
	cn.lastUsed = now
	c.evictLocked() // after users++: never the connection just handed out
	return cn, nil
}

// put hands back a connection get returned; unavailable drops it.
func (c *conns) put(cn *conn, unavailable bool) {
	c.mu.Lock()
	cn.users--
	cn.lastUsed = c.now()
	if unavailable {
		c.dropLocked(cn)
	}
	closeNow := cn.dropped && cn.users == 0
	c.mu.Unlock()
	if closeNow {
		_ = cn.cc.Close()
	}
}

// drop forgets the connection to socket, if any.
func (c *conns) drop(socket string) {
	c.mu.Lock()
	cn := c.m[socket]
	var closeNow bool
	if cn != nil {
		c.dropLocked(cn)
		closeNow = cn.users == 0
	}
	c.mu.Unlock()
	if closeNow {
		_ = cn.cc.Close()
	}
}

func (c *conns) dropLocked(cn *conn) {
	if !cn.dropped {
		cn.dropped = true
		if c.m[cn.socket] == cn {
			delete(c.m, cn.socket)
		}
	}
}

// sweepLocked closes connections idle for longer than idleTimeout. Closing
// an idle connection is quick (its transport is down already or nearly),
// so it is done under the lock.
func (c *conns) sweepLocked(now time.Time) {
	for _, cn := range c.m {
		if cn.users == 0 && now.Sub(cn.lastUsed) > c.idleTimeout {
			c.dropLocked(cn)
			_ = cn.cc.Close()
		}
	}
}

// evictLocked drops least recently used idle connections until at most
// maxConns remain. Connections in use are never evicted, so the cache may
// exceed maxConns while that many calls are in flight.
func (c *conns) evictLocked() {
	for len(c.m) > c.maxConns {
		var oldest *conn
		for _, cn := range c.m {
			if cn.users == 0 && (oldest == nil || cn.lastUsed.Before(oldest.lastUsed)) {
				oldest = cn
			}
		}
		if oldest == nil {
			return
		}
		c.dropLocked(oldest)
		_ = oldest.cc.Close()
	}
}

// size reports how many sockets are cached.
func (c *conns) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// close closes every idle connection now and every busy one when its call
// ends; later calls fail.
func (c *conns) close() {
	c.mu.Lock()
	c.closed = true
	var idle []*conn
	for _, cn := range c.m {
		c.dropLocked(cn)
		if cn.users == 0 {
			idle = append(idle, cn)
		}
	}
	c.mu.Unlock()
	for _, cn := range idle {
		_ = cn.cc.Close()
	}
}

func checkSocket(socket string) error {
	fi, err := os.Stat(socket)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: csi driver socket %s does not exist", csibridge.ErrUnavailable, socket)
	case err != nil:
		return fmt.Errorf("%w: csi driver socket %s: %v", csibridge.ErrUnavailable, socket, err)
	case fi.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%w: %s is not a unix socket", csibridge.ErrUnavailable, socket)
	}
	return nil
}

// dial creates (but does not connect) a client for the driver at socket.
// Calls are fail-fast: one made while the driver refuses connections fails
// with Unavailable at once instead of waiting for it. The reconnect
// backoff is short because a driver is local and usually back quickly.
func dial(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}),
		grpc.WithIdleTimeout(time.Minute),
	)
}

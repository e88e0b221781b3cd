package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/drover-org/drover/core/structs"
)

type blob struct{ Data []byte }

// countingDialer dials TCP and counts the bytes the client writes.
func countingDialer(n *atomic.Int64) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, n: n}, nil
	})
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// publicFixture is a mux with the public split: the server lets peers
// without a certificate in (as the join listener does), "Join.Ping" is
// served publicly, "Secret.Echo" only to peers with a certificate.
type publicFixture struct {
	addr              string
	anonTLS, certTLS  *tls.Config
	secretCalls, pngs atomic.Int64
}

func newPublicFixture(t *testing.T, lim PublicLimits) *publicFixture {
	t.Helper()
	ca := newTestCA(t, "ca")
	srvTLS, cliTLS := tlsPair(t, ca, "server", false, "")
	srvTLS = srvTLS.Clone()
	srvTLS.ClientAuth = tls.VerifyClientCertIfGiven
	f := &publicFixture{certTLS: cliTLS}
	f.anonTLS = cliTLS.Clone()
	f.anonTLS.Certificates = nil

	mux := NewMux(listen(t), srvTLS, nil, WithPublicSplit())
	srv := NewServer(nil, nil)
	Handle(srv, "Join.Ping", func(_ context.Context, b *blob) (*blob, error) { f.pngs.Add(1); return &blob{}, nil })
	Handle(srv, "Secret.Echo", func(_ context.Context, b *blob) (*blob, error) {
		f.secretCalls.Add(1)
		return &blob{Data: b.Data[:min(len(b.Data), 8)]}, nil
	})
	done := make(chan struct{}, 2)
	go func() { _ = srv.Serve(mux.GRPCListener()); done <- struct{}{} }()
	go func() { _ = srv.ServePublic(mux.PublicListener(), []string{"Join.Ping"}, lim); done <- struct{}{} }()
	t.Cleanup(func() {
		srv.Stop()
		_ = mux.Close()
		<-done
		<-done
	})
	f.addr = mux.Addr().String()
	return f
}

func (f *publicFixture) conn(t *testing.T, cfg *tls.Config, sent *atomic.Int64) *Conn {
	t.Helper()
	var opts []grpc.DialOption
	if sent != nil {
		opts = append(opts, countingDialer(sent))
	}
	c, err := newConn(f.addr, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A caller without a certificate cannot make the server read a large
// request: a method it may not call is refused from its headers, a public
// one past the small size limit from its length prefix, and in both cases
// the caller could send no more than the fixed window. A caller with a
// certificate keeps the normal limits.
func TestPublicRefusedBeforeRead(t *testing.T) {
	f := newPublicFixture(t, PublicLimits{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := &blob{Data: make([]byte, 60<<20)}

	for _, tc := range []struct {
		method string
		kind   error
	}{
		{"Secret.Echo", structs.ErrPermissionDenied},
		{"Join.Ping", structs.ErrTooLarge},
	} {
		var sent atomic.Int64
		c := f.conn(t, f.anonTLS, &sent)
		_, err := Call[blob, blob](ctx, c, tc.method, big)
		if !errors.Is(err, tc.kind) {
			t.Fatalf("%s, 60 MB without a certificate: %v, want %v", tc.method, err, tc.kind)
		}
		if n := sent.Load(); n > 1<<20 {
			t.Fatalf("%s: the client without a certificate sent %d bytes before the refusal, want at most a window", tc.method, n)
		}
	}
	if f.secretCalls.Load() != 0 || f.pngs.Load() != 0 {
		t.Fatal("a handler ran for a refused call")
	}

	// The join method works without a certificate; nothing else does.
	anon := f.conn(t, f.anonTLS, nil)
	if _, err := Call[blob, blob](ctx, anon, "Join.Ping", &blob{}); err != nil {
		t.Fatalf("public method without a certificate: %v", err)
	}
	if _, err := Call[blob, blob](ctx, anon, "Secret.Echo", &blob{}); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("private method without a certificate: %v", err)
	}
	// With a certificate: everything, at the normal size limit.
	authed := f.conn(t, f.certTLS, nil)
	if _, err := Call[blob, blob](ctx, authed, "Secret.Echo", &blob{Data: make([]byte, 4<<20)}); err != nil {
		t.Fatalf("4 MB with a certificate: %v", err)
	}
	if f.secretCalls.Load() != 1 {
		t.Fatalf("secret calls %d, want 1", f.secretCalls.Load())
	}
}

// Calls without a certificate are rate limited per host, and connections
// capped per host: the refusals are "retry later" (ErrUnavailable).
func TestPublicRateLimit(t *testing.T) {
	f := newPublicFixture(t, PublicLimits{CallsPerSecond: 0.001, CallBurst: 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := f.conn(t, f.anonTLS, nil)
	for i := 0; i < 3; i++ {
		if _, err := Call[blob, blob](ctx, a, "Join.Ping", &blob{}); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	// Over the rate, on this connection or a new one from the same host.
	for _, c := range []*Conn{a, f.conn(t, f.anonTLS, nil)} {
		_, err := Call[blob, blob](ctx, c, "Join.Ping", &blob{})
		if !errors.Is(err, structs.ErrUnavailable) || !strings.Contains(err.Error(), "rate limited") {
			t.Fatalf("call over the rate: %v, want ErrUnavailable, rate limited", err)
		}
	}
	if f.pngs.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3", f.pngs.Load())
	}
	// Authenticated peers share none of these limits.
	authed := f.conn(t, f.certTLS, nil)
	for i := 0; i < 10; i++ {
		if _, err := Call[blob, blob](ctx, authed, "Join.Ping", &blob{}); err != nil {
			t.Fatalf("authenticated call %d: %v", i, err)
		}
	}
}

func TestPublicConnLimit(t *testing.T) {
	f := newPublicFixture(t, PublicLimits{MaxConnsPerHost: 2, MaxConnAge: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held := []*Conn{f.conn(t, f.anonTLS, nil), f.conn(t, f.anonTLS, nil)}
	for i, c := range held {
		if _, err := Call[blob, blob](ctx, c, "Join.Ping", &blob{}); err != nil {
			t.Fatalf("connection %d within the cap: %v", i, err)
		}
	}
	third := f.conn(t, f.anonTLS, nil)
	_, err := Call[blob, blob](ctx, third, "Join.Ping", &blob{})
	if !errors.Is(err, structs.ErrUnavailable) || strings.Contains(err.Error(), "rate limited") {
		t.Fatalf("a third connection from one host: %v, want a transport refusal", err)
	}
	// A freed slot lets the next connection in.
	_ = held[0].Close()
	waitFor(t, 30*time.Second, "a connection once a slot is free", func() bool {
		_, err := Call[blob, blob](ctx, third, "Join.Ping", &blob{})
		return err == nil
	})
}

// A PreAuthorizer refuses a call from its headers: the caller could send
// no more than a window of a 60 MB request, and the handler never ran.
func TestPreAuthorizerRefusesBeforeRead(t *testing.T) {
	srv := NewServer(nil, nil)
	var calls atomic.Int64
	Handle(srv, "Secret.Echo", func(_ context.Context, b *blob) (*blob, error) { calls.Add(1); return &blob{}, nil })
	Handle(srv, "Open.Echo", func(_ context.Context, b *blob) (*blob, error) { calls.Add(1); return &blob{}, nil })
	srv.SetPreAuthorizer(func(_ context.Context, method string) error {
		if strings.HasPrefix(method, "Secret.") {
			return structs.NewError(structs.ErrPermissionDenied, "Permission denied: %s", method)
		}
		return nil
	})
	ln := listen(t)
	serve(t, srv, ln)
	var sent atomic.Int64
	c, err := newConn(ln.Addr().String(), nil, countingDialer(&sent))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = Call[blob, blob](ctx, c, "Secret.Echo", &blob{Data: make([]byte, 60<<20)})
	if !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("refused method: %v, want ErrPermissionDenied", err)
	}
	if n := sent.Load(); n > 2<<20 {
		t.Fatalf("the caller sent %d bytes before the refusal", n)
	}
	if _, err := Call[blob, blob](ctx, c, "Open.Echo", &blob{Data: make([]byte, 1<<20)}); err != nil {
		t.Fatalf("allowed method: %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("handlers ran %d times, want 1", calls.Load())
	}
}

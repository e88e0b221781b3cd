package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Only as many TLS handshakes as the limit run at once: with the one slot
// held by a client that never finishes its ClientHello, a further
// connection waits the handshake wait and is closed before its handshake
// (the caller sees ErrUnavailable, which is retryable); once the slot is
// free, handshakes succeed again.
func TestMuxHandshakeLimit(t *testing.T) {
	ca := newTestCA(t, "ca")
	serverTLS, clientTLS := tlsPair(t, ca, "agent", false, "")
	mux := NewMux(listen(t), serverTLS, nil, WithHandshakeLimit(1, 300*time.Millisecond), withHandshakeTimeout(time.Minute))
	t.Cleanup(func() { _ = mux.Close() })
	srv := NewServer(serverTLS, nil)
	echoServer(srv)
	serve(t, srv, mux.GRPCListener())
	addr := mux.Addr().String()

	// A handshake that starts and stalls: a TLS record header, no more.
	stall, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	if _, err := stall.Write([]byte{tlsHandshakeRecord, 3, 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the stalled handshake to hold the slot", func() bool { return len(mux.handshakes) == 1 })

	// A raw TLS client: closed before any handshake message comes back.
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	tc := tls.Client(c, clientTLS)
	_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
	err = tc.Handshake()
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("handshake while the only slot is held: %v, want the connection closed", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("refused after %s, before the handshake wait of 300ms", took)
	}
	if n := mux.RefusedHandshakes(); n != 1 {
		t.Fatalf("refused handshakes %d, want 1", n)
	}

	// Through the RPC client: a call fails as unavailable (retryable).
	conn := dial(t, addr, clientTLS)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	msg := "hi"
	_, err = Call[string, string](ctx, conn, "Echo", &msg)
	cancel()
	if err == nil || !(errors.Is(err, structs.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("call while the slot is held: %v, want unavailable", err)
	}

	// The stalled client goes: its slot frees and calls go through.
	_ = stall.Close()
	waitFor(t, 30*time.Second, "the slot to free", func() bool { return len(mux.handshakes) == 0 })
	conn2 := dial(t, addr, clientTLS)
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := Call[string, string](ctx, conn2, "Echo", &msg)
	if err != nil || *got != msg {
		t.Fatalf("call once the slot is free: %v", err)
	}
}

// The client's reconnect backoff is jittered more than gRPC's and capped
// above it, so that clients that lost their server together come back
// spread out.
func TestReconnectBackoff(t *testing.T) {
	bo := ReconnectBackoff()
	if bo.Jitter < 0.4 || bo.MaxDelay < 10*time.Second || bo.BaseDelay <= 0 || bo.Multiplier <= 1 {
		t.Fatalf("backoff %+v: want jitter >= 0.4, a cap >= 10s", bo)
	}
	if clientKeepaliveTimeout < 15*time.Second || clientKeepaliveTime <= serverMinPingInterval {
		t.Fatalf("keepalive: timeout %s (want >= 15s, for a busy server), ping every %s (want above the server's minimum %s)",
			clientKeepaliveTimeout, clientKeepaliveTime, serverMinPingInterval)
	}
}

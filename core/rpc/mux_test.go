package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// muxNode is one agent's RPC port: a mux with a gRPC server on one side and
// the raw Raft listener on the other.
type muxNode struct {
	mux  *Mux
	addr string
}

func startMux(t *testing.T, serverTLS *tls.Config, logger hclog.Logger, setup func(*Server)) *muxNode {
	t.Helper()
	mux := NewMux(listen(t), serverTLS, logger)
	t.Cleanup(func() {
		if err := mux.Close(); err != nil {
			t.Errorf("mux close: %v", err)
		}
	})
	srv := NewServer(serverTLS, logger)
	if setup != nil {
		setup(srv)
	}
	serve(t, srv, mux.GRPCListener())
	return &muxNode{mux: mux, addr: mux.Addr().String()}
}

func echoServer(s *Server) {
	Handle(s, "Echo", func(_ context.Context, m *string) (*string, error) { return m, nil })
}

// acceptRaft accepts one connection from the mux's Raft side, or fails the
// test after a deadline.
func acceptRaft(t *testing.T, m *Mux) net.Conn {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := m.RaftListener().Accept()
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Cleanup(func() { _ = r.c.Close() })
		return r.c
	case <-time.After(10 * time.Second):
		// Unblock the Accept goroutine so it does not leak.
		_ = m.RaftListener().Close()
		<-ch
		t.Fatal("no raft connection routed")
		return nil
	}
}

// TestMuxRoutes sends gRPC and Raft to the same port, with and without TLS,
// and checks that each reaches its side with no byte lost.
func TestMuxRoutes(t *testing.T) {
	ca := newTestCA(t, "ca")
	serverTLS, clientTLS := tlsPair(t, ca, "agent", false, "")
	tests := []struct {
		name      string
		serverTLS *tls.Config
		clientTLS *tls.Config
	}{
		{"plaintext", nil, nil},
		{"tls", serverTLS, clientTLS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := startMux(t, tc.serverTLS, nil, echoServer)

			c := dial(t, node.addr, tc.clientTLS)
			msg := "over grpc"
			got, err := Call[string, string](context.Background(), c, "Echo", &msg)
			if err != nil || *got != msg {
				t.Fatalf("gRPC through the mux: %v", err)
			}

			layer, err := NewRaftLayer(node.mux.RaftListener(), nil, tc.clientTLS)
			if err != nil {
				t.Fatal(err)
			}
			out, err := layer.Dial(raft.ServerAddress(node.addr), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			payload := []byte("R-starts-this-payload-too")
			if _, err := out.Write(payload); err != nil {
				t.Fatal(err)
			}
			in := acceptRaft(t, node.mux)
			buf := make([]byte, len(payload))
			_ = in.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.ReadFull(in, buf); err != nil {
				t.Fatal(err)
			}
			if string(buf) != string(payload) {
				t.Fatalf("raft side read %q, want %q", buf, payload)
			}
		})
	}
}

// TestMuxRejects checks that a connection the mux cannot route is closed and
// logged, and that the mux keeps serving afterwards.
func TestMuxRejects(t *testing.T) {
	ca := newTestCA(t, "ca")
	serverTLS, clientTLS := tlsPair(t, ca, "agent", false, "")
	rawTLS := clientTLS.Clone()
	rawTLS.NextProtos = nil
	tests := []struct {
		name      string
		serverTLS *tls.Config
		send      func(t *testing.T, c net.Conn) net.Conn
		wantLog   string
	}{
		{"unknown byte", nil, func(t *testing.T, c net.Conn) net.Conn {
			_, _ = c.Write([]byte("XYZ"))
			return c
		}, "unknown first byte 0x58"},
		{"TLS when off", nil, func(t *testing.T, c net.Conn) net.Conn {
			_, _ = c.Write([]byte{0x16, 3, 1})
			return c
		}, "unknown first byte 0x16"},
		{"plaintext when TLS on", serverTLS, func(t *testing.T, c net.Conn) net.Conn {
			_, _ = c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
			return c
		}, "TLS is required"},
		{"unknown byte inside TLS", serverTLS, func(t *testing.T, c net.Conn) net.Conn {
			tc := tls.Client(c, rawTLS)
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			_, _ = tc.Write([]byte("X"))
			return tc
		}, "unknown first byte 0x58 inside TLS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			node := startMux(t, tc.serverTLS, bufferLogger(&logs), echoServer)
			raw, err := net.Dial("tcp", node.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			c := tc.send(t, raw)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1))
			var ne net.Error
			if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("want the mux to close the connection, read returned %v", err)
			}
			waitFor(t, 10*time.Second, "the rejection to be logged", func() bool {
				return strings.Contains(logs.String(), tc.wantLog)
			})

			// The mux still routes good connections.
			var cli *tls.Config
			if tc.serverTLS != nil {
				cli = clientTLS
			}
			msg := "still up"
			if _, err := Call[string, string](context.Background(), dial(t, node.addr, cli), "Echo", &msg); err != nil {
				t.Fatalf("mux unusable after a rejection: %v", err)
			}
		})
	}
}

// TestMuxClose checks that Close ends the sub-listeners and does not wait
// for a connection that never speaks.
func TestMuxClose(t *testing.T) {
	mux := NewMux(listen(t), nil, nil)
	silent, err := net.Dial("tcp", mux.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitFor(t, 10*time.Second, "the silent connection to be pending", func() bool {
		mux.mu.Lock()
		defer mux.mu.Unlock()
		return len(mux.pending) == 1
	})

	accepted := make(chan error, 2)
	for _, l := range []net.Listener{mux.GRPCListener(), mux.RaftListener()} {
		go func() {
			_, err := l.Accept()
			accepted <- err
		}()
	}
	closed := make(chan error, 1)
	go func() { closed <- mux.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a silent connection")
	}
	for range 2 {
		if err := <-accepted; !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: want net.ErrClosed, got %v", err)
		}
	}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("pending connection not closed: %v", err)
	}
}

// Connections that have not finished their handshake are bounded per
// source host and in all: one over a bound is closed at once, while the
// others wait, and another host still gets in.
func TestMuxPendingLimits(t *testing.T) {
	m := NewMux(listen(t), nil, nil, WithPendingLimits(4, 2), withHandshakeTimeout(10*time.Minute))
	defer m.Close()
	pending := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.pending)
	}
	dialFrom := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
		c, err := d.Dial("tcp", m.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dialFrom("127.0.0.1")
	dialFrom("127.0.0.1")
	waitFor(t, 30*time.Second, "two pending connections", func() bool { return pending() == 2 })
	over := dialFrom("127.0.0.1")
	_ = over.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := over.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third pending connection from one host: read %v, want it closed", err)
	}
	if got := pending(); got != 2 {
		t.Fatalf("pending %d after the refusal, want the first two still waiting", got)
	}
	dialFrom("127.0.0.2")
	waitFor(t, 30*time.Second, "another host's connection pending", func() bool { return pending() == 3 })
}

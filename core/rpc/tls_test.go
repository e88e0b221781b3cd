package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

func TestTLSConfigInputs(t *testing.T) {
	ca := newTestCA(t, "ca")
	cert, key := ca.issue(t, "agent")
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		ca, cert, key  string
		verify         bool
		serverName     string
		wantErr        bool
		wantNil        bool
		wantServerName string
		wantSkipVerify bool
	}{
		{name: "tls off", wantNil: true},
		{name: "missing key", ca: ca.file, cert: cert, wantErr: true},
		{name: "no such CA file", ca: filepath.Join(t.TempDir(), "nope.pem"), cert: cert, key: key, wantErr: true},
		{name: "CA without PEM", ca: notPEM, cert: cert, key: key, wantErr: true},
		{name: "key is not the cert's", ca: ca.file, cert: cert, key: ca.file, wantErr: true},
		{name: "verify without name", ca: ca.file, cert: cert, key: key, verify: true, wantErr: true},
		{name: "chain only", ca: ca.file, cert: cert, key: key, wantSkipVerify: true},
		{name: "verify hostname", ca: ca.file, cert: cert, key: key, verify: true, serverName: "server.east.drover", wantServerName: "server.east.drover"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli, err := TLSConfig(tc.ca, tc.cert, tc.key, tc.verify, tc.serverName)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if tc.wantNil {
				if srv != nil || cli != nil {
					t.Fatal("want nil configs when TLS is off")
				}
				return
			}
			if srv.ClientAuth != tls.RequireAndVerifyClientCert || srv.ClientCAs == nil {
				t.Error("server does not require verified client certificates")
			}
			if cli.RootCAs == nil || len(cli.Certificates) != 1 {
				t.Error("client lacks the CA or its certificate")
			}
			if cli.ServerName != tc.wantServerName || cli.InsecureSkipVerify != tc.wantSkipVerify {
				t.Errorf("client ServerName=%q InsecureSkipVerify=%v", cli.ServerName, cli.InsecureSkipVerify)
			}
		})
	}
	if got := ServerName("east"); got != "server.east.drover" {
		t.Errorf("ServerName(east) = %q", got)
	}
}

// tlsClients are the client configs the handshake tests try against a
// server whose certificate (CA "ca") names server.global.drover.
type tlsClient struct {
	name   string
	cfg    *tls.Config
	accept bool
}

func tlsClients(t *testing.T) (serverTLS *tls.Config, clients []tlsClient) {
	t.Helper()
	ca := newTestCA(t, "ca")
	other := newTestCA(t, "other")
	serverTLS, chainOnly := tlsPair(t, ca, "server", false, "", ServerName("global"))
	_, rightName := tlsPair(t, ca, "client-a", true, ServerName("global"))
	_, wrongName := tlsPair(t, ca, "client-b", true, ServerName("east"))
	noCert := chainOnly.Clone()
	noCert.Certificates = nil
	// Trusts the right CA but presents a certificate from another one.
	otherCert, otherKey := other.issue(t, "intruder")
	_, foreign, err := TLSConfig(ca.file, otherCert, otherKey, false, "")
	if err != nil {
		t.Fatal(err)
	}
	// Go's client withholds a certificate the server's CA list does not
	// cover; an attacker would not, so present it regardless.
	foreignCert := foreign.Certificates[0]
	foreign.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &foreignCert, nil
	}
	return serverTLS, []tlsClient{
		{"valid cert, chain only", chainOnly, true},
		{"valid cert, hostname verified", rightName, true},
		{"no client cert", noCert, false},
		{"client cert from another CA", foreign, false},
		{"server name mismatch", wrongName, false},
		{"plaintext", nil, false},
	}
}

// TestTLSGRPC runs each client against a server that terminates TLS itself
// and against one behind a TLS mux.
func TestTLSGRPC(t *testing.T) {
	serverTLS, clients := tlsClients(t)
	peerCN := make(chan string, 1)
	setup := func(s *Server) {
		Handle(s, "WhoAmI", func(ctx context.Context, _ *string) (*string, error) {
			p, ok := peer.FromContext(ctx)
			if !ok {
				return nil, errors.New("no peer")
			}
			info, ok := p.AuthInfo.(credentials.TLSInfo)
			if !ok || len(info.State.PeerCertificates) == 0 {
				return nil, errors.New("no peer certificate")
			}
			cn := info.State.PeerCertificates[0].Subject.CommonName
			peerCN <- cn
			return &cn, nil
		})
	}
	fronts := map[string]func(t *testing.T) string{
		"server terminates TLS": func(t *testing.T) string {
			s := NewServer(serverTLS, nil)
			setup(s)
			ln := listen(t)
			serve(t, s, ln)
			return ln.Addr().String()
		},
		"mux terminates TLS": func(t *testing.T) string {
			return startMux(t, serverTLS, nil, setup).addr
		},
	}
	for front, start := range fronts {
		t.Run(front, func(t *testing.T) {
			addr := start(t)
			for _, cl := range clients {
				t.Run(cl.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					got, err := Call[string, string](ctx, dial(t, addr, cl.cfg), "WhoAmI", nil)
					if cl.accept {
						if err != nil {
							t.Fatalf("refused: %v", err)
						}
						if cn := <-peerCN; cn != *got {
							t.Errorf("handler saw peer %q, returned %q", cn, *got)
						}
						return
					}
					if err == nil {
						<-peerCN
						t.Fatalf("accepted a connection that must be refused")
					}
					if !errors.Is(err, structs.ErrUnavailable) || ctx.Err() != nil {
						t.Fatalf("want a prompt ErrUnavailable, got %v", err)
					}
					t.Logf("refused: %v", err)
				})
			}
		})
	}
}

// TestTLSRaftDial runs each client's Raft dial against a TLS mux. A refusal
// shows either in Dial (the client rejects the server) or as the server
// closing the connection right after it (TLS 1.3 checks the client's
// certificate after the client considers the handshake done).
func TestTLSRaftDial(t *testing.T) {
	serverTLS, clients := tlsClients(t)
	node := startMux(t, serverTLS, nil, nil)
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			layer, err := NewRaftLayer(node.mux.RaftListener(), nil, cl.cfg)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := layer.Dial(raft.ServerAddress(node.addr), 5*time.Second)
			if cl.accept {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				defer conn.Close()
				if _, err := conn.Write([]byte("ping")); err != nil {
					t.Fatal(err)
				}
				in := acceptRaft(t, node.mux)
				buf := make([]byte, 4)
				_ = in.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := in.Read(buf); err != nil || string(buf) != "ping" {
					t.Fatalf("raft side read %q, %v", buf, err)
				}
				return
			}
			if err != nil {
				t.Logf("refused at dial: %v", err)
				return
			}
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			var ne net.Error
			if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
				t.Fatalf("want the server to refuse the connection, read returned %v", err)
			}
			t.Logf("refused after dial: %v", err)
		})
	}
}

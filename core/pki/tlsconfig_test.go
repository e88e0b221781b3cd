package pki

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

func TestCertStoreNeedsRotation(t *testing.T) {
	c := newCluster(t, "c1")
	cert := c.tlsCert(t, RoleClient, "n1", 72*time.Hour)
	store, err := NewCertStore(cert)
	if err != nil {
		t.Fatal(err)
	}
	nb, na := cert.Leaf.NotBefore, cert.Leaf.NotAfter
	renew := nb.Add(na.Sub(nb) * 2 / 3)
	tests := []struct {
		name string
		at   time.Time
		want bool
	}{
		{"just issued", nb.Add(time.Minute), false},
		{"half way", nb.Add(na.Sub(nb) / 2), false},
		{"just before two thirds", renew.Add(-time.Second), false},
		{"at two thirds", renew, true},
		{"expired", na.Add(time.Hour), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.NeedsRotation(tc.at); got != tc.want {
				t.Fatalf("NeedsRotation(%s) = %v, want %v (renew at %s)", tc.at, got, tc.want, store.RenewAt())
			}
		})
	}
	if err := store.Replace(nil); err == nil {
		t.Error("Replace(nil) succeeded")
	}
	if err := store.Replace(&tls.Certificate{Certificate: [][]byte{[]byte("junk")}, PrivateKey: cert.PrivateKey}); err == nil {
		t.Error("Replace accepted an unparsable certificate")
	}
	if store.Current() != cert {
		t.Error("a failed Replace changed the current certificate")
	}
	noLeaf := *cert
	noLeaf.Leaf = nil
	if err := store.Replace(&noLeaf); err != nil || store.Current().Leaf == nil {
		t.Errorf("Replace without Leaf: %v", err)
	}
}

// TestRotationWithoutRestart: after Replace, new handshakes present the new
// certificate while the listener and existing connections keep running.
func TestRotationWithoutRestart(t *testing.T) {
	c := newCluster(t, "c1")
	srv := startServer(t, c, c.tlsCert(t, RoleServer, "s1", 0))
	trust := c.ca.Trust()

	cert, _, err := (joiner{token: c.tokens.Get(RoleClient), params: JoinParams{ID: "n1"}}).run(t, srv)
	if err != nil {
		t.Fatal(err)
	}
	client, err := NewCertStore(cert)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ClientTLSConfig(client, trust, RoleServer)
	first, err := dial(t, srv.addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := first.call(t, wireReq{Op: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Serial != cert.Leaf.SerialNumber.Text(16) {
		t.Fatalf("server sees serial %s, want %s", resp.Serial, cert.Leaf.SerialNumber.Text(16))
	}
	oldServerSerial := first.conn.ConnectionState().PeerCertificates[0].SerialNumber

	// The client renews over mutual TLS with a fresh key.
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := NewCSR(key, JoinParams{ID: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err = first.call(t, wireReq{Op: "renew", CSR: csr})
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := TLSCertificate(resp.Join.Certificate, resp.Join.CA, key)
	if err != nil {
		t.Fatal(err)
	}
	// The identity comes from the caller's certificate, not the CSR.
	if id, err := trust.Verify([]*x509.Certificate{renewed.Leaf}, x509.ExtKeyUsageClientAuth, time.Now()); err != nil || id != (Identity{"c1", RoleClient, "n1"}) {
		t.Fatalf("renewed certificate is for %v (%v), want client n1", id, err)
	}
	if err := client.Replace(renewed); err != nil {
		t.Fatal(err)
	}
	// The server rotates too.
	newServer := c.tlsCert(t, RoleServer, "s1", 0)
	if err := srv.store.Replace(newServer); err != nil {
		t.Fatal(err)
	}

	second, err := dial(t, srv.addr(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = second.call(t, wireReq{Op: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Serial != renewed.Leaf.SerialNumber.Text(16) || *resp.Identity != (Identity{"c1", RoleClient, "n1"}) {
		t.Errorf("after Replace the server sees %s serial %s, want n1 serial %s", resp.Identity, resp.Serial, renewed.Leaf.SerialNumber.Text(16))
	}
	if got := second.conn.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(newServer.Leaf.SerialNumber) != 0 || got.Cmp(oldServerSerial) == 0 {
		t.Errorf("server presents serial %s after Replace, want %s", got.Text(16), newServer.Leaf.SerialNumber.Text(16))
	}
	// The connection made before the rotation still works.
	if resp, err := first.call(t, wireReq{Op: "whoami"}); err != nil || resp.Serial != cert.Leaf.SerialNumber.Text(16) {
		t.Errorf("old connection after rotation: %v, %v", resp, err)
	}
}

func TestMutualTLSRefusals(t *testing.T) {
	c := newCluster(t, "c1")
	other := newCluster(t, "c1")
	srv := startServer(t, c, c.tlsCert(t, RoleServer, "s1", 0))
	trust := c.ca.Trust()

	tests := []struct {
		name    string
		cfg     *tls.Config
		wantErr string
	}{
		{name: "client certificate of another CA", cfg: ClientTLSConfig(mustStore(t, other.tlsCert(t, RoleClient, "n1", 0)), trust, RoleServer), wantErr: "unknown certificate authority"},
		{name: "want a client, find a server", cfg: ClientTLSConfig(mustStore(t, c.tlsCert(t, RoleClient, "n1", 0)), trust, RoleClient), wantErr: "want a client"},
		{name: "server of another CA", cfg: ClientTLSConfig(mustStore(t, c.tlsCert(t, RoleClient, "n1", 0)), other.ca.Trust(), AnyRole), wantErr: "unknown authority"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := dial(t, srv.addr(), tc.cfg)
			if err == nil {
				// TLS 1.3: the client learns of the server's refusal on its
				// first read.
				_, err = p.call(t, wireReq{Op: "whoami"})
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestServerTLSConfigRequiresCertificate: a listener without the join
// exchange refuses a peer that has no certificate.
func TestServerTLSConfigRequiresCertificate(t *testing.T) {
	c := newCluster(t, "c1")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", ServerTLSConfig(mustStore(t, c.tlsCert(t, RoleServer, "s1", 0)), c.ca.Trust()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		done <- conn.(*tls.Conn).Handshake()
	}()
	defer func() { _ = ln.Close() }()

	p, err := dial(t, ln.Addr().String(), PinnedTLSConfig(c.tokens.Get(RoleClient)))
	if err == nil {
		_, err = p.call(t, wireReq{Op: "whoami"})
	}
	if err == nil {
		t.Fatal("a peer without a certificate got through ServerTLSConfig")
	}
	select {
	case serr := <-done:
		if serr == nil || !strings.Contains(serr.Error(), "certificate") {
			t.Errorf("server handshake: %v, want a certificate error", serr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server handshake did not finish")
	}
}

func mustStore(t *testing.T, cert *tls.Certificate) *CertStore {
	t.Helper()
	s, err := NewCertStore(cert)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

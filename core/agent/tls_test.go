package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a leaf certificate (usable as server and client) and its key
// into dir and returns their paths.
func (ca *testCA) issue(t *testing.T, dir, name string, dns ...string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: dns, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}

// A server and a remote client agent talk over mutual TLS; RPC clients
// without a certificate, or with one from another CA, are refused.
func TestAgentsUseMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "drover-ca")
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey := ca.issue(t, dir, "server", "server.global.drover")
	cliCert, cliKey := ca.issue(t, dir, "client", "client.global.drover")
	rogue := newTestCA(t, "rogue-ca")
	rogueCert, rogueKey := rogue.issue(t, dir, "rogue", "client.global.drover")

	rpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	_, rpcPort, _ := net.SplitHostPort(rpcAddr)
	port, _ := strconv.Atoi(rpcPort)
	start := func(cfg *Config) *Agent { return startTestAgent(t, cfg, hclog.Warn) }
	srv := start(&Config{
		NodeName: "s1", Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, "s1"), BindAddr: "127.0.0.1",
		LogLevel: "WARN", Ports: &Ports{RPC: port},
		Server: &ServerConfig{Enabled: true, BootstrapExpect: 1},
		TLS:    &TLSConfig{RPC: true, CAFile: caPath, CertFile: srvCert, KeyFile: srvKey, VerifyServerHostname: true},
	})
	cli := start(&Config{
		NodeName: "c1", Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, "c1"), BindAddr: "127.0.0.1",
		LogLevel: "WARN", Ports: &Ports{RPC: freePort(t)},
		Client: &ClientConfig{Enabled: true, Servers: []string{rpcAddr}},
		TLS:    &TLSConfig{RPC: true, CAFile: caPath, CertFile: cliCert, KeyFile: cliKey, VerifyServerHostname: true},
	})
	waitFor(t, "the remote client's node to be ready over TLS", func() (bool, string) {
		n, _ := srv.Server().State().NodeByID(nil, cli.Client().NodeID())
		if n == nil {
			return false, "no node"
		}
		return n.Status == structs.NodeStatusReady, n.Status
	})

	// Deadlines are generous: on a loaded machine a handshake alone can
	// take seconds, and a call that ran out of time would end with the
	// context's error instead of the transport's verdict.
	call := func(serverTLS bool, cert, key string) error {
		clientTLS := clientTLSConfig(t, serverTLS, ca.pem, cert, key)
		conn, err := rpc.Dial(rpcAddr, clientTLS)
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_, err = rpc.Call[server.Empty, server.ServerInfo](ctx, conn, "Status.ServerInfo", &server.Empty{})
		return err
	}
	// A valid client retries a transport failure, as the agents' pool does:
	// a handshake the server cut off for taking too long is such a failure.
	waitFor(t, "an RPC with a valid client certificate", func() (bool, string) {
		err := call(true, cliCert, cliKey)
		if err != nil && !errors.Is(err, structs.ErrUnavailable) {
			t.Fatalf("a client with a valid certificate was refused: %v", err)
		}
		return err == nil, fmt.Sprint(err)
	})
	for _, tc := range []struct {
		name      string
		tls       bool
		cert, key string
	}{
		{"no TLS at all", false, "", ""},
		{"no client certificate", true, "", ""},
		{"certificate of another CA", true, rogueCert, rogueKey},
	} {
		err := call(tc.tls, tc.cert, tc.key)
		if err == nil {
			t.Fatalf("%s: RPC was accepted", tc.name)
		}
		if !errors.Is(err, structs.ErrUnavailable) {
			t.Fatalf("%s: want a transport refusal, got %v", tc.name, err)
		}
	}
}

// clientTLSConfig builds a TLS client config trusting caPEM, presenting
// cert/key when given; nil when useTLS is false.
func clientTLSConfig(t *testing.T, useTLS bool, caPEM []byte, cert, key string) *tls.Config {
	t.Helper()
	if !useTLS {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, ServerName: "server.global.drover", MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg
}

package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// alpnHTTP2 is the ALPN protocol gRPC requires a TLS server to select.
const alpnHTTP2 = "h2"

// ServerName is the name every server certificate of a region carries and
// that clients check when verify_server_hostname is on, after Nomad's
// "server.<region>.nomad": a certificate issued for a client agent cannot
// then pose as a server. An empty region is "global".
func ServerName(region string) string {
	if region == "" {
		region = "global"
	}
	return "server." + region + ".drover"
}

// TLSConfig builds the two sides of mutual TLS from PEM files: server
// requires a client certificate signed by the CA, client presents cert and
// checks the server's chain against the CA. With verifyServerHostname the
// client also checks that the server's certificate is valid for serverName
// (usually ServerName(region)); without it, any certificate of the CA is
// accepted, which is what agents that dial by IP need when the certificates
// name no addresses.
//
// All three paths empty means TLS is off: both configs are nil and the error
// is nil. Agents use one certificate for both roles, as in Nomad.
func TLSConfig(ca, cert, key string, verifyServerHostname bool, serverName string) (server *tls.Config, client *tls.Config, err error) {
	if ca == "" && cert == "" && key == "" {
		return nil, nil, nil
	}
	if ca == "" || cert == "" || key == "" {
		return nil, nil, errors.New("tls: ca_file, cert_file and key_file must all be set")
	}
	if verifyServerHostname && serverName == "" {
		return nil, nil, errors.New("tls: verify_server_hostname needs a server name")
	}
	pool, err := LoadCAFile(ca)
	if err != nil {
		return nil, nil, err
	}
	pair, err := LoadKeyPair(cert, key, time.Now())
	if err != nil {
		return nil, nil, err
	}

	server = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{alpnHTTP2},
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
	}
	if verifyServerHostname {
		client.ServerName = serverName
	} else {
		// Go verifies the chain and the host name together; to check the
		// chain alone, skip the built-in check and redo the chain part.
		client.InsecureSkipVerify = true
		client.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyChain(cs, pool)
		}
	}
	return server, client, nil
}

// LoadCAFile reads a CA bundle: PEM certificates, at least one, every
// CERTIFICATE block parseable. Errors name the file (tls.ca_file) and the
// problem.
func LoadCAFile(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_file %s: %w", path, err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file %s: certificate %d does not parse: %v", path, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("tls.ca_file %s: holds no PEM certificate (want -----BEGIN CERTIFICATE----- blocks)", path)
	}
	return pool, nil
}

// LoadKeyPair reads a certificate (chain, leaf first) and its private key,
// and checks that they parse, that the key is the certificate's and that
// the certificate is valid at now. Errors name the file (tls.cert_file or
// tls.key_file) and the problem, never the key's contents.
func LoadKeyPair(certFile, keyFile string, now time.Time) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls.cert_file %s: %w", certFile, err)
	}
	var leafDER []byte
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			leafDER = b.Bytes
			break
		}
	}
	if leafDER == nil {
		return tls.Certificate{}, fmt.Errorf("tls.cert_file %s: holds no PEM certificate (want a -----BEGIN CERTIFICATE----- block)", certFile)
	}
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls.cert_file %s: the certificate does not parse: %v", certFile, err)
	}
	if now.After(leaf.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("tls.cert_file %s: the certificate expired at %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls.key_file %s: %w", keyFile, err)
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return tls.Certificate{}, fmt.Errorf("tls.key_file %s: holds no PEM private key (want a -----BEGIN ... PRIVATE KEY----- block)", keyFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The error of crypto/tls names no file and quotes no key.
		return tls.Certificate{}, fmt.Errorf("tls.cert_file %s with tls.key_file %s: %v", certFile, keyFile, err)
	}
	return pair, nil
}

func verifyChain(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("tls: server certificate: %w", err)
	}
	return nil
}

// withH2 returns a copy of cfg that offers HTTP/2 by ALPN, which gRPC
// clients insist on.
func withH2(cfg *tls.Config) *tls.Config {
	cfg = cfg.Clone()
	if !slices.Contains(cfg.NextProtos, alpnHTTP2) {
		cfg.NextProtos = append(cfg.NextProtos, alpnHTTP2)
	}
	return cfg
}

// serverCreds are the gRPC server's transport credentials. A connection that
// a Mux already took through TLS is passed through with its TLS state, so
// handlers see the peer's certificate either way; any other connection gets
// TLS here when it is configured.
type serverCreds struct {
	tls   credentials.TransportCredentials // nil: plaintext
	plain credentials.TransportCredentials
}

func newServerCreds(cfg *tls.Config) credentials.TransportCredentials {
	c := &serverCreds{plain: insecure.NewCredentials()}
	if cfg != nil {
		c.tls = credentials.NewTLS(withH2(cfg))
	}
	return c
}

func (c *serverCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if st := tlsStateOf(conn); st != nil {
		return conn, credentials.TLSInfo{
			State:          *st,
			CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
		}, nil
	}
	if c.tls != nil {
		return c.tls.ServerHandshake(conn)
	}
	return c.plain.ServerHandshake(conn)
}

func (c *serverCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("rpc: server credentials cannot dial")
}

func (c *serverCreds) Info() credentials.ProtocolInfo {
	if c.tls != nil {
		return c.tls.Info()
	}
	return c.plain.Info()
}

func (c *serverCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

func (c *serverCreds) OverrideServerName(string) error { return nil }

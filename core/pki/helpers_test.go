package pki

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is a CA with its tokens, as a first server bootstrap makes them.
type cluster struct {
	ca     *CA
	tokens *Tokens
}

func newCluster(t *testing.T, id string) *cluster {
	t.Helper()
	ca, err := NewCA(id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := NewTokens(ca.Fingerprint(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{ca: ca, tokens: tokens}
}

// tlsCert issues a certificate for a fresh key and returns it ready for a
// CertStore.
func (c *cluster) tlsCert(t *testing.T, role Role, id string, ttl time.Duration) *tls.Certificate {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	req := IssueRequest{PublicKey: key.Public(), Role: role, ID: id, TTL: ttl}
	if role == RoleServer {
		req.DNSNames = []string{"localhost"}
		req.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	cert, err := c.ca.Issue(req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tc, err := TLSCertificate(cert.Raw, c.ca.Trust().Certificate().Raw, key)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// signWith signs tmpl for pub with an arbitrary parent and key, for
// certificates the CA would never issue.
func signWith(t *testing.T, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
	t.Helper()
	if tmpl.SerialNumber == nil {
		s, err := newSerial()
		if err != nil {
			t.Fatal(err)
		}
		tmpl.SerialNumber = s
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// secretForms are the spellings of a token's secret that must never show up
// in an error or a log line.
func secretForms(tok *JoinToken) []string {
	return []string{
		tok.Reveal(),
		secretEncoding.EncodeToString(tok.secret[:]),
		strings.ToUpper(secretEncoding.EncodeToString(tok.secret[:])),
		hex.EncodeToString(tok.secret[:]),
		hex.EncodeToString(tok.macKey()),
	}
}

func assertNoSecret(t *testing.T, what, s string, toks ...*JoinToken) {
	t.Helper()
	for _, tok := range toks {
		for _, f := range secretForms(tok) {
			if strings.Contains(s, f) {
				t.Errorf("%s reveals a join token secret: %q", what, s)
				return
			}
		}
	}
}

// syncBuffer is a log sink that several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

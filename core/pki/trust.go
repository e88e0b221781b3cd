package pki

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"
	"time"
)

// Trust is a cluster CA's certificate: what an agent needs to verify its
// peers and to know which cluster it belongs to. It holds no secret.
type Trust struct {
	clusterID   string
	fingerprint string
	cert        *x509.Certificate
	pool        *x509.CertPool

	// verified caches PeerIdentity's answers by the peer's leaf (see
	// there); at most maxVerified entries.
	verifiedMu sync.Mutex
	verified   map[[sha256.Size]byte]verifiedLeaf
}

// verifiedLeaf is a client leaf that Verify accepted, the identity it
// names, and the window in which both it and the CA are valid.
type verifiedLeaf struct {
	id                  Identity
	notBefore, notAfter time.Time
}

// maxVerified bounds Trust.verified: about a hundred bytes an entry, and
// past it the cache starts over.
const maxVerified = 1 << 16

// NewTrust reads a cluster CA certificate from PEM (as CA.CertPEM or
// Trust.CertPEM write it).
func NewTrust(certPEM []byte) (*Trust, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, invalid(ErrUntrusted, "cluster CA: want a PEM CERTIFICATE block")
	}
	return trustFromDER(b.Bytes)
}

func trustFromDER(der []byte) (*Trust, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, invalid(ErrUntrusted, "cluster CA: parse certificate: %v", err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, invalid(ErrUntrusted, "cluster CA: certificate %s is not a CA", serialOf(cert))
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		return nil, invalid(ErrUntrusted, "cluster CA: certificate %s is not self-signed: %v", serialOf(cert), err)
	}
	var clusterID string
	for _, u := range cert.URIs {
		if u.Scheme == uriScheme && (u.Path == "" || u.Path == "/") {
			clusterID = u.Host
		}
	}
	if err := validateClusterID(clusterID); err != nil {
		return nil, invalid(ErrUntrusted, "cluster CA: certificate %s names no drover://<cluster> URI: %v", serialOf(cert), err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &Trust{clusterID: clusterID, fingerprint: fingerprintOf(der), cert: cert, pool: pool}, nil
}

// ClusterID is the cluster the CA certifies.
func (t *Trust) ClusterID() string { return t.clusterID }

// Fingerprint is the SHA-256 of the CA certificate's DER, lower-case hex.
func (t *Trust) Fingerprint() string { return t.fingerprint }

// Certificate is the CA certificate. Do not modify it.
func (t *Trust) Certificate() *x509.Certificate { return t.cert }

// CertPEM is the CA certificate, PEM encoded.
func (t *Trust) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: t.cert.Raw})
}

// Pool is a pool holding the CA certificate alone, e.g. for an HTTP
// client's RootCAs.
func (t *Trust) Pool() *x509.CertPool { return t.pool.Clone() }

func (t *Trust) String() string {
	return fmt.Sprintf("pki.Trust{cluster=%s fingerprint=%s}", t.clusterID, t.fingerprint)
}

// Verify checks that chain[0] (a peer's leaf, as TLS presents it) is signed
// by the cluster CA, is valid at now, may be used for usage, and names
// exactly one identity of this cluster, and returns that identity. Other
// certificates of the chain are ignored: the CA signs leaves directly.
func (t *Trust) Verify(chain []*x509.Certificate, usage x509.ExtKeyUsage, now time.Time) (Identity, error) {
	if len(chain) == 0 {
		return Identity{}, denied(ErrUntrusted, "Permission denied: the peer presented no certificate")
	}
	leaf := chain[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:       t.pool,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return Identity{}, denied(ErrUntrusted, "Permission denied: certificate %s (%q) is not valid for cluster %s (CA %s): %v",
			serialOf(leaf), leaf.Subject.CommonName, t.clusterID, t.fingerprint, err)
	}
	return identityOf(leaf, t.clusterID)
}

// PeerIdentity is the identity of the peer of a TLS connection (for an RPC
// layer, the caller): its certificate is verified again here, so the
// answer never depends on how the listener was configured. It costs one
// signature check; cache it per connection if that matters.
//
// An RPC server asks it at every call, and the signature check was the
// largest part of a leader's CPU under node heartbeats (bench
// BenchmarkScale10k). The answer is therefore cached by the leaf's DER:
// Verify looks at the leaf alone, against this Trust's only root, so for
// the same leaf it gives the same answer at any time within the leaf's
// and the CA's validity, which a cached answer checks at each call.
func (t *Trust) PeerIdentity(cs tls.ConnectionState) (Identity, error) {
	return t.peerIdentityAt(cs, time.Now())
}

func (t *Trust) peerIdentityAt(cs tls.ConnectionState, now time.Time) (Identity, error) {
	if !cs.HandshakeComplete {
		return Identity{}, denied(ErrUntrusted, "Permission denied: TLS handshake not complete")
	}
	if len(cs.PeerCertificates) == 0 {
		return t.Verify(cs.PeerCertificates, x509.ExtKeyUsageClientAuth, now)
	}
	leaf := cs.PeerCertificates[0]
	key := sha256.Sum256(leaf.Raw)
	t.verifiedMu.Lock()
	v, ok := t.verified[key]
	t.verifiedMu.Unlock()
	if ok && !now.Before(v.notBefore) && !now.After(v.notAfter) {
		return v.id, nil
	}
	id, err := t.Verify(cs.PeerCertificates, x509.ExtKeyUsageClientAuth, now)
	if err != nil {
		return id, err
	}
	v = verifiedLeaf{id: id, notBefore: leaf.NotBefore, notAfter: leaf.NotAfter}
	if t.cert.NotBefore.After(v.notBefore) {
		v.notBefore = t.cert.NotBefore
	}
	if t.cert.NotAfter.Before(v.notAfter) {
		v.notAfter = t.cert.NotAfter
	}
	t.verifiedMu.Lock()
	if t.verified == nil || len(t.verified) >= maxVerified {
		t.verified = make(map[[sha256.Size]byte]verifiedLeaf)
	}
	t.verified[key] = v
	t.verifiedMu.Unlock()
	return id, nil
}

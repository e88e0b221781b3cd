package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"time"
)

const (
	// CAValidity is how long a new cluster CA is valid.
	CAValidity = 10 * 365 * 24 * time.Hour
	// DefaultTTL is the lifetime of an issued certificate when the request
	// names none: short, so that rotation is routine and a stolen
	// certificate soon stops working.
	DefaultTTL = 72 * time.Hour
	// MaxTTL bounds a requested lifetime.
	MaxTTL = 90 * 24 * time.Hour
	// clockSkew backdates NotBefore so that a peer whose clock is a little
	// behind accepts a certificate issued just now.
	clockSkew = 5 * time.Minute
)

// CA is the cluster's certificate authority. Its private key never leaves
// the value except through Marshal, which is meant for Raft: String,
// GoString, every fmt verb and JSON show the certificate's facts only.
type CA struct {
	key   *ecdsa.PrivateKey
	trust *Trust
}

// NewCA creates a cluster CA: an ECDSA P-256 key and a self-signed
// certificate valid for CAValidity from now, which may sign leaf
// certificates only (path length 0) and only for identity URIs of
// clusterID (a critical name constraint).
func NewCA(clusterID string, now time.Time) (*CA, error) {
	if err := validateClusterID(clusterID); err != nil {
		return nil, invalid(ErrUntrusted, "new CA: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new CA: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: "drover cluster CA " + clusterID, Organization: []string{"drover"}},
		NotBefore:                   now.Add(-clockSkew),
		NotAfter:                    now.Add(CAValidity),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLen:                  0,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		URIs:                        []*url.URL{{Scheme: uriScheme, Host: clusterID}},
		PermittedURIDomains:         []string{clusterID},
		PermittedDNSDomainsCritical: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("new CA: sign certificate: %w", err)
	}
	trust, err := trustFromDER(der)
	if err != nil {
		return nil, err
	}
	return &CA{key: key, trust: trust}, nil
}

// Marshal serialises the CA, private key included, as PEM (a CERTIFICATE
// and a PRIVATE KEY block), for Raft. Never log or return it.
func (ca *CA) Marshal() ([]byte, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("marshal CA key: %w", err)
	}
	out := ca.trust.CertPEM()
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...), nil
}

// UnmarshalCA reads what Marshal wrote and checks that the key is the
// certificate's.
func UnmarshalCA(data []byte) (*CA, error) {
	var certDER, keyDER []byte
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			certDER = b.Bytes
		case "PRIVATE KEY":
			keyDER = b.Bytes
		default:
			return nil, invalid(ErrUntrusted, "unmarshal CA: unexpected PEM block %q", b.Type)
		}
	}
	if certDER == nil || keyDER == nil {
		return nil, invalid(ErrUntrusted, "unmarshal CA: want a CERTIFICATE and a PRIVATE KEY PEM block")
	}
	trust, err := trustFromDER(certDER)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, invalid(ErrUntrusted, "unmarshal CA: parse key: %v", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, invalid(ErrUntrusted, "unmarshal CA: key is %T, want ECDSA", k)
	}
	if !key.PublicKey.Equal(trust.cert.PublicKey) {
		return nil, invalid(ErrUntrusted, "unmarshal CA: the private key does not belong to the certificate")
	}
	return &CA{key: key, trust: trust}, nil
}

// Trust is the public half of the CA, what every agent needs to verify
// peers.
func (ca *CA) Trust() *Trust { return ca.trust }

// ClusterID is the cluster the CA certifies.
func (ca *CA) ClusterID() string { return ca.trust.clusterID }

// Fingerprint is the SHA-256 of the CA certificate's DER in lower-case hex,
// as join tokens carry it.
func (ca *CA) Fingerprint() string { return ca.trust.fingerprint }

// CertPEM is the CA certificate, PEM encoded.
func (ca *CA) CertPEM() []byte { return ca.trust.CertPEM() }

// String describes the CA without key material.
func (ca CA) String() string {
	if ca.trust == nil {
		return "pki.CA{}"
	}
	return fmt.Sprintf("pki.CA{cluster=%s fingerprint=%s expires=%s}", ca.trust.clusterID, ca.trust.fingerprint, ca.trust.cert.NotAfter.UTC().Format(time.RFC3339))
}

// GoString is String, so that %#v does not print the key.
func (ca CA) GoString() string { return ca.String() }

// Format prints String for every verb, so that no verb (%d, %x of the
// struct) reaches the key's fields.
func (ca CA) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(ca.String())) }

// MarshalJSON shows the public facts only; use Marshal for Raft.
func (ca CA) MarshalJSON() ([]byte, error) {
	if ca.trust == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		ClusterID   string
		Fingerprint string
		NotAfter    time.Time
		Certificate string
	}{ca.trust.clusterID, ca.trust.fingerprint, ca.trust.cert.NotAfter.UTC(), string(ca.trust.CertPEM())})
}

// IssueRequest asks the CA for a certificate.
type IssueRequest struct {
	PublicKey crypto.PublicKey
	Role      Role
	// ID is the server name or the client's node ID.
	ID string
	// DNSNames and IPAddresses are the host names the certificate is valid
	// for, for HTTPS and gRPC host-name checks; servers only.
	DNSNames    []string
	IPAddresses []net.IP
	// TTL is the lifetime; zero means DefaultTTL.
	TTL time.Duration
}

// Issue signs a leaf certificate for req, valid from now (less a little
// clock skew) for req.TTL, and never past the CA's own expiry. It can be
// used for both server and client authentication.
func (ca *CA) Issue(req IssueRequest, now time.Time) (*x509.Certificate, error) {
	if !req.Role.valid() {
		return nil, invalid(ErrJoinRefused, "issue: role %q is neither %q nor %q", req.Role, RoleServer, RoleClient)
	}
	if err := validateID(req.ID); err != nil {
		return nil, invalid(ErrJoinRefused, "issue: %v", err)
	}
	if err := checkPublicKey(req.PublicKey); err != nil {
		return nil, invalid(ErrJoinRefused, "issue: %v", err)
	}
	if req.Role == RoleClient && (len(req.DNSNames) > 0 || len(req.IPAddresses) > 0) {
		return nil, invalid(ErrJoinRefused, "issue: client certificates name no hosts, got %d DNS names and %d IP addresses", len(req.DNSNames), len(req.IPAddresses))
	}
	for _, n := range req.DNSNames {
		if err := checkDNSName(n); err != nil {
			return nil, invalid(ErrJoinRefused, "issue: %v", err)
		}
	}
	ttl := req.TTL
	switch {
	case ttl == 0:
		ttl = DefaultTTL
	case ttl < 0 || ttl > MaxTTL:
		return nil, invalid(ErrJoinRefused, "issue: TTL %s must be between 0 and %s", ttl, MaxTTL)
	}
	notAfter := now.Add(ttl)
	if caEnd := ca.trust.cert.NotAfter; notAfter.After(caEnd) {
		notAfter = caEnd
	}
	if !notAfter.After(now) {
		return nil, denied(ErrUntrusted, "issue: the cluster CA expired at %s", ca.trust.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	id := Identity{ClusterID: ca.trust.clusterID, Role: req.Role, ID: req.ID}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.ID, OrganizationalUnit: []string{string(req.Role)}, Organization: []string{"drover"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{id.URI()},
		DNSNames:              append([]string(nil), req.DNSNames...),
		IPAddresses:           append([]net.IP(nil), req.IPAddresses...),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.trust.cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("issue %s: sign: %w", id, err)
	}
	return x509.ParseCertificate(der)
}

// IssueCSR issues for the key and host names of a CSR, after checking its
// self-signature, under role and id that the caller decided (from a join
// grant or the renewing peer's identity), never from the CSR. The CSR's host
// names are dropped for a client.
func (ca *CA) IssueCSR(csr *x509.CertificateRequest, role Role, id string, ttl time.Duration, now time.Time) (*x509.Certificate, error) {
	if err := csr.CheckSignature(); err != nil {
		return nil, denied(ErrJoinRefused, "issue: CSR signature: %v", err)
	}
	req := IssueRequest{PublicKey: csr.PublicKey, Role: role, ID: id, TTL: ttl}
	if role == RoleServer {
		req.DNSNames, req.IPAddresses = csr.DNSNames, csr.IPAddresses
	}
	return ca.Issue(req, now)
}

// Renew issues a fresh certificate for an authenticated peer, for the
// identity its current certificate proves (see Trust.PeerIdentity) and the
// key of its CSR. A peer whose certificate expired must join again.
func (ca *CA) Renew(peer Identity, csrDER []byte, ttl time.Duration, now time.Time) (*x509.Certificate, error) {
	if peer.ClusterID != ca.trust.clusterID {
		return nil, denied(ErrUntrusted, "renew: %s belongs to cluster %q, not %q", peer, peer.ClusterID, ca.trust.clusterID)
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, invalid(ErrJoinRefused, "renew: parse CSR: %v", err)
	}
	return ca.IssueCSR(csr, peer.Role, peer.ID, ttl, now)
}

func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return fmt.Errorf("public key: ECDSA curve %s is not allowed, use P-256 or P-384", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("public key: RSA key of %d bits is too short, want at least 2048", k.N.BitLen())
		}
	case nil:
		return errors.New("public key is missing")
	default:
		return fmt.Errorf("public key: type %T is not allowed, use ECDSA, Ed25519 or RSA", pub)
	}
	return nil
}

func checkDNSName(n string) error {
	if n == "" || len(n) > 253 {
		return fmt.Errorf("DNS name must be 1 to 253 characters, got %d", len(n))
	}
	if strings.Contains(n, "*") {
		return fmt.Errorf("DNS name %q: wildcards are not allowed", n)
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("DNS name %q may hold only letters, digits, '-' and '.'", n)
		}
	}
	return nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}

func fingerprintOf(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

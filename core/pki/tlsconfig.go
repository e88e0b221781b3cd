package pki

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"sync/atomic"
	"time"
)

// CertStore holds an agent's current certificate and lets it be replaced
// while listeners and connection pools keep running: the TLS configs of
// this package read it on every handshake. It is safe for concurrent use.
type CertStore struct {
	cur atomic.Pointer[tls.Certificate]
}

// NewCertStore returns a store holding cert.
func NewCertStore(cert *tls.Certificate) (*CertStore, error) {
	s := &CertStore{}
	if err := s.Replace(cert); err != nil {
		return nil, err
	}
	return s, nil
}

// Current is the certificate new handshakes present. Do not modify it.
func (s *CertStore) Current() *tls.Certificate { return s.cur.Load() }

// Replace makes cert the one new handshakes present; connections already
// established keep theirs.
func (s *CertStore) Replace(cert *tls.Certificate) error {
	if cert == nil || len(cert.Certificate) == 0 || cert.PrivateKey == nil {
		return invalid(ErrUntrusted, "certificate store: the certificate or its key is missing")
	}
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return invalid(ErrUntrusted, "certificate store: parse leaf: %v", err)
		}
		cp := *cert
		cp.Leaf = leaf
		cert = &cp
	}
	s.cur.Store(cert)
	return nil
}

// RenewAt is when the current certificate should be replaced: after two
// thirds of its lifetime, which leaves a third (a day of the default 72 h)
// for retries.
func (s *CertStore) RenewAt() time.Time {
	leaf := s.Current().Leaf
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(life * 2 / 3)
}

// NeedsRotation reports whether now is at or past RenewAt.
func (s *CertStore) NeedsRotation(now time.Time) bool { return !now.Before(s.RenewAt()) }

// ServerTLSConfig is the server side of mutual TLS inside the cluster: it
// presents the store's certificate and requires a client certificate of a
// cluster identity. Callers read the identity with Trust.PeerIdentity.
// Set NextProtos as the listener needs ("h2" for gRPC; core/rpc adds it).
func ServerTLSConfig(store *CertStore, trust *Trust) *tls.Config {
	return serverConfig(store, trust, tls.RequireAndVerifyClientCert)
}

// JoinServerTLSConfig is ServerTLSConfig for a listener that also serves
// the join exchange: a peer without a certificate is let through (it can
// only be a joiner), one with a certificate must present a cluster
// identity. Every handler but the join ones must then require an identity
// through Trust.PeerIdentity, which refuses a peer without a certificate.
func JoinServerTLSConfig(store *CertStore, trust *Trust) *tls.Config {
	return serverConfig(store, trust, tls.VerifyClientCertIfGiven)
}

func serverConfig(store *CertStore, trust *Trust, auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return store.Current(), nil
		},
		ClientAuth: auth,
		ClientCAs:  trust.Pool(),
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 && auth == tls.VerifyClientCertIfGiven {
				return nil
			}
			_, err := trust.Verify(cs.PeerCertificates, x509.ExtKeyUsageClientAuth, time.Now())
			return err
		},
	}
}

// ClientTLSConfig is the client side of mutual TLS inside the cluster: it
// presents the store's certificate and accepts a server whose certificate
// the cluster CA signed for an identity of peerRole (AnyRole: either). Host
// names are not checked: in the cluster, the identity URI is the name.
func ClientTLSConfig(store *CertStore, trust *Trust, peerRole Role) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return store.Current(), nil
		},
		// The chain and identity are checked in VerifyConnection: Go's
		// own check would insist on a host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := trust.Verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth, time.Now())
			if err != nil {
				return err
			}
			if peerRole != AnyRole && id.Role != peerRole {
				return denied(ErrNotAllowed, "Permission denied: the peer is %s, want a %s", id, peerRole)
			}
			return nil
		},
	}
}

// PinnedTLSConfig is the joiner's TLS config for the join exchange: no
// client certificate, and the server must present, in its chain, the CA
// certificate whose fingerprint the token carries and a server-role leaf
// that CA signed. Nothing else is trusted, so a man in the middle cannot
// pose as the cluster without the CA key or a server's key.
func PinnedTLSConfig(token *JoinToken) *tls.Config {
	want := token.fingerprint
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			var trust *Trust
			for _, c := range cs.PeerCertificates {
				if sum := sha256.Sum256(c.Raw); bytes.Equal(sum[:], want[:]) {
					t, err := trustFromDER(c.Raw)
					if err != nil {
						return err
					}
					trust = t
					break
				}
			}
			if trust == nil {
				return denied(ErrPinMismatch, "join: the server presented no CA certificate with fingerprint %s, the join token's: it is not a server of the token's cluster (or a man in the middle)", token.CAFingerprint())
			}
			id, err := trust.Verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth, time.Now())
			if err != nil {
				return denied(ErrPinMismatch, "join: %v", err)
			}
			if id.Role != RoleServer {
				return denied(ErrPinMismatch, "join: the peer is %s of the token's cluster, not a server", id)
			}
			return nil
		},
	}
}

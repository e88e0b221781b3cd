package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"
)

// TestPeerIdentityCache: a leaf verified once is answered from the cache
// with the same identity, but never outside its validity, and a leaf
// another CA signed is refused however often it is presented.
func TestPeerIdentityCache(t *testing.T) {
	c := newCluster(t, "c1")
	other := newCluster(t, "c2")
	trust := c.ca.Trust()
	state := func(tc *tls.Certificate) tls.ConnectionState {
		leaf, err := x509.ParseCertificate(tc.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return tls.ConnectionState{HandshakeComplete: true, PeerCertificates: []*x509.Certificate{leaf}}
	}
	cs := state(c.tlsCert(t, RoleClient, "node-1", time.Hour))
	leaf := cs.PeerCertificates[0]
	now := time.Now()

	for i := 0; i < 2; i++ { // the second answer comes from the cache
		id, err := trust.peerIdentityAt(cs, now)
		if err != nil || id.Role != RoleClient || id.ID != "node-1" || id.ClusterID != "c1" {
			t.Fatalf("try %d: identity %+v, %v; want client node-1 of c1", i, id, err)
		}
	}
	if n := len(trust.verified); n != 1 {
		t.Fatalf("%d cached leaves, want 1", n)
	}
	for _, at := range []time.Time{leaf.NotAfter.Add(time.Second), leaf.NotBefore.Add(-time.Second)} {
		if _, err := trust.peerIdentityAt(cs, at); !errors.Is(err, ErrUntrusted) {
			t.Errorf("at %s (outside %s..%s): %v, want ErrUntrusted", at, leaf.NotBefore, leaf.NotAfter, err)
		}
	}
	foreign := state(other.tlsCert(t, RoleClient, "node-1", time.Hour))
	for i := 0; i < 2; i++ {
		if _, err := trust.peerIdentityAt(foreign, now); !errors.Is(err, ErrUntrusted) {
			t.Fatalf("try %d: a leaf of another CA: %v, want ErrUntrusted", i, err)
		}
	}
	if _, err := trust.peerIdentityAt(tls.ConnectionState{HandshakeComplete: false, PeerCertificates: cs.PeerCertificates}, now); !errors.Is(err, ErrUntrusted) {
		t.Errorf("handshake not complete: %v, want ErrUntrusted", err)
	}
}

package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/structs"
)

// testCA is a cluster CA with its join tokens.
func testCA(t *testing.T) (*pki.CA, *pki.Tokens) {
	t.Helper()
	ca, err := pki.NewCA("7d1b2c3e-4f50-4a6b-8c7d-9e0f1a2b3c4d", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	toks, err := pki.NewTokens(ca.Fingerprint(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ca, toks
}

// pkiServer is a test server acting as ca (nil: without the cluster PKI),
// once it stored its CA in the state.
func pkiServer(t *testing.T, ca *pki.CA, toks *pki.Tokens) *Server {
	t.Helper()
	s := testServer(t, func(c *Config) {
		if ca != nil {
			c.PKI = &PKIConfig{Trust: ca.Trust(), LocalCA: ca, LocalTokens: toks}
		}
	})
	if ca != nil {
		waitFor(t, 10*time.Second, "the CA stored in the state", func() bool {
			p, err := s.State().PKI(nil)
			return err == nil && p != nil
		})
	}
	return s
}

// TestSnapshotRestoreChecksCA: a backup restores into a server whose
// certificates chain to the backup's CA (a fresh cluster seeded with
// extract-ca) or into one without the cluster PKI; a server of another
// CA refuses it with an invalid-request error naming both CAs and the
// way out, and its state is untouched.
func TestSnapshotRestoreChecksCA(t *testing.T) {
	ctx := context.Background()
	caA, toksA := testCA(t)
	caB, toksB := testCA(t)
	src := pkiServer(t, caA, toksA)
	node := testNode("a")
	if _, err := src.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	file := saveSnapshot(t, src)

	cases := []struct {
		name   string
		ca     *pki.CA
		toks   *pki.Tokens
		refuse bool
	}{
		{"same CA (seeded fresh cluster)", caA, toksA, false},
		{"another CA", caB, toksB, true},
		{"no cluster PKI", nil, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := pkiServer(t, tc.ca, tc.toks)
			before := dst.State().LatestIndex()
			_, err := dst.RestoreSnapshot(ctx, bytes.NewReader(file))
			if !tc.refuse {
				if err != nil {
					t.Fatal(err)
				}
				if n, err := dst.State().NodeByID(nil, node.ID); err != nil || n == nil {
					t.Fatalf("the backup's node after the restore: %v, %v", n, err)
				}
				return
			}
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("restore into another CA's server: %v (kind %q); want ErrInvalid", err, structs.KindName(err))
			}
			for _, want := range []string{caA.Fingerprint(), caB.Fingerprint(), "extract-ca", "nothing changed"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if after := dst.State().LatestIndex(); after != before {
				t.Errorf("state index moved from %d to %d on a refused restore", before, after)
			}
			if p, _ := dst.State().PKI(nil); p == nil || p.CAFingerprint != caB.Fingerprint() {
				t.Errorf("the server's own PKI was replaced: %v", p)
			}
		})
	}
}

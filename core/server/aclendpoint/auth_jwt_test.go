package aclendpoint

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/drover-org/drover/core/structs"
)

// A token naming a kid the cached JWKS lacks fetches the set again (a
// key rotation), but not more often than jwksMinRefresh; within the cache
// TTL a known kid never fetches.
func TestJWKSRefreshOnUnknownKid(t *testing.T) {
	oldKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	newKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	var fetches atomic.Int32
	var rotated atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &oldKey.PublicKey, KeyID: "old", Algorithm: "ES256"}}}
		if rotated.Load() {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &newKey.PublicKey, KeyID: "new", Algorithm: "ES256"})
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	defer srv.Close()
	m := &structs.ACLAuthMethod{Name: "m", Type: "JWT", Config: &structs.ACLAuthMethodConfig{JWKSURL: srv.URL, SigningAlgs: []string{"ES256"}}}
	sign := func(k *ecdsa.PrivateKey, kid string, now time.Time) string {
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		s, err := jwt.Signed(sig).Claims(jwt.Claims{Subject: "x", Expiry: jwt.NewNumericDate(now.Add(time.Hour))}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := New(Config{Enabled: true})
	ctx := context.Background()
	t0 := time.Now()
	steps := []struct {
		name    string
		at      time.Duration
		key     *ecdsa.PrivateKey
		kid     string
		rotate  bool
		ok      bool
		fetches int32
	}{
		{"first login fetches", 0, oldKey, "old", false, true, 1},
		{"known kid uses the cache", time.Second, oldKey, "old", false, true, 1},
		{"unknown kid too soon: no fetch", 2 * time.Second, newKey, "new", true, false, 1},
		{"unknown kid later: one fetch, verified", 40 * time.Second, newKey, "new", true, true, 2},
		{"made-up kid right after: no fetch", 41 * time.Second, newKey, "bogus", true, false, 2},
	}
	for _, s := range steps {
		rotated.Store(s.rotate)
		now := t0.Add(s.at)
		_, err := a.verifyJWT(ctx, m, sign(s.key, s.kid, now), now)
		if (err == nil) != s.ok || fetches.Load() != s.fetches {
			t.Errorf("%s: err %v, %d fetches; want ok=%v, %d fetches", s.name, err, fetches.Load(), s.ok, s.fetches)
		}
	}
}

// exp, nbf and iat with the method's leeways: 0 is Nomad's default (150 s
// on exp and nbf, 60 s of clock skew on all three), a negative leeway none.
func TestCheckTimeClaims(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) *jwt.NumericDate { return jwt.NewNumericDate(now.Add(d)) }
	none := -time.Nanosecond
	cases := []struct {
		name   string
		claims jwt.Claims
		cfg    structs.ACLAuthMethodConfig
		want   string // "" accepted
	}{
		{"valid", jwt.Claims{Expiry: at(time.Minute), NotBefore: at(-time.Minute), IssuedAt: at(-time.Minute)}, structs.ACLAuthMethodConfig{}, ""},
		{"no time claims", jwt.Claims{}, structs.ACLAuthMethodConfig{}, ""},
		{"expired within the default leeways", jwt.Claims{Expiry: at(-200 * time.Second)}, structs.ACLAuthMethodConfig{}, ""},
		{"expired past the default leeways", jwt.Claims{Expiry: at(-211 * time.Second)}, structs.ACLAuthMethodConfig{}, "expired"},
		{"expired, leeways disabled", jwt.Claims{Expiry: at(-time.Second)}, structs.ACLAuthMethodConfig{ExpirationLeeway: none, ClockSkewLeeway: none}, "expired"},
		{"expired within a set leeway", jwt.Claims{Expiry: at(-time.Hour)}, structs.ACLAuthMethodConfig{ExpirationLeeway: 2 * time.Hour}, ""},
		{"nbf within the default leeways", jwt.Claims{NotBefore: at(200 * time.Second)}, structs.ACLAuthMethodConfig{}, ""},
		{"nbf past them", jwt.Claims{NotBefore: at(211 * time.Second)}, structs.ACLAuthMethodConfig{}, "not valid yet"},
		{"nbf, leeways disabled", jwt.Claims{NotBefore: at(time.Second)}, structs.ACLAuthMethodConfig{NotBeforeLeeway: none, ClockSkewLeeway: none}, "not valid yet"},
		{"iat within the skew", jwt.Claims{IssuedAt: at(59 * time.Second)}, structs.ACLAuthMethodConfig{}, ""},
		{"iat in the future", jwt.Claims{IssuedAt: at(61 * time.Second)}, structs.ACLAuthMethodConfig{}, "issued in the future"},
	}
	for _, tc := range cases {
		err := checkTimeClaims(&tc.claims, &tc.cfg, now)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}

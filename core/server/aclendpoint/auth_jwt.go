package aclendpoint

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/drover-org/drover/core/structs"
)

// JWT verification of a login: the signature against the method's keys
// (static PEM keys or a JWKS fetched from JWKSURL), then the time claims
// with the method's leeways, the audience and the issuer, then the claim
// mappings.

// Nomad's default leeways, used when a method leaves one at 0 (a
// negative one disables the leeway).
const (
	defaultExpirationLeeway = 150 * time.Second
	defaultNotBeforeLeeway  = 150 * time.Second
	defaultClockSkewLeeway  = 60 * time.Second
)

// Bounds of a JWKS fetch.
const (
	jwksFetchTimeout = 10 * time.Second
	jwksMaxBytes     = 1 << 20
	jwksCacheTTL     = 5 * time.Minute
	jwksMinRefresh   = 30 * time.Second
)

// errInvalidLoginToken is the kind of every refusal of a login token.
func loginTokenError(format string, args ...any) error {
	return structs.NewError(structs.ErrPermissionDenied, "unable to validate provided token: "+format, args...)
}

// parsePublicKeys parses the PEM keys of a method: PUBLIC KEY (PKIX),
// RSA PUBLIC KEY (PKCS #1) or CERTIFICATE blocks. It names the key that
// does not parse.
func parsePublicKeys(pems []string) ([]any, error) {
	var out []any
	for i, p := range pems {
		rest := []byte(p)
		found := false
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			found = true
			var key any
			var err error
			switch block.Type {
			case "PUBLIC KEY":
				key, err = x509.ParsePKIXPublicKey(block.Bytes)
			case "RSA PUBLIC KEY":
				key, err = x509.ParsePKCS1PublicKey(block.Bytes)
			case "CERTIFICATE":
				var c *x509.Certificate
				if c, err = x509.ParseCertificate(block.Bytes); err == nil {
					key = c.PublicKey
				}
			default:
				err = fmt.Errorf("PEM block %q is not a public key or certificate", block.Type)
			}
			if err != nil {
				return nil, structs.NewError(structs.ErrInvalid, "auth method Config.JWTValidationPubKeys[%d]: %v", i, err)
			}
			out = append(out, key)
		}
		if !found {
			return nil, structs.NewError(structs.ErrInvalid, "auth method Config.JWTValidationPubKeys[%d]: no PEM block found", i)
		}
	}
	return out, nil
}

// jwksCache holds the key sets fetched from JWKS URLs, for jwksCacheTTL.
type jwksCache struct {
	mu      sync.Mutex
	entries map[string]jwksEntry
}

type jwksEntry struct {
	set     *jose.JSONWebKeySet
	fetched time.Time
}

// keySet returns the key set at the method's JWKSURL, fetched at most
// every jwksCacheTTL (again at once when refresh).
func (c *jwksCache) keySet(ctx context.Context, cfg *structs.ACLAuthMethodConfig, now time.Time, refresh bool) (*jose.JSONWebKeySet, error) {
	key := cfg.JWKSURL + "\x00" + cfg.JWKSCACert
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && !refresh && now.Sub(e.fetched) < jwksCacheTTL {
		return e.set, nil
	}
	set, err := fetchJWKS(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]jwksEntry{}
	}
	if len(c.entries) > 256 {
		clear(c.entries)
	}
	c.entries[key] = jwksEntry{set: set, fetched: now}
	c.mu.Unlock()
	return set, nil
}

// mayRefresh reports whether the set of cfg was fetched at least
// jwksMinRefresh before now.
func (c *jwksCache) mayRefresh(cfg *structs.ACLAuthMethodConfig, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[cfg.JWKSURL+"\x00"+cfg.JWKSCACert]
	return !ok || now.Sub(e.fetched) >= jwksMinRefresh
}

func fetchJWKS(ctx context.Context, cfg *structs.ACLAuthMethodConfig) (*jose.JSONWebKeySet, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.JWKSCACert != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(cfg.JWKSCACert)) {
			return nil, structs.NewError(structs.ErrInvalid, "auth method Config.JWKSCACert: no certificate found")
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	defer transport.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.JWKSURL, nil)
	if err != nil {
		return nil, structs.NewError(structs.ErrInvalid, "auth method Config.JWKSURL: %v", err)
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return nil, structs.NewError(structs.ErrUnavailable, "fetching JWKS from %s: %v", cfg.JWKSURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, structs.NewError(structs.ErrUnavailable, "fetching JWKS from %s: %s", cfg.JWKSURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, jwksMaxBytes+1))
	if err != nil {
		return nil, structs.NewError(structs.ErrUnavailable, "fetching JWKS from %s: %v", cfg.JWKSURL, err)
	}
	if len(body) > jwksMaxBytes {
		return nil, structs.NewError(structs.ErrUnavailable, "fetching JWKS from %s: larger than %d bytes", cfg.JWKSURL, jwksMaxBytes)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, structs.NewError(structs.ErrUnavailable, "JWKS from %s: %v", cfg.JWKSURL, err)
	}
	return &set, nil
}

// signingAlgs are the algorithms the method accepts (RS256 by default, as
// Nomad's).
func signingAlgs(cfg *structs.ACLAuthMethodConfig) []jose.SignatureAlgorithm {
	names := cfg.SigningAlgs
	if len(names) == 0 {
		names = []string{"RS256"}
	}
	out := make([]jose.SignatureAlgorithm, 0, len(names))
	for _, n := range names {
		out = append(out, jose.SignatureAlgorithm(n))
	}
	return out
}

func leeway(d, def time.Duration) time.Duration {
	switch {
	case d < 0:
		return 0
	case d == 0:
		return def
	}
	return d
}

// verifyJWT checks the token's signature and claims against the method
// and returns its claims.
func (a *ACL) verifyJWT(ctx context.Context, m *structs.ACLAuthMethod, raw string, now time.Time) (map[string]any, error) {
	if m.Type != structs.ACLAuthMethodTypeJWT {
		return nil, structs.NewError(structs.ErrInvalid, "auth method %q is of type %s: drover logs in through JWT methods only (no OIDC flow is served)", m.Name, m.Type)
	}
	cfg := m.Config
	if cfg == nil {
		return nil, structs.NewError(structs.ErrInvalid, "auth method %q has no Config", m.Name)
	}
	if len(raw) > structs.MaxACLLoginTokenBytes {
		return nil, loginTokenError("LoginToken is larger than %d bytes", structs.MaxACLLoginTokenBytes)
	}
	tok, err := jwt.ParseSigned(raw, signingAlgs(cfg))
	if err != nil {
		// Covers alg "none", HMAC and any algorithm the method does not
		// accept.
		return nil, loginTokenError("%v", err)
	}
	var claims map[string]any
	var std jwt.Claims
	verified := false
	if len(cfg.JWTValidationPubKeys) > 0 {
		keys, err := parsePublicKeys(cfg.JWTValidationPubKeys)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if err := tok.Claims(k, &claims, &std); err == nil {
				verified = true
				break
			}
		}
	} else {
		verified, err = a.verifyWithJWKS(ctx, tok, cfg, now, &claims, &std)
		if err != nil {
			return nil, err
		}
	}
	if !verified {
		return nil, loginTokenError("no known key verifies the signature")
	}
	if err := checkTimeClaims(&std, cfg, now); err != nil {
		return nil, err
	}
	if len(cfg.BoundAudiences) > 0 && !slices.ContainsFunc(cfg.BoundAudiences, func(aud string) bool { return std.Audience.Contains(aud) }) {
		return nil, loginTokenError("invalid audience (aud) claim: audience claim does not match any expected audience")
	}
	if len(cfg.BoundIssuer) > 0 && !slices.Contains(cfg.BoundIssuer, std.Issuer) {
		return nil, loginTokenError("invalid issuer (iss) claim")
	}
	return claims, nil
}

func (a *ACL) verifyWithJWKS(ctx context.Context, tok *jwt.JSONWebToken, cfg *structs.ACLAuthMethodConfig, now time.Time, claims *map[string]any, std *jwt.Claims) (bool, error) {
	kid := ""
	if len(tok.Headers) > 0 {
		kid = tok.Headers[0].KeyID
	}
	set, err := a.jwks.keySet(ctx, cfg, now, false)
	if err != nil {
		return false, err
	}
	// A kid the cached set lacks may follow a key rotation: fetch the set
	// again, at most every jwksMinRefresh (so that made-up kids cannot
	// turn logins into a flood of fetches).
	if kid != "" && len(set.Key(kid)) == 0 && a.jwks.mayRefresh(cfg, now) {
		if set, err = a.jwks.keySet(ctx, cfg, now, true); err != nil {
			return false, err
		}
	}
	keys := set.Keys
	if kid != "" {
		keys = set.Key(kid)
	}
	for _, k := range keys {
		if !k.Valid() || !k.IsPublic() {
			continue
		}
		if err := tok.Claims(k.Key, claims, std); err == nil {
			return true, nil
		}
	}
	return false, nil
}

// checkTimeClaims checks exp, nbf and iat with the method's leeways.
func checkTimeClaims(c *jwt.Claims, cfg *structs.ACLAuthMethodConfig, now time.Time) error {
	skew := leeway(cfg.ClockSkewLeeway, defaultClockSkewLeeway)
	if c.Expiry != nil && now.After(c.Expiry.Time().Add(leeway(cfg.ExpirationLeeway, defaultExpirationLeeway)+skew)) {
		return loginTokenError("token is expired (exp)")
	}
	if c.NotBefore != nil && now.Add(leeway(cfg.NotBeforeLeeway, defaultNotBeforeLeeway)+skew).Before(c.NotBefore.Time()) {
		return loginTokenError("token not valid yet (nbf)")
	}
	if c.IssuedAt != nil && now.Add(skew).Before(c.IssuedAt.Time()) {
		return loginTokenError("token issued in the future (iat)")
	}
	return nil
}

// mapClaims turns a login's claims into the selector data: each
// ClaimMappings claim (a scalar) into value.<target>, each
// ListClaimMappings claim (a list of scalars, or one) into
// list.<target>. A claim name starting with "/" is a JSON pointer into
// nested claims. A claim of another shape is refused.
func mapClaims(claims map[string]any, cfg *structs.ACLAuthMethodConfig) (*claimData, error) {
	d := &claimData{Value: map[string]string{}, List: map[string][]string{}}
	for claim, target := range cfg.ClaimMappings {
		v, ok := claimAt(claims, claim)
		if !ok {
			continue
		}
		s, ok := scalarString(v)
		if !ok {
			return nil, structs.NewError(structs.ErrInvalid, "claim %q: ClaimMappings needs a string, number or boolean", bounded(claim))
		}
		d.Value[target] = s
	}
	for claim, target := range cfg.ListClaimMappings {
		v, ok := claimAt(claims, claim)
		if !ok {
			continue
		}
		var list []string
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				s, ok := scalarString(e)
				if !ok {
					return nil, structs.NewError(structs.ErrInvalid, "claim %q: ListClaimMappings needs a list of strings, numbers or booleans", bounded(claim))
				}
				list = append(list, s)
			}
		default:
			s, ok := scalarString(v)
			if !ok {
				return nil, structs.NewError(structs.ErrInvalid, "claim %q: ListClaimMappings needs a list of strings", bounded(claim))
			}
			list = []string{s}
		}
		d.List[target] = list
	}
	return d, nil
}

func claimAt(claims map[string]any, name string) (any, bool) {
	if !strings.HasPrefix(name, "/") {
		v, ok := claims[name]
		return v, ok
	}
	var cur any = claims
	for _, part := range strings.Split(name[1:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case json.Number:
		return v.String(), true
	}
	return "", false
}

// errNoBindings is Nomad's refusal of a login no binding rule grants
// anything to.
var errNoBindings = structs.NewError(structs.ErrPermissionDenied, "no role or policy bindings matched")

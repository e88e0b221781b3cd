package httpapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/server/aclendpoint"
)

var _ ACLAuthServer = (*aclendpoint.ACL)(nil)

// jwtIssuer signs test JWTs with a key made for the test.
type jwtIssuer struct {
	t      *testing.T
	key    any
	alg    jose.SignatureAlgorithm
	pubPEM string
	kid    string
}

func newRSAIssuer(t *testing.T) *jwtIssuer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &jwtIssuer{t: t, key: k, alg: jose.RS256, pubPEM: pemPublic(t, &k.PublicKey), kid: "rsa-1"}
}

func newECIssuer(t *testing.T) *jwtIssuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &jwtIssuer{t: t, key: k, alg: jose.ES256, pubPEM: pemPublic(t, &k.PublicKey), kid: "ec-1"}
}

func pemPublic(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// sign makes a JWT with the standard claims std and the extra claims.
func (i *jwtIssuer) sign(std jwt.Claims, extra map[string]any) string {
	i.t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: i.alg, Key: i.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", i.kid))
	if err != nil {
		i.t.Fatal(err)
	}
	out, err := jwt.Signed(sig).Claims(std).Claims(extra).Serialize()
	if err != nil {
		i.t.Fatal(err)
	}
	return out
}

// unsignedJWT is a token with alg "none".
func unsignedJWT(t *testing.T, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return h + "." + enc.EncodeToString(b) + "."
}

// hmacJWT signs with HS256, using the public key's PEM as the secret: the
// algorithm confusion attack on verifiers that take the key as a secret.
func hmacJWT(t *testing.T, secret string, std jwt.Claims) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(secret)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jwt.Signed(sig).Claims(std).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	testIssuer   = "https://ci.example"
	testAudience = "drover"
)

func goodClaims(sub string) jwt.Claims {
	now := time.Now()
	return jwt.Claims{Issuer: testIssuer, Subject: sub, Audience: jwt.Audience{testAudience},
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		Expiry: jwt.NewNumericDate(now.Add(10 * time.Minute))}
}

// A CI system logs in with its own signed JWT through Nomad's API client:
// the binding rules give the token its role, policy or management, every
// bad token is refused and no token is made for it.
func TestACLJWTLoginEndToEnd(t *testing.T) {
	c := aclTestServer(t, true)
	mgmt, _, err := c.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecretID(mgmt.SecretID)
	rsaIss, ecIss, stranger := newRSAIssuer(t), newECIssuer(t), newRSAIssuer(t)

	for _, p := range []*nomadapi.ACLPolicy{
		{Name: "ci-read", Rules: `namespace "default" { policy = "read" }`},
		{Name: "web-deploy", Rules: `namespace "default" { policy = "write" }`},
	} {
		if _, err := c.ACLPolicies().Upsert(p, nil); err != nil {
			t.Fatal(err)
		}
	}
	role, _, err := c.ACLRoles().Create(&nomadapi.ACLRole{Name: "deployers", Policies: []*nomadapi.ACLRolePolicyLink{{Name: "ci-read"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	method := &nomadapi.ACLAuthMethod{Name: "ci", Type: "JWT", TokenLocality: "global", MaxTokenTTL: 30 * time.Minute, Default: true,
		TokenNameFormat: "${auth_method_type}-${auth_method_name}-${value.sub}",
		Config: &nomadapi.ACLAuthMethodConfig{
			JWTValidationPubKeys: []string{rsaIss.pubPEM, ecIss.pubPEM},
			BoundAudiences:       []string{testAudience}, BoundIssuer: []string{testIssuer},
			SigningAlgs:       []string{"RS256", "ES256"},
			ClaimMappings:     map[string]string{"sub": "sub", "/project/name": "project"},
			ListClaimMappings: map[string]string{"groups": "groups"},
		}}
	got, _, err := c.ACLAuthMethods().Create(method, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxTokenTTL != 30*time.Minute || got.Config == nil || len(got.Config.JWTValidationPubKeys) != 2 || got.CreateIndex == 0 {
		t.Fatalf("created method: %+v", got)
	}
	if _, _, err := c.ACLAuthMethods().Create(method, nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second create of the same name: %v; want refused", err)
	}
	for _, r := range []*nomadapi.ACLBindingRule{
		{AuthMethod: "ci", Selector: `"deployers" in list.groups`, BindType: "role", BindName: "deployers"},
		{AuthMethod: "ci", Selector: `value.project == "web" and not (value.sub == "blocked")`, BindType: "policy", BindName: "${value.project}-deploy"},
		{AuthMethod: "ci", Selector: `value.sub == "root-ci"`, BindType: "management"},
	} {
		if _, _, err := c.ACLBindingRules().Create(r, nil); err != nil {
			t.Fatalf("binding rule %q: %v", r.Selector, err)
		}
	}

	type want struct {
		status   int    // 0: success
		contains string // in the error
		typ      string
		roles    []string
		policies []string
	}
	exp := goodClaims("old")
	exp.Expiry = jwt.NewNumericDate(time.Now().Add(-time.Hour))
	exp.IssuedAt = jwt.NewNumericDate(time.Now().Add(-2 * time.Hour))
	exp.NotBefore = nil
	future := goodClaims("later")
	future.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour))
	wrongAud := goodClaims("x")
	wrongAud.Audience = jwt.Audience{"someone-else"}
	wrongIss := goodClaims("x")
	wrongIss.Issuer = "https://evil.example"
	cases := []struct {
		name   string
		method string
		token  string
		want   want
	}{
		{"role by group (RS256)", "ci", rsaIss.sign(goodClaims("runner-1"), map[string]any{"groups": []string{"a", "deployers"}}),
			want{typ: "client", roles: []string{"deployers"}}},
		{"policy by interpolated claim (ES256, nested claim)", "ci", ecIss.sign(goodClaims("runner-2"), map[string]any{"project": map[string]any{"name": "web"}}),
			want{typ: "client", policies: []string{"web-deploy"}}},
		{"management", "", rsaIss.sign(goodClaims("root-ci"), nil), want{typ: "management"}},
		{"no rule matches", "ci", rsaIss.sign(goodClaims("blocked"), map[string]any{"project": map[string]any{"name": "web"}}),
			want{status: 403, contains: "no role or policy bindings matched"}},
		{"alg none", "ci", unsignedJWT(t, map[string]any{"sub": "root-ci", "iss": testIssuer, "aud": testAudience}),
			want{status: 403, contains: "unable to validate provided token"}},
		{"HS256 with the public key as secret", "ci", hmacJWT(t, rsaIss.pubPEM, goodClaims("root-ci")),
			want{status: 403, contains: "unable to validate provided token"}},
		{"wrong key", "ci", stranger.sign(goodClaims("root-ci"), nil), want{status: 403, contains: "no known key"}},
		{"expired", "ci", rsaIss.sign(exp, map[string]any{"groups": []string{"deployers"}}), want{status: 403, contains: "expired"}},
		{"not yet valid", "ci", rsaIss.sign(future, map[string]any{"groups": []string{"deployers"}}), want{status: 403, contains: "not valid yet"}},
		{"wrong audience", "ci", rsaIss.sign(wrongAud, map[string]any{"groups": []string{"deployers"}}), want{status: 403, contains: "audience"}},
		{"wrong issuer", "ci", rsaIss.sign(wrongIss, map[string]any{"groups": []string{"deployers"}}), want{status: 403, contains: "issuer"}},
		{"not a JWT", "ci", "garbage", want{status: 403, contains: "unable to validate provided token"}},
		{"unknown method", "nosuch", rsaIss.sign(goodClaims("root-ci"), nil), want{status: 404, contains: `auth-method "nosuch" not found`}},
	}
	anon := aclClientLike(t, c, "")
	tokensBefore, _, err := c.ACLTokens().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok, _, err := anon.ACLAuth().Login(&nomadapi.ACLLoginRequest{AuthMethodName: tc.method, LoginToken: tc.token}, nil)
			if tc.want.status != 0 {
				if err == nil || !strings.Contains(err.Error(), strconv.Itoa(tc.want.status)) || !strings.Contains(err.Error(), tc.want.contains) {
					t.Fatalf("login: %v; want %d with %q", err, tc.want.status, tc.want.contains)
				}
				return
			}
			if err != nil {
				t.Fatalf("login: %v", err)
			}
			made++
			if !strings.HasPrefix(tok.Name, "JWT-ci-") || len(tok.Name) <= len("JWT-ci-") {
				t.Errorf("token name %q; want the method's TokenNameFormat filled", tok.Name)
			}
			if tok.Type != tc.want.typ || !tok.Global || tok.ExpirationTime == nil {
				t.Fatalf("token: %+v", tok)
			}
			if life := tok.ExpirationTime.Sub(tok.CreateTime); life != 30*time.Minute {
				t.Errorf("token lives %s; want the method's MaxTokenTTL 30m", life)
			}
			var roles []string
			for _, r := range tok.Roles {
				roles = append(roles, r.Name)
				if r.Name == "deployers" && r.ID != role.ID {
					t.Errorf("role link %+v; want ID %s", r, role.ID)
				}
			}
			if strings.Join(roles, ",") != strings.Join(tc.want.roles, ",") || strings.Join(tok.Policies, ",") != strings.Join(tc.want.policies, ",") {
				t.Errorf("roles %v policies %v; want %v %v", roles, tok.Policies, tc.want.roles, tc.want.policies)
			}
			// The token works, and grants what its bindings say.
			tc2 := aclClientLike(t, c, tok.SecretID)
			if _, _, err := tc2.Jobs().List(nil); err != nil {
				t.Errorf("job list with the login token: %v", err)
			}
			_, _, err = tc2.ACLTokens().List(nil)
			if (tok.Type == "management") != (err == nil) {
				t.Errorf("token list with a %s login token: %v", tok.Type, err)
			}
		})
	}
	tokensAfter, _, err := c.ACLTokens().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokensAfter) != len(tokensBefore)+made {
		t.Errorf("%d tokens after %d successful logins (had %d): a refused login made a token", len(tokensAfter), made, len(tokensBefore))
	}
}

// Auth methods and binding rules: CRUD through Nomad's client, bad input
// refused with the field named, and only management may read or write
// them (the method list is open, as `login` reads it).
func TestACLAuthMethodAndBindingRuleCRUD(t *testing.T) {
	c := aclTestServer(t, true)
	mgmt, _, err := c.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecretID(mgmt.SecretID)
	iss := newRSAIssuer(t)
	good := func(name string) *nomadapi.ACLAuthMethod {
		return &nomadapi.ACLAuthMethod{Name: name, Type: "JWT", TokenLocality: "local", MaxTokenTTL: time.Hour,
			Config: &nomadapi.ACLAuthMethodConfig{JWTValidationPubKeys: []string{iss.pubPEM}, ExpirationLeeway: time.Minute}}
	}
	bad := []struct {
		name   string
		mutate func(m *nomadapi.ACLAuthMethod)
		want   string
	}{
		{"bad name", func(m *nomadapi.ACLAuthMethod) { m.Name = "no spaces" }, "auth method name"},
		{"SAML", func(m *nomadapi.ACLAuthMethod) { m.Type = "SAML" }, `Type "SAML"`},
		{"OIDC discovery on a JWT method", func(m *nomadapi.ACLAuthMethod) { m.Config.OIDCDiscoveryURL = "https://x" }, "OIDC discovery is not supported"},
		{"no keys", func(m *nomadapi.ACLAuthMethod) { m.Config.JWTValidationPubKeys = nil }, "one of JWTValidationPubKeys or JWKSURL"},
		{"bad PEM", func(m *nomadapi.ACLAuthMethod) { m.Config.JWTValidationPubKeys = []string{"not a key"} }, "JWTValidationPubKeys[0]: no PEM block"},
		{"alg none", func(m *nomadapi.ACLAuthMethod) { m.Config.SigningAlgs = []string{"none"} }, "SigningAlgs[0]"},
		{"HS256", func(m *nomadapi.ACLAuthMethod) { m.Config.SigningAlgs = []string{"HS256"} }, "SigningAlgs[0]"},
		{"TTL too long", func(m *nomadapi.ACLAuthMethod) { m.MaxTokenTTL = 1000 * time.Hour }, "MaxTokenTTL"},
		{"bad locality", func(m *nomadapi.ACLAuthMethod) { m.TokenLocality = "planet" }, "TokenLocality"},
		{"bad name format", func(m *nomadapi.ACLAuthMethod) { m.TokenNameFormat = "${list.groups}" }, "TokenNameFormat"},
		{"mapping clash", func(m *nomadapi.ACLAuthMethod) {
			m.Config.ClaimMappings = map[string]string{"a": "x"}
			m.Config.ListClaimMappings = map[string]string{"b": "x"}
		}, "already mapped"},
	}
	for _, tc := range bad {
		m := good("m-" + strings.ReplaceAll(tc.name, " ", "-"))
		tc.mutate(m)
		if _, _, err := c.ACLAuthMethods().Create(m, nil); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want 400 naming %q", tc.name, err, tc.want)
		}
	}
	if list, _, err := c.ACLAuthMethods().List(nil); err != nil || len(list) != 0 {
		t.Fatalf("refused methods were stored: %+v, %v", list, err)
	}

	m, _, err := c.ACLAuthMethods().Create(good("gitlab"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.ExpirationLeeway != time.Minute {
		t.Errorf("ExpirationLeeway read back as %s", m.Config.ExpirationLeeway)
	}
	m.Default = true
	upd, _, err := c.ACLAuthMethods().Update(m, nil)
	if err != nil || !upd.Default || upd.ModifyIndex <= m.ModifyIndex || !upd.CreateTime.Equal(m.CreateTime) {
		t.Fatalf("update: %+v, %v", upd, err)
	}
	if _, _, err := c.ACLAuthMethods().Update(good("nosuch"), nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("update of a missing method: %v; want 404", err)
	}

	badRules := []struct {
		rule *nomadapi.ACLBindingRule
		want string
	}{
		{&nomadapi.ACLBindingRule{AuthMethod: "gitlab", Selector: `value.sub matches "x.*"`, BindType: "role", BindName: "r"}, "not supported"},
		{&nomadapi.ACLBindingRule{AuthMethod: "gitlab", Selector: `value.sub ==`, BindType: "role", BindName: "r"}, "column 13"},
		{&nomadapi.ACLBindingRule{AuthMethod: "gitlab", Selector: `claims.sub == "x"`, BindType: "role", BindName: "r"}, "value.<claim> or list.<claim>"},
		{&nomadapi.ACLBindingRule{AuthMethod: "gitlab", Selector: `list.groups == "x"`, BindType: "role", BindName: "r"}, "use contains or in"},
		{&nomadapi.ACLBindingRule{AuthMethod: "gitlab", BindType: "role"}, "BindName: required"},
		{&nomadapi.ACLBindingRule{AuthMethod: "gitlab", BindType: "token", BindName: "x"}, "BindType"},
		{&nomadapi.ACLBindingRule{AuthMethod: "gitlab", BindType: "policy", BindName: "${list.groups}"}, "only ${value.<claim>}"},
		{&nomadapi.ACLBindingRule{AuthMethod: "nosuch", BindType: "management"}, "no such auth method"},
	}
	for _, tc := range badRules {
		if _, _, err := c.ACLBindingRules().Create(tc.rule, nil); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rule %+v: %v; want 400 naming %q", tc.rule, err, tc.want)
		}
	}
	rule, _, err := c.ACLBindingRules().Create(&nomadapi.ACLBindingRule{AuthMethod: "gitlab", Description: "d",
		Selector: `"ops" in list.groups or value.sub != "x"`, BindType: "policy", BindName: "ops"}, nil)
	if err != nil || rule.ID == "" {
		t.Fatalf("rule create: %+v, %v", rule, err)
	}
	rule.Description = "changed"
	if r2, _, err := c.ACLBindingRules().Update(rule, nil); err != nil || r2.Description != "changed" || r2.ID != rule.ID {
		t.Fatalf("rule update: %+v, %v", r2, err)
	}
	if rules, _, err := c.ACLBindingRules().List(nil); err != nil || len(rules) != 1 {
		t.Fatalf("rule list: %+v, %v", rules, err)
	}

	// Access: anonymous lists methods (not their config), nothing more.
	anon := aclClientLike(t, c, "")
	if list, _, err := anon.ACLAuthMethods().List(nil); err != nil || len(list) != 1 || !list[0].Default || list[0].Type != "JWT" {
		t.Errorf("anonymous method list: %+v, %v", list, err)
	}
	if _, _, err := anon.ACLAuthMethods().Get("gitlab", nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("anonymous method read: %v; want 403", err)
	}
	if _, _, err := anon.ACLBindingRules().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("anonymous rule list: %v; want 403", err)
	}

	// An OIDC method without configuration is kept as Nomad's API tests
	// write it, but no login goes through it.
	oidc := &nomadapi.ACLAuthMethod{Name: "auth0", Type: "OIDC", TokenLocality: "local", MaxTokenTTL: 10 * time.Hour}
	if _, _, err := c.ACLAuthMethods().Create(oidc, nil); err != nil {
		t.Fatalf("OIDC method: %v", err)
	}
	oidc.TokenLocality = "global"
	if got, _, err := c.ACLAuthMethods().Update(oidc, nil); err != nil || got.TokenLocality != "global" || got.Config != nil {
		t.Fatalf("OIDC method update: %+v, %v", got, err)
	}
	if _, _, err := anon.ACLAuth().Login(&nomadapi.ACLLoginRequest{AuthMethodName: "auth0", LoginToken: "x"}, nil); err == nil ||
		!strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "JWT methods only") {
		t.Errorf("login through an OIDC method: %v; want 400", err)
	}

	// Deleting the method deletes its rules.
	if _, err := c.ACLAuthMethods().Delete("gitlab", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ACLBindingRules().Get(rule.ID, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("rule of a deleted method: %v; want 404", err)
	}
	if _, err := c.ACLAuthMethods().Delete("gitlab", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("second delete: %v; want 404", err)
	}
}

// A method whose keys come from a JWKS URL (served over TLS with the
// method's JWKSCACert) verifies the key the token's kid names.
func TestACLJWTLoginWithJWKS(t *testing.T) {
	iss := newRSAIssuer(t)
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &iss.key.(*rsa.PrivateKey).PublicKey, KeyID: iss.kid, Algorithm: "RS256", Use: "sig"}}}
	jwks := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(set)
	}))
	defer jwks.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: jwks.Certificate().Raw}))

	c := aclTestServer(t, true)
	mgmt, _, err := c.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecretID(mgmt.SecretID)
	if _, err := c.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "readers", Rules: `namespace "default" { policy = "read" }`}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ACLAuthMethods().Create(&nomadapi.ACLAuthMethod{Name: "jwks", Type: "JWT", MaxTokenTTL: time.Hour,
		Config: &nomadapi.ACLAuthMethodConfig{JWKSURL: jwks.URL, JWKSCACert: caPEM, BoundAudiences: []string{testAudience}}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ACLBindingRules().Create(&nomadapi.ACLBindingRule{AuthMethod: "jwks", BindType: "policy", BindName: "readers"}, nil); err != nil {
		t.Fatal(err)
	}
	anon := aclClientLike(t, c, "")
	tok, _, err := anon.ACLAuth().Login(&nomadapi.ACLLoginRequest{AuthMethodName: "jwks", LoginToken: iss.sign(goodClaims("svc"), nil)}, nil)
	if err != nil || tok.Type != "client" || strings.Join(tok.Policies, ",") != "readers" || tok.Global {
		t.Fatalf("JWKS login: %+v, %v", tok, err)
	}
	other := newRSAIssuer(t)
	if _, _, err := anon.ACLAuth().Login(&nomadapi.ACLLoginRequest{AuthMethodName: "jwks", LoginToken: other.sign(goodClaims("svc"), nil)}, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("JWKS login with a key not in the set: %v; want 403", err)
	}
}

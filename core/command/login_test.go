package command

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/drover-org/drover/core/command/clitest"
)

// A CI system's flow through the CLI against a real server: the operator
// creates a JWT auth method (its config from a file) and a binding rule,
// the CI job logs in with its own signed token, and the token it gets
// works; a token signed by another key is refused.
func TestLoginWithJWTThroughCLI(t *testing.T) {
	addr, mgmt := testAgent(t)
	asMgmt := map[string]string{"DROVER_ADDR": addr, "DROVER_TOKEN": mgmt}
	anon := map[string]string{"DROVER_ADDR": addr}
	run := func(env map[string]string, args ...string) clitest.Result {
		t.Helper()
		return clitest.RunCLI(t, env, "", nil, args...)
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{
		"JWTValidationPubKeys": []string{string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))},
		"BoundAudiences":       []string{"drover"},
		"ListClaimMappings":    map[string]string{"groups": "groups"},
	})
	cfgFile := filepath.Join(t.TempDir(), "jwt.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(t.TempDir(), "readers.hcl")
	if err := os.WriteFile(policy, []byte(`namespace "default" { policy = "read" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	clitest.WantCode(t, run(asMgmt, "acl", "policy", "apply", "readers", policy), 0)

	r := run(asMgmt, "acl", "auth-method", "create", "-name", "ci", "-type", "jwt", "-max-token-ttl", "20m",
		"-token-locality", "global", "-default", "-config", "@"+cfgFile)
	clitest.WantCode(t, r, 0)
	r = run(asMgmt, "acl", "auth-method", "update", "-default=false", "ci")
	clitest.WantContains(t, "auth-method update", r.Out, "Default       = false")
	r = run(asMgmt, "acl", "auth-method", "update", "-default", "ci")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "auth-method create", r.Out, "Name          = ci", "Type          = JWT", "Max Token TTL = 20m0s", "Default       = true")
	r = run(anon, "acl", "auth-method", "list")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "auth-method list (anonymous)", r.Out, "ci", "JWT", "true")
	r = run(anon, "acl", "auth-method", "info", "ci")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "auth-method info (anonymous)", r.ErrOut, "403")

	r = run(asMgmt, "acl", "binding-rule", "create", "-auth-method", "ci", "-bind-type", "policy", "-bind-name", "readers",
		"-selector", `"ci" in list.groups`, "-description", "CI reads")
	clitest.WantCode(t, r, 0)
	id := regexp.MustCompile(`ID\s+= ([0-9a-f-]{36})`).FindStringSubmatch(r.Out)
	if id == nil {
		t.Fatalf("binding-rule create printed no ID: %s", r.Out)
	}
	r = run(asMgmt, "acl", "binding-rule", "update", "-description", "CI jobs read", id[1])
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "binding-rule update", r.Out, "Description  = CI jobs read", `Selector     = "\"ci\" in list.groups"`)
	r = run(asMgmt, "acl", "binding-rule", "create", "-auth-method", "ci", "-bind-type", "policy", "-bind-name", "x", "-selector", "value.a =~ b")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "bad selector", r.ErrOut, "Selector", "column")

	sign := func(k *rsa.PrivateKey, groups []string) string {
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, nil)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		tok, err := jwt.Signed(sig).Claims(jwt.Claims{Subject: "pipeline-7", Audience: jwt.Audience{"drover"},
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(5 * time.Minute))}).
			Claims(map[string]any{"groups": groups}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// Without -method: the default method.
	r = run(anon, "login", "-login-token", sign(key, []string{"ci"}))
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "login", r.Out, "Successfully logged in via JWT and ci", "readers")
	secret := regexp.MustCompile(`Secret ID\s+= ([0-9a-f-]{36})`).FindStringSubmatch(r.Out)
	if secret == nil {
		t.Fatalf("login printed no secret: %s", r.Out)
	}
	r = run(map[string]string{"DROVER_ADDR": addr, "DROVER_TOKEN": secret[1]}, "acl", "token", "self")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "token self", r.Out, "token created via login: ci", "readers")

	r = run(anon, "login", "-method", "ci", "-login-token", sign(key, []string{"other"}))
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "login without a matching rule", r.ErrOut, "no role or policy bindings matched")
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	r = run(anon, "login", "-method", "ci", "-login-token", sign(other, []string{"ci"}))
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "login with another key", r.ErrOut, "unable to validate provided token")

	clitest.WantCode(t, run(asMgmt, "acl", "binding-rule", "delete", id[1]), 0)
	r = run(asMgmt, "acl", "auth-method", "delete", "ci")
	clitest.WantCode(t, r, 0)
	if r = run(asMgmt, "acl", "auth-method", "list"); !strings.Contains(r.Out, "No ACL auth methods found") {
		t.Errorf("after delete: %s", r.Out)
	}
}

// The autopilot commands against a real server: the configuration read,
// changed by set-config (only the given flags) and the health.
func TestAutopilotCommands(t *testing.T) {
	addr, mgmt := testAgent(t)
	env := map[string]string{"DROVER_ADDR": addr, "DROVER_TOKEN": mgmt}
	r := clitest.RunCLI(t, env, "", nil, "operator", "autopilot", "get-config")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "get-config", r.Out, "CleanupDeadServers      = true", "LastContactThreshold    = 200ms",
		"MaxTrailingLogs         = 250", "ServerStabilizationTime = 10s")
	r = clitest.RunCLI(t, env, "", nil, "operator", "autopilot", "set-config", "-cleanup-dead-servers=false", "-min-quorum", "3",
		"-server-stabilization-time", "30s")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "set-config", r.Out, "Configuration updated!")
	r = clitest.RunCLI(t, env, "", nil, "operator", "autopilot", "get-config")
	clitest.WantContains(t, "get-config after set", r.Out, "CleanupDeadServers      = false", "MinQuorum               = 3",
		"ServerStabilizationTime = 30s", "LastContactThreshold    = 200ms")
	r = clitest.RunCLI(t, env, "", nil, "operator", "autopilot", "set-config", "-last-contact-threshold", "0s")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "set-config refused", r.ErrOut, "LastContactThreshold")
	r = clitest.RunCLI(t, env, "", nil, "operator", "autopilot", "health")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "health", r.Out, "Healthy          = true", "FailureTolerance = 0", "alive")
	r = clitest.RunCLI(t, map[string]string{"DROVER_ADDR": addr}, "", nil, "operator", "autopilot", "health")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "health without a token", r.ErrOut, "403")
}

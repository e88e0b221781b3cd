package httpapi

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"
)

// aclAuthMatrixCases are the ACL matrix's cases of the auth method,
// binding rule, login and autopilot routes. The cases run in order, so
// the method the management caller creates first is there for the
// binding rule cases.
func aclAuthMatrixCases(t testing.TB, nobody string) []matrixCase {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub := pemPublic(t, &k.PublicKey)
	method := func(name string) map[string]any {
		return map[string]any{"Name": name, "Type": "JWT", "MaxTokenTTL": "1h",
			"Config": map[string]any{"JWTValidationPubKeys": []string{pub}}}
	}
	rule := map[string]any{"AuthMethod": "matrix-a", "BindType": "policy", "BindName": "read-all", "Selector": `value.sub == "x"`}
	return []matrixCase{
		// Open: `login` reads the default method from it.
		{"GET /v1/acl/auth-methods", "GET", "/v1/acl/auth-methods", nil, "22222"},
		{"PUT /v1/acl/auth-method", "PUT", "/v1/acl/auth-method", method("matrix-a"), "----2"},
		{"POST /v1/acl/auth-method", "POST", "/v1/acl/auth-method", method("matrix-b"), "----2"},
		{"GET /v1/acl/auth-method/{name}", "GET", "/v1/acl/auth-method/matrix-a", nil, "----2"},
		{"PUT /v1/acl/auth-method/{name}", "PUT", "/v1/acl/auth-method/matrix-a", method("matrix-a"), "----2"},
		{"POST /v1/acl/auth-method/{name}", "POST", "/v1/acl/auth-method/nosuch", method("nosuch"), "----4"},
		{"DELETE /v1/acl/auth-method/{name}", "DELETE", "/v1/acl/auth-method/nosuch", nil, "----4"},
		{"GET /v1/acl/binding-rules", "GET", "/v1/acl/binding-rules", nil, "----2"},
		{"PUT /v1/acl/binding-rule", "PUT", "/v1/acl/binding-rule", rule, "----2"},
		{"POST /v1/acl/binding-rule", "POST", "/v1/acl/binding-rule", rule, "----2"},
		{"GET /v1/acl/binding-rule/{id}", "GET", "/v1/acl/binding-rule/" + nobody, nil, "----4"},
		{"PUT /v1/acl/binding-rule/{id}", "PUT", "/v1/acl/binding-rule/" + nobody, rule, "----4"},
		{"POST /v1/acl/binding-rule/{id}", "POST", "/v1/acl/binding-rule/" + nobody, rule, "----4"},
		{"DELETE /v1/acl/binding-rule/{id}", "DELETE", "/v1/acl/binding-rule/" + nobody, nil, "----4"},
		// Anyone may try to log in (400 here: no token given).
		{"PUT /v1/acl/login", "PUT", "/v1/acl/login", map[string]string{"AuthMethodName": "matrix-a"}, "xxxxx"},
		{"POST /v1/acl/login", "POST", "/v1/acl/login", map[string]string{"AuthMethodName": "matrix-a"}, "xxxxx"},

		{"GET /v1/operator/autopilot/configuration", "GET", "/v1/operator/autopilot/configuration", nil, "---22"},
		{"PUT /v1/operator/autopilot/configuration", "PUT", "/v1/operator/autopilot/configuration",
			map[string]any{"CleanupDeadServers": true, "LastContactThreshold": "200ms", "ServerStabilizationTime": "10s"}, "----2"},
		{"POST /v1/operator/autopilot/configuration", "POST", "/v1/operator/autopilot/configuration",
			map[string]any{"CleanupDeadServers": true, "LastContactThreshold": "200ms", "ServerStabilizationTime": "10s"}, "----2"},
		{"GET /v1/operator/autopilot/health", "GET", "/v1/operator/autopilot/health", nil, "---22"},
	}
}

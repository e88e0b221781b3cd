package pki

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
	"github.com/hashicorp/go-hclog"
)

const testFP = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestJoinTokenFormat(t *testing.T) {
	// A fixed secret of 32 zero bytes makes the text predictable.
	tok, err := NewJoinToken(RoleClient, testFP, bytes.NewReader(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	want := "DRJT-1-" + testFP + "-c-" + strings.Repeat("a", 52)
	if got := tok.Reveal(); got != want {
		t.Fatalf("Reveal() = %q, want %q", got, want)
	}
	back, err := ParseJoinToken("  " + want + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(tok) || back.Role() != RoleClient || back.CAFingerprint() != testFP || back.ID() != tok.ID() {
		t.Fatalf("parse round trip: %v vs %v", back, tok)
	}

	srv, err := NewJoinToken(RoleServer, testFP, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.Reveal(), "DRJT-1-"+testFP+"-s-") || srv.Equal(tok) {
		t.Fatalf("server token %q", srv.Reveal())
	}
	if _, err := NewJoinToken("admin", testFP, nil); err == nil {
		t.Error("NewJoinToken accepted role admin")
	}
	if _, err := NewJoinToken(RoleServer, "abc", nil); err == nil {
		t.Error("NewJoinToken accepted a short fingerprint")
	}
}

func TestParseJoinTokenErrors(t *testing.T) {
	good, err := NewJoinToken(RoleServer, testFP, nil)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good.Reveal(), "-")
	secret := parts[4]
	with := func(i int, v string) string {
		p := append([]string(nil), parts...)
		p[i] = v
		return strings.Join(p, "-")
	}
	tests := []struct {
		name, in, wantErr string
	}{
		{"empty", "", "want 5 parts"},
		{"secret alone", secret, "want 5 parts"},
		{"extra part", good.Reveal() + "-x", "want 5 parts"},
		{"prefix", with(0, "SWMTKN"), `must begin with "DRJT-"`},
		{"version", with(1, "2"), `version must be "1"`},
		{"short fingerprint", with(2, testFP[:10]), "fingerprint must be 64 lower-case hex"},
		{"upper-case fingerprint", with(2, strings.ToUpper(testFP)), "fingerprint must be 64 lower-case hex"},
		{"non-hex fingerprint", with(2, strings.Repeat("z", 64)), "fingerprint is not hex"},
		{"role", with(3, "x"), `role must be "s" (server) or "c" (client)`},
		{"short secret", with(4, secret[:40]), "secret must be 52 base32 characters, got 40"},
		{"upper-case secret", with(4, strings.ToUpper(secret)), "secret is not lower-case base32"},
		{"secret with 1", with(4, "1"+secret[1:]), "secret is not lower-case base32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJoinToken(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !errors.Is(err, ErrMalformedToken) || !errors.Is(err, structs.ErrInvalid) {
				t.Errorf("err %v is not ErrMalformedToken / invalid", err)
			}
			assertNoSecret(t, "parse error", err.Error(), good)
			if strings.Contains(err.Error(), secret[:20]) || strings.Contains(err.Error(), strings.ToUpper(secret[:20])) {
				t.Errorf("parse error echoes the input: %v", err)
			}
		})
	}
}

func TestTokensRotateAndMarshal(t *testing.T) {
	ts, err := NewTokens(testFP, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldClient, oldServer := ts.Get(RoleClient), ts.Get(RoleServer)
	if oldClient.Role() != RoleClient || oldServer.Role() != RoleServer || ts.Get("x") != nil {
		t.Fatal("Get returns the wrong tokens")
	}
	rotated, fresh, err := ts.Rotate(RoleClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case fresh.Equal(oldClient):
		t.Error("rotation kept the secret")
	case !rotated.Get(RoleClient).Equal(fresh):
		t.Error("rotated set lacks the new token")
	case !rotated.Get(RoleServer).Equal(oldServer):
		t.Error("rotating the client token changed the server token")
	case !ts.Get(RoleClient).Equal(oldClient):
		t.Error("rotation changed the original set")
	case fresh.CAFingerprint() != testFP:
		t.Error("rotation changed the fingerprint")
	}
	if _, _, err := ts.Rotate("admin", nil); err == nil {
		t.Error("Rotate accepted role admin")
	}

	data, err := rotated.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalTokens(data)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Get(RoleClient).Equal(fresh) || !back.Get(RoleServer).Equal(oldServer) {
		t.Fatal("marshal round trip lost a token")
	}
	swapped, _ := json.Marshal(tokensWire{Server: fresh.Reveal(), Client: oldServer.Reveal()})
	if _, err := UnmarshalTokens(swapped); err == nil || !strings.Contains(err.Error(), "swapped") {
		t.Errorf("swapped roles: err = %v", err)
	}
	if _, err := UnmarshalTokens([]byte(`{"Server":"x"}`)); err == nil {
		t.Error("UnmarshalTokens accepted a bad token")
	}
}

// TestTokensNeverPrinted formats tokens every way a log or API answer
// could.
func TestTokensNeverPrinted(t *testing.T) {
	ts, err := NewTokens(testFP, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := ts.Get(RoleServer)
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
		outs = append(outs, fmt.Sprintf(verb, tok), fmt.Sprintf(verb, *tok), fmt.Sprintf(verb, ts), fmt.Sprintf(verb, *ts), fmt.Sprintf(verb, struct{ T *JoinToken }{tok}))
	}
	for _, v := range []any{tok, *tok, ts, *ts, struct{ T *JoinToken }{tok}} {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(j))
	}
	for _, jsonFormat := range []bool{false, true} {
		var buf bytes.Buffer
		hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: jsonFormat}).Info("tokens", "token", tok, "value", *tok, "tokens", ts)
		outs = append(outs, buf.String())
	}
	for _, out := range outs {
		assertNoSecret(t, "formatted token", out, ts.Get(RoleServer), ts.Get(RoleClient))
	}
	if s := tok.String(); !strings.Contains(s, testFP) || !strings.Contains(s, "REDACTED("+tok.ID()+")") {
		t.Errorf("String() = %q, want fingerprint and ID", s)
	}
}

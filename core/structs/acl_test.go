package structs

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/nomad/api"
)

const (
	testAccessor = "6f1c1c4e-1d0e-4a8b-9c3f-0a1b2c3d4e5f"
	testSecret   = "0b7d1f0e-7c9a-4d7e-8f5a-112233445566"
)

func TestACLPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *ACLPolicy
		// want lists substrings of the error; none means valid.
		want []string
	}{
		{"valid", &ACLPolicy{Name: "read-only-1", Description: "d", Rules: `namespace "*" { policy = "read" }`}, nil},
		{"empty rules", &ACLPolicy{Name: "a"}, nil},
		{"name at limit", &ACLPolicy{Name: strings.Repeat("a", MaxACLPolicyNameLength)}, nil},
		{"nil", nil, []string{"policy: missing"}},
		{"empty name", &ACLPolicy{}, []string{`policy name "": must match ^[a-zA-Z0-9-]{1,128}$`}},
		{"name too long", &ACLPolicy{Name: strings.Repeat("a", MaxACLPolicyNameLength+1)}, []string{"must match"}},
		{"bad char", &ACLPolicy{Name: "a_b"}, []string{`policy name "a_b": must match`}},
		{"newline", &ACLPolicy{Name: "a\n"}, []string{`policy name "a\n": must match`}},
		{"description", &ACLPolicy{Name: "a", Description: strings.Repeat("x", 257)},
			[]string{`policy "a": description: must be at most 256 bytes (got 257)`}},
		{"rules", &ACLPolicy{Name: "a", Rules: strings.Repeat("#", MaxACLPolicyRulesBytes+1)},
			[]string{"rules: must be at most 32768 bytes (got 32769); exceeds limit MaxACLPolicyRulesBytes"}},
		{"all at once", &ACLPolicy{Name: "", Description: strings.Repeat("x", 300), Rules: strings.Repeat("#", 40000)},
			[]string{"policy name", "description", "rules"}},
		{"long bad name is cut in the error", &ACLPolicy{Name: strings.Repeat("_", 10000)}, []string{`…: must match`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, tc.p.Validate(), tc.want)
		})
	}
}

func TestACLTokenValidate(t *testing.T) {
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *time.Time { e := created.Add(d); return &e }
	client := func(mod func(*ACLToken)) *ACLToken {
		tok := &ACLToken{AccessorID: testAccessor, SecretID: testSecret, Name: "n", Type: ACLClientToken,
			Policies: []string{"a"}, CreateTime: created}
		if mod != nil {
			mod(tok)
		}
		return tok
	}
	many := make([]string, MaxACLTokenPolicies+1)
	for i := range many {
		many[i] = "p"
	}
	for _, tc := range []struct {
		name     string
		tok      *ACLToken
		existing *ACLToken
		want     []string
	}{
		{"client", client(nil), nil, nil},
		{"no IDs yet", client(func(t *ACLToken) { t.AccessorID, t.SecretID = "", "" }), nil, nil},
		{"management", &ACLToken{Type: ACLManagementToken, CreateTime: created}, nil, nil},
		{"nil", nil, nil, []string{"token: missing"}},
		{"name", client(func(t *ACLToken) { t.Name = strings.Repeat("n", 257) }), nil,
			[]string{"token name: must be at most 256 bytes (got 257)"}},
		{"bad accessor", client(func(t *ACLToken) { t.AccessorID = "x" }), nil, []string{"token AccessorID: must be a UUID"}},
		{"bad secret", client(func(t *ACLToken) { t.SecretID = strings.Repeat("z", 36) }), nil, []string{"token SecretID: must be a UUID"}},
		{"type", client(func(t *ACLToken) { t.Type = "admin" }), nil, []string{`token type "admin": must be "client" or "management"`}},
		{"empty type", client(func(t *ACLToken) { t.Type = "" }), nil, []string{`token type "": must be`}},
		{"client without policies", client(func(t *ACLToken) { t.Policies = nil }), nil,
			[]string{"a client token must name at least one policy"}},
		{"management with policies", &ACLToken{Type: ACLManagementToken, Policies: []string{"a"}}, nil,
			[]string{"a management token must name no policies (got 1)"}},
		{"too many policies", client(func(t *ACLToken) { t.Policies = many }), nil,
			[]string{"must name at most 256 policies (got 257); exceeds limit MaxACLTokenPolicies"}},
		{"bad policy name", client(func(t *ACLToken) { t.Policies = []string{"ok", "not ok"} }), nil,
			[]string{`token policies[1] "not ok": must match`}},
		{"negative TTL", client(func(t *ACLToken) { t.ExpirationTTL = -time.Second }), nil,
			[]string{"token expiration TTL: must not be negative (got -1s)"}},
		{"TTL at min", client(func(t *ACLToken) { t.ExpirationTTL = time.Minute; t.ExpirationTime = at(time.Minute) }), nil, nil},
		{"TTL at max", client(func(t *ACLToken) { t.ExpirationTime = at(24 * time.Hour) }), nil, nil},
		{"TTL under min", client(func(t *ACLToken) { t.ExpirationTTL = time.Second; t.ExpirationTime = at(time.Second) }), nil,
			[]string{"token expiration: must be at least 1m0s after creation (got 1s)"}},
		{"TTL over max", client(func(t *ACLToken) { t.ExpirationTime = at(25 * time.Hour) }), nil,
			[]string{"token expiration: must be at most 24h0m0s after creation (got 25h0m0s)"}},
		{"expires before creation", client(func(t *ACLToken) { t.ExpirationTime = at(-time.Hour) }), nil,
			[]string{"token expiration time: must not be before the create time"}},
		{"both TTL and time", client(func(t *ACLToken) { t.ExpirationTTL = time.Hour; t.ExpirationTime = at(2 * time.Hour) }), nil,
			[]string{"set either the expiration time or the expiration TTL, not both"}},
		{"update keeps", client(nil), client(nil), nil},
		{"update toggles global", client(func(t *ACLToken) { t.Global = true }), client(nil),
			[]string{"token global: cannot be changed on an existing token (is false)"}},
		{"update sets expiration", client(func(t *ACLToken) { t.ExpirationTime = at(time.Hour) }), client(nil),
			[]string{"token expiration time: cannot be changed on an existing token"}},
		{"update keeps expiration", client(func(t *ACLToken) { t.ExpirationTime = at(time.Hour) }),
			client(func(t *ACLToken) { t.ExpirationTime = at(time.Hour) }), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkErr(t, tc.tok.Validate(DefaultACLTokenMinExpirationTTL, DefaultACLTokenMaxExpirationTTL, tc.existing), tc.want)
		})
	}
}

func TestACLTokenCanonicalize(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tok := &ACLToken{Type: ACLClientToken, Policies: []string{"a"}, ExpirationTTL: time.Hour}
	tok.Canonicalize(now)
	if !tok.CreateTime.Equal(now) {
		t.Errorf("CreateTime = %v; want %v", tok.CreateTime, now)
	}
	if tok.ExpirationTime == nil || !tok.ExpirationTime.Equal(now.Add(time.Hour)) {
		t.Fatalf("ExpirationTime = %v; want %v", tok.ExpirationTime, now.Add(time.Hour))
	}
	if err := tok.Validate(DefaultACLTokenMinExpirationTTL, DefaultACLTokenMaxExpirationTTL, nil); err != nil {
		t.Fatalf("canonical token refused: %v", err)
	}
	if tok.IsExpired(now.Add(time.Hour)) || !tok.IsExpired(now.Add(time.Hour+1)) {
		t.Error("IsExpired does not turn at ExpirationTime")
	}
	// Again: nothing moves.
	tok.Canonicalize(now.Add(time.Minute))
	if !tok.CreateTime.Equal(now) || !tok.ExpirationTime.Equal(now.Add(time.Hour)) {
		t.Error("Canonicalize is not idempotent")
	}
	if (&ACLToken{}).IsExpired(now.Add(1000 * time.Hour)) {
		t.Error("a token without expiration expired")
	}
}

func TestACLTokenRedactedAndStub(t *testing.T) {
	e := time.Unix(100, 0)
	tok := &ACLToken{AccessorID: testAccessor, SecretID: testSecret, Type: ACLClientToken,
		Policies: []string{"a"}, ExpirationTime: &e, Hash: []byte{1}}
	r := tok.Redacted()
	if r.SecretID != "" || r.AccessorID != testAccessor {
		t.Fatalf("Redacted = %+v", r)
	}
	if tok.SecretID != testSecret {
		t.Fatal("Redacted changed the original")
	}
	r.Policies[0], r.Hash[0] = "b", 2
	*r.ExpirationTime = time.Unix(200, 0)
	if tok.Policies[0] != "a" || tok.Hash[0] != 1 || !tok.ExpirationTime.Equal(e) {
		t.Fatal("Redacted shares memory with the original")
	}
	b, err := json.Marshal(tok.Stub())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(testSecret)) || bytes.Contains(b, []byte("SecretID")) {
		t.Fatalf("stub carries the secret: %s", b)
	}
	if (*ACLToken)(nil).Redacted() != nil {
		t.Fatal("nil Redacted is not nil")
	}
}

func TestACLHashes(t *testing.T) {
	a := &ACLToken{AccessorID: testAccessor, Name: "ab", Type: ACLClientToken, Policies: []string{"c"}}
	b := &ACLToken{AccessorID: testAccessor, Name: "a", Type: ACLClientToken, Policies: []string{"bc"}}
	if bytes.Equal(a.SetHash(), b.SetHash()) {
		t.Error("shifted field boundary gives the same token hash")
	}
	h := a.SetHash()
	a.Global = true
	if bytes.Equal(h, a.SetHash()) {
		t.Error("Global does not change the token hash")
	}
	p := &ACLPolicy{Name: "p", Rules: "x"}
	ph := p.SetHash()
	p.Description = "d"
	if bytes.Equal(ph, p.SetHash()) || len(p.Hash) != 32 {
		t.Error("Description does not change the policy hash")
	}
}

func TestOneTimeTokenValidate(t *testing.T) {
	exp := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		o    *OneTimeToken
		want []string
	}{
		{"valid", &OneTimeToken{OneTimeSecretID: testSecret, AccessorID: testAccessor, ExpiresAt: exp}, nil},
		{"nil", nil, []string{"one-time token: missing"}},
		{"empty", &OneTimeToken{}, []string{"OneTimeSecretID: must be a UUID", "AccessorID: must be a UUID", "ExpiresAt: missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkErr(t, tc.o.Validate(), tc.want) })
	}
	o := &OneTimeToken{ExpiresAt: exp}
	if o.IsExpired(exp) || !o.IsExpired(exp.Add(time.Nanosecond)) {
		t.Error("IsExpired does not turn at ExpiresAt")
	}
}

func TestIsUUID(t *testing.T) {
	for s, want := range map[string]bool{
		testAccessor:                           true,
		strings.ToUpper(testAccessor):          true,
		"":                                     false,
		"6f1c1c4e-1d0e-4a8b-9c3f-0a1b2c3d4e5":  false,
		"6f1c1c4e-1d0e-4a8b-9c3f-0a1b2c3d4e5g": false,
		"6f1c1c4e11d0e-4a8b-9c3f-0a1b2c3d4e5f": false,
	} {
		if got := IsUUID(s); got != want {
			t.Errorf("IsUUID(%q) = %t; want %t", s, got, want)
		}
	}
}

// The JSON of drover's ACL types is Nomad's: the Nomad API client decodes
// every field of it.
func TestACLJSONIsNomads(t *testing.T) {
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	exp := created.Add(time.Hour)
	tok := &ACLToken{AccessorID: testAccessor, SecretID: testSecret, Name: "n", Type: ACLClientToken,
		Policies: []string{"a", "b"}, Global: true, CreateTime: created, ExpirationTime: &exp,
		ExpirationTTL: time.Hour, CreateIndex: 7, ModifyIndex: 9}
	var at api.ACLToken
	roundTrip(t, tok, &at)
	if at.AccessorID != testAccessor || at.SecretID != testSecret || at.Name != "n" || at.Type != "client" ||
		len(at.Policies) != 2 || !at.Global || !at.CreateTime.Equal(created) || at.ExpirationTime == nil ||
		!at.ExpirationTime.Equal(exp) || at.ExpirationTTL != time.Hour || at.CreateIndex != 7 || at.ModifyIndex != 9 {
		t.Errorf("api.ACLToken = %+v", at)
	}
	var as api.ACLTokenListStub
	roundTrip(t, tok.Stub(), &as)
	if as.AccessorID != testAccessor || as.ExpirationTime == nil || as.ModifyIndex != 9 {
		t.Errorf("api.ACLTokenListStub = %+v", as)
	}
	b, _ := json.Marshal(ACLToken{Type: ACLManagementToken})
	if bytes.Contains(b, []byte("ExpirationTime")) || !bytes.Contains(b, []byte(`"ExpirationTTL":""`)) {
		t.Errorf("unset expiration is not Nomad's: %s", b)
	}
	b, _ = json.Marshal(tok)
	if !bytes.Contains(b, []byte(`"ExpirationTTL":"1h0m0s"`)) {
		t.Errorf("TTL is not a duration string: %s", b)
	}

	pol := &ACLPolicy{Name: "p", Description: "d", Rules: "r", CreateIndex: 3, ModifyIndex: 4}
	var ap api.ACLPolicy
	roundTrip(t, pol, &ap)
	if ap.Name != "p" || ap.Description != "d" || ap.Rules != "r" || ap.CreateIndex != 3 || ap.ModifyIndex != 4 {
		t.Errorf("api.ACLPolicy = %+v", ap)
	}
	var aps api.ACLPolicyListStub
	roundTrip(t, pol.Stub(), &aps)
	if aps.Name != "p" || aps.ModifyIndex != 4 {
		t.Errorf("api.ACLPolicyListStub = %+v", aps)
	}

	ott := &OneTimeToken{OneTimeSecretID: testSecret, AccessorID: testAccessor, ExpiresAt: exp, CreateIndex: 1, ModifyIndex: 2}
	var ao api.OneTimeToken
	roundTrip(t, ott, &ao)
	if ao.OneTimeSecretID != testSecret || ao.AccessorID != testAccessor || !ao.ExpiresAt.Equal(exp) || ao.ModifyIndex != 2 {
		t.Errorf("api.OneTimeToken = %+v", ao)
	}
}

// ExpirationTTL reads as Nomad's server reads it: what the Nomad CLI
// sends (a duration string) or nanoseconds.
func TestACLTokenJSONTTL(t *testing.T) {
	for _, tc := range []struct {
		body string
		want time.Duration
		err  string
	}{
		{`{"ExpirationTTL":"10m"}`, 10 * time.Minute, ""},
		{`{"ExpirationTTL":""}`, 0, ""},
		{`{"ExpirationTTL":null}`, 0, ""},
		{`{}`, 0, ""},
		{`{"ExpirationTTL":60000000000}`, time.Minute, ""},
		{`{"ExpirationTTL":6e10}`, time.Minute, ""},
		{`{"ExpirationTTL":"10 minutes"}`, 0, `token ExpirationTTL: must be a duration such as "1h" (got "10 minutes")`},
		{`{"ExpirationTTL":1.5}`, 0, "must be a whole number of nanoseconds"},
		{`{"ExpirationTTL":1e300}`, 0, "must be a whole number of nanoseconds within range"},
		{`{"ExpirationTTL":true}`, 0, "must be a duration string or a number of nanoseconds"},
		{`{"ExpirationTTL":"1h","Name":7}`, 0, "cannot unmarshal number"},
	} {
		var tok ACLToken
		err := json.Unmarshal([]byte(tc.body), &tok)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v; want %q", tc.body, err, tc.err)
			}
			continue
		}
		if err != nil || tok.ExpirationTTL != tc.want {
			t.Errorf("%s: TTL %s, error %v; want %s", tc.body, tok.ExpirationTTL, err, tc.want)
		}
	}
	// The other fields still decode beside it.
	var tok ACLToken
	if err := json.Unmarshal([]byte(`{"Name":"n","Policies":["a"],"ExpirationTTL":"1h"}`), &tok); err != nil ||
		tok.Name != "n" || len(tok.Policies) != 1 || tok.ExpirationTTL != time.Hour {
		t.Errorf("decoded %+v, %v", tok, err)
	}
	// What Nomad's API client writes, drover reads.
	b, err := json.Marshal(&api.ACLToken{Name: "n", ExpirationTTL: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.ExpirationTTL != 90*time.Second {
		t.Errorf("from %s: %+v, %v", b, tok, err)
	}
}

// The MessagePack form, which Raft and RPC carry, keeps every field.
func TestACLMsgpackRoundTrip(t *testing.T) {
	exp := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tok := &ACLToken{AccessorID: testAccessor, SecretID: testSecret, Name: "n", Type: ACLClientToken,
		Policies: []string{"a"}, Global: true, CreateTime: exp.Add(-time.Hour), ExpirationTime: &exp,
		ExpirationTTL: time.Hour, CreateIndex: 7, ModifyIndex: 9}
	tok.SetHash()
	var buf []byte
	h := &codec.MsgpackHandle{} // as core/fsm's
	h.RawToString, h.WriteExt = true, true
	if err := codec.NewEncoderBytes(&buf, h).Encode(tok); err != nil {
		t.Fatal(err)
	}
	var got ACLToken
	if err := codec.NewDecoderBytes(buf, h).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.SecretID != testSecret || !got.ExpirationTime.Equal(exp) || !got.CreateTime.Equal(tok.CreateTime) ||
		got.ExpirationTTL != time.Hour || !bytes.Equal(got.Hash, tok.Hash) || got.ModifyIndex != 9 || !got.Global {
		t.Errorf("decoded %+v; want %+v", got, tok)
	}
}

func roundTrip(t *testing.T, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	// Hash is drover's (and Nomad's server-side) field; the API client has
	// none. Any other field it does not know is a naming mistake.
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "Hash")
	b, _ = json.Marshal(m)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("accepted; want errors %q", want)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %T is not a ValidationError", err)
	}
	if HTTPStatus(err) != 400 {
		t.Errorf("HTTP status %d; want 400", HTTPStatus(err))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q; want it to contain %q", err, w)
		}
	}
}

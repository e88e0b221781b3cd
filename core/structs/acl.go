package structs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// ACL token types.
const (
	ACLClientToken     = "client"
	ACLManagementToken = "management"
)

// ACL input bounds. Policies and tokens are written through Raft and read
// on every request, so each is bounded before it is accepted: a policy's
// rules are parsed again whenever a token using it misses the ACL cache.
const (
	// MaxACLPolicyRulesBytes bounds a policy's Rules text. A policy with a
	// rule for each of a hundred namespaces is a few kilobytes.
	MaxACLPolicyRulesBytes = 32 << 10

	// MaxACLPolicyNameLength bounds a policy name (as Nomad: 128).
	MaxACLPolicyNameLength = 128

	// MaxACLPolicyDescriptionLength bounds a policy description in bytes
	// (as Nomad: 256).
	MaxACLPolicyDescriptionLength = 256

	// MaxACLTokenNameLength bounds a token name in bytes (as Nomad: 256).
	MaxACLTokenNameLength = 256

	// MaxACLTokenPolicies bounds the policies one token names. Each is
	// looked up and merged on a cache miss; a real token names a handful.
	MaxACLTokenPolicies = 256

	// MaxACLTokenRoles bounds the roles one token links to.
	MaxACLTokenRoles = 64

	// DefaultACLTokenMinExpirationTTL and DefaultACLTokenMaxExpirationTTL
	// are the server's default bounds on a token's lifetime when one is
	// asked for (Nomad's acl.token_min_expiration_ttl and
	// acl.token_max_expiration_ttl).
	DefaultACLTokenMinExpirationTTL = time.Minute
	DefaultACLTokenMaxExpirationTTL = 24 * time.Hour

	// OneTimeTokenTTL is how long a one-time token can be exchanged.
	OneTimeTokenTTL = 10 * time.Minute
)

// aclPolicyNameRE is Nomad's rule for policy names. Names of policies are
// also what tokens refer to, so the same rule bounds Token.Policies.
var aclPolicyNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9-]{1,128}$`) })

// ACLPolicyNameRule is the policy name rule the way errors quote it.
const ACLPolicyNameRule = `^[a-zA-Z0-9-]{1,128}$`

// ValidACLPolicyName reports whether name follows ACLPolicyNameRule.
func ValidACLPolicyName(name string) bool {
	return len(name) <= MaxACLPolicyNameLength && aclPolicyNameRE().MatchString(name)
}

// ACLPolicy is a named set of rules in Nomad's policy language. Rules are
// parsed by core/acl; Validate checks only what can be checked without
// parsing them.
type ACLPolicy struct {
	Name        string `codec:",omitempty"`
	Description string `codec:",omitempty"`
	Rules       string `codec:",omitempty"`
	// Hash is a digest of Name, Description and Rules, set by SetHash.
	Hash        []byte `codec:",omitempty"`
	CreateIndex uint64 `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
}

// ACLPolicyListStub is a policy in a listing: no rules.
type ACLPolicyListStub struct {
	Name        string
	Description string
	Hash        []byte
	CreateIndex uint64
	ModifyIndex uint64
}

// Validate checks the policy's name, description and rules size. A nil
// policy is refused.
func (p *ACLPolicy) Validate() error {
	var l errList
	if p == nil {
		l.add("policy: missing")
		return l.err()
	}
	if !ValidACLPolicyName(p.Name) {
		l.add("policy name %s: must match %s", quoteBounded(p.Name), ACLPolicyNameRule)
	}
	if n := len(p.Description); n > MaxACLPolicyDescriptionLength {
		l.add("policy %s: description: must be at most %d bytes (got %d)", quoteBounded(p.Name), MaxACLPolicyDescriptionLength, n)
	}
	if n := len(p.Rules); n > MaxACLPolicyRulesBytes {
		l.add("policy %s: rules: must be at most %d bytes (got %d); exceeds limit MaxACLPolicyRulesBytes",
			quoteBounded(p.Name), MaxACLPolicyRulesBytes, n)
	}
	return l.err()
}

// SetHash sets and returns the policy's Hash.
func (p *ACLPolicy) SetHash() []byte {
	h := sha256.New()
	for _, s := range []string{p.Name, p.Description, p.Rules} {
		writeField(h, s)
	}
	p.Hash = h.Sum(nil)
	return p.Hash
}

// Stub returns the policy's listing entry.
func (p *ACLPolicy) Stub() *ACLPolicyListStub {
	return &ACLPolicyListStub{
		Name: p.Name, Description: p.Description, Hash: p.Hash,
		CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex,
	}
}

// ACLToken is a bearer credential. AccessorID is public and names the
// token; SecretID is the credential itself and must never be logged or
// listed (see Redacted and Stub).
type ACLToken struct {
	AccessorID string   `codec:",omitempty"`
	SecretID   string   `codec:",omitempty"`
	Name       string   `codec:",omitempty"`
	Type       string   `codec:",omitempty"`
	Policies   []string `codec:",omitempty"`
	// Roles links the token to ACL roles by ID (Name is filled in for
	// display); a role's policies are resolved at request time, and a
	// deleted role grants nothing.
	Roles      []*ACLTokenRoleLink `codec:",omitempty"`
	Global     bool                `codec:",omitempty"`
	CreateTime time.Time
	// ExpirationTime is when the token stops being accepted; nil never.
	ExpirationTime *time.Time `codec:",omitempty" json:",omitempty"`
	// ExpirationTTL, given at creation, sets ExpirationTime to
	// CreateTime+ExpirationTTL (see Canonicalize).
	// Its JSON is a duration string, as Nomad's (see MarshalJSON).
	ExpirationTTL time.Duration `codec:",omitempty"`
	Hash          []byte        `codec:",omitempty"`
	CreateIndex   uint64        `codec:",omitempty"`
	ModifyIndex   uint64        `codec:",omitempty"`
}

// MarshalJSON writes ExpirationTTL as Nomad does: a duration string
// ("1h0m0s"), "" when unset.
func (t ACLToken) MarshalJSON() ([]byte, error) {
	type plain ACLToken
	ttl := ""
	if t.ExpirationTTL != 0 {
		ttl = t.ExpirationTTL.String()
	}
	return json.Marshal(struct {
		ExpirationTTL string
		*plain
	}{ttl, (*plain)(&t)})
}

// UnmarshalJSON reads ExpirationTTL as a duration string ("10m", as the
// Nomad CLI and API client send it) or as nanoseconds.
func (t *ACLToken) UnmarshalJSON(b []byte) error {
	type plain ACLToken
	aux := struct {
		ExpirationTTL json.RawMessage
		*plain
	}{plain: (*plain)(t)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	ttl, err := decodeDuration(aux.ExpirationTTL)
	if err != nil {
		return NewError(ErrInvalid, "token ExpirationTTL: %v", err)
	}
	t.ExpirationTTL = ttl
	return nil
}

// decodeDuration reads a JSON duration: a string time.ParseDuration
// accepts, "" or null for none, or a number of nanoseconds.
func decodeDuration(raw json.RawMessage) (time.Duration, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		if s == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("must be a duration such as \"1h\" (got %s)", quoteBounded(s))
		}
		return d, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, errors.New("must be a duration string or a number of nanoseconds")
	}
	if i, err := n.Int64(); err == nil {
		return time.Duration(i), nil
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, fmt.Errorf("must be a whole number of nanoseconds within range (got %s)", quoteBounded(n.String()))
	}
	return time.Duration(f), nil
}

// ACLTokenListStub is a token in a listing: everything but the secret.
type ACLTokenListStub struct {
	AccessorID     string
	Name           string
	Type           string
	Policies       []string
	Roles          []*ACLTokenRoleLink
	Global         bool
	CreateTime     time.Time
	ExpirationTime *time.Time `json:",omitempty"`
	Hash           []byte
	CreateIndex    uint64
	ModifyIndex    uint64
}

// IsManagement reports whether the token bypasses every policy.
func (t *ACLToken) IsManagement() bool { return t != nil && t.Type == ACLManagementToken }

// IsExpired reports whether the token is past its expiration at now. A
// token without an expiration never expires.
func (t *ACLToken) IsExpired(now time.Time) bool {
	return t != nil && t.ExpirationTime != nil && !t.ExpirationTime.IsZero() && t.ExpirationTime.Before(now)
}

// Redacted returns a copy of the token with SecretID blanked, for logs
// and for answers to anyone but the token's creator. The copy shares no
// slices with t.
func (t *ACLToken) Redacted() *ACLToken {
	if t == nil {
		return nil
	}
	c := t.Copy()
	c.SecretID = ""
	return c
}

// Copy returns a deep copy of the token.
func (t *ACLToken) Copy() *ACLToken {
	if t == nil {
		return nil
	}
	c := *t
	c.Policies = slices.Clone(t.Policies)
	c.Roles = nil
	for _, r := range t.Roles {
		if r != nil {
			c.Roles = append(c.Roles, &ACLTokenRoleLink{ID: r.ID, Name: r.Name})
		}
	}
	c.Hash = slices.Clone(t.Hash)
	if t.ExpirationTime != nil {
		e := *t.ExpirationTime
		c.ExpirationTime = &e
	}
	return &c
}

// Stub returns the token's listing entry, which has no secret.
func (t *ACLToken) Stub() *ACLTokenListStub {
	c := t.Copy()
	return &ACLTokenListStub{
		AccessorID: c.AccessorID, Name: c.Name, Type: c.Type, Policies: c.Policies, Roles: c.Roles,
		Global: c.Global, CreateTime: c.CreateTime, ExpirationTime: c.ExpirationTime,
		Hash: c.Hash, CreateIndex: c.CreateIndex, ModifyIndex: c.ModifyIndex,
	}
}

// Canonicalize fills a new token's CreateTime (with now, when unset) and
// turns ExpirationTTL into ExpirationTime. It does not pick the
// AccessorID and SecretID: those are random, and the caller's to make.
func (t *ACLToken) Canonicalize(now time.Time) {
	if t.CreateTime.IsZero() {
		t.CreateTime = now
	}
	if t.ExpirationTTL != 0 && t.ExpirationTime == nil {
		e := t.CreateTime.Add(t.ExpirationTTL)
		t.ExpirationTime = &e
	}
}

// Validate checks a canonicalized token. minTTL and maxTTL bound the
// lifetime of a token that expires (the server's configured bounds, or
// the defaults above). existing is the stored token an update replaces,
// or nil for a new token: an update may not change Global or the
// expiration.
func (t *ACLToken) Validate(minTTL, maxTTL time.Duration, existing *ACLToken) error {
	var l errList
	if t == nil {
		l.add("token: missing")
		return l.err()
	}
	if n := len(t.Name); n > MaxACLTokenNameLength {
		l.add("token name: must be at most %d bytes (got %d)", MaxACLTokenNameLength, n)
	}
	for _, f := range []struct{ name, v string }{{"AccessorID", t.AccessorID}, {"SecretID", t.SecretID}} {
		if f.v != "" && !IsUUID(f.v) {
			l.add("token %s: must be a UUID", f.name)
		}
	}
	switch t.Type {
	case ACLClientToken:
		if len(t.Policies) == 0 && len(t.Roles) == 0 {
			l.add("token policies: a client token must name at least one policy or role")
		}
	case ACLManagementToken:
		if len(t.Policies) != 0 {
			l.add("token policies: a management token must name no policies (got %d)", len(t.Policies))
		}
		if len(t.Roles) != 0 {
			l.add("token roles: a management token must name no roles (got %d)", len(t.Roles))
		}
	default:
		l.add("token type %s: must be %q or %q", quoteBounded(t.Type), ACLClientToken, ACLManagementToken)
	}
	if n := len(t.Policies); n > MaxACLTokenPolicies {
		l.add("token policies: must name at most %d policies (got %d); exceeds limit MaxACLTokenPolicies", MaxACLTokenPolicies, n)
	} else {
		for i, p := range t.Policies {
			if !ValidACLPolicyName(p) {
				l.add("token policies[%d] %s: must match %s", i, quoteBounded(p), ACLPolicyNameRule)
			}
		}
	}
	if n := len(t.Roles); n > MaxACLTokenRoles {
		l.add("token roles: must name at most %d roles (got %d); exceeds limit MaxACLTokenRoles", MaxACLTokenRoles, n)
	} else {
		for i, r := range t.Roles {
			switch {
			case r == nil || (r.ID == "" && r.Name == ""):
				l.add("token roles[%d]: must give the role's ID or Name", i)
			case r.ID != "" && !IsUUID(r.ID):
				l.add("token roles[%d] ID %s: must be a UUID", i, quoteBounded(r.ID))
			case r.ID == "" && !ValidACLRoleName(r.Name):
				l.add("token roles[%d] name %s: must match %s", i, quoteBounded(r.Name), ACLRoleNameRule)
			}
		}
	}

	if existing == nil {
		t.validateExpiration(&l, minTTL, maxTTL)
	} else {
		if existing.Global != t.Global {
			l.add("token global: cannot be changed on an existing token (is %t)", existing.Global)
		}
		if !sameTime(existing.ExpirationTime, t.ExpirationTime) {
			l.add("token expiration time: cannot be changed on an existing token")
		}
	}
	return l.err()
}

func (t *ACLToken) validateExpiration(l *errList, minTTL, maxTTL time.Duration) {
	if t.ExpirationTTL < 0 {
		l.add("token expiration TTL: must not be negative (got %s)", t.ExpirationTTL)
		return
	}
	if t.ExpirationTime == nil || t.ExpirationTime.IsZero() {
		return
	}
	if t.ExpirationTTL != 0 && !t.ExpirationTime.Equal(t.CreateTime.Add(t.ExpirationTTL)) {
		l.add("token expiration: set either the expiration time or the expiration TTL, not both")
		return
	}
	life := t.ExpirationTime.Sub(t.CreateTime)
	switch {
	case life < 0:
		l.add("token expiration time: must not be before the create time")
	case life < minTTL:
		l.add("token expiration: must be at least %s after creation (got %s)", minTTL, life)
	case life > maxTTL:
		l.add("token expiration: must be at most %s after creation (got %s)", maxTTL, life)
	}
}

// SetHash sets and returns the token's Hash, a digest of everything but
// the indexes, so that replication can tell a changed token.
func (t *ACLToken) SetHash() []byte {
	h := sha256.New()
	writeField(h, t.AccessorID)
	writeField(h, t.SecretID)
	writeField(h, t.Name)
	writeField(h, t.Type)
	_ = binary.Write(h, binary.BigEndian, uint64(len(t.Policies)))
	for _, p := range t.Policies {
		writeField(h, p)
	}
	if len(t.Roles) > 0 {
		// Only tokens with roles hash them, so that the hash of a token
		// without roles is what it was before roles existed.
		_ = binary.Write(h, binary.BigEndian, uint64(len(t.Roles)))
		for _, r := range t.Roles {
			if r != nil {
				writeField(h, r.ID)
			}
		}
	}
	global := []byte{0}
	if t.Global {
		global[0] = 1
	}
	h.Write(global)
	if t.ExpirationTime != nil {
		_ = binary.Write(h, binary.BigEndian, t.ExpirationTime.UnixNano())
	}
	t.Hash = h.Sum(nil)
	return t.Hash
}

// OneTimeToken is a short-lived secret that can be exchanged, once, for
// the ACL token whose AccessorID it holds.
type OneTimeToken struct {
	OneTimeSecretID string `codec:",omitempty"`
	AccessorID      string `codec:",omitempty"`
	ExpiresAt       time.Time
	// ExchangeID names the exchange that spent the token ("": unspent).
	// A spent token grants nothing (the API never shows one, so the field
	// is absent from its JSON); it stays until it expires so that
	// an exchange whose Raft outcome was unknown can learn whether it won.
	ExchangeID  string `codec:",omitempty" json:",omitempty"`
	CreateIndex uint64 `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
}

// IsSpent reports whether an exchange already spent the one-time token.
func (o *OneTimeToken) IsSpent() bool { return o.ExchangeID != "" }

// IsExpired reports whether the one-time token is past ExpiresAt at now.
func (o *OneTimeToken) IsExpired(now time.Time) bool { return o.ExpiresAt.Before(now) }

// Validate checks a one-time token before it is written: both IDs are
// UUIDs and ExpiresAt is set (the state store refuses a zero one).
func (o *OneTimeToken) Validate() error {
	var l errList
	if o == nil {
		l.add("one-time token: missing")
		return l.err()
	}
	if !IsUUID(o.OneTimeSecretID) {
		l.add("one-time token OneTimeSecretID: must be a UUID")
	}
	if !IsUUID(o.AccessorID) {
		l.add("one-time token AccessorID: must be a UUID")
	}
	if o.ExpiresAt.IsZero() {
		l.add("one-time token ExpiresAt: missing")
	}
	return l.err()
}

// IsUUID reports whether s has the form of a UUID: 36 characters, hex
// digits in groups of 8-4-4-4-12.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

func sameTime(a, b *time.Time) bool {
	switch {
	case a == nil || a.IsZero():
		return b == nil || b.IsZero()
	case b == nil:
		return false
	}
	return a.Equal(*b)
}

// writeField writes s length-prefixed, so that field boundaries cannot
// be shifted to forge an equal digest.
func writeField(h interface{ Write([]byte) (int, error) }, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	_, _ = h.Write(n[:])
	_, _ = h.Write([]byte(s))
}

// quoteBounded quotes a user-supplied value for an error message,
// cutting it short so that an oversized input does not make an
// oversized error.
func quoteBounded(s string) string {
	const limit = 64
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}

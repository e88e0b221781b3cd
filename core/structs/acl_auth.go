package structs

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Raft message types of auth methods and binding rules (100-103) and of
// the autopilot configuration (104).
const (
	ACLAuthMethodUpsertRequestType  MessageType = 100
	ACLAuthMethodDeleteRequestType  MessageType = 101
	ACLBindingRuleUpsertRequestType MessageType = 102
	ACLBindingRuleDeleteRequestType MessageType = 103
)

// Auth method types, token localities and binding rule bind types, as
// Nomad spells them.
const (
	ACLAuthMethodTypeJWT  = "JWT"
	ACLAuthMethodTypeOIDC = "OIDC"

	ACLAuthMethodTokenLocalityLocal  = "local"
	ACLAuthMethodTokenLocalityGlobal = "global"

	ACLBindingRuleBindTypeRole       = "role"
	ACLBindingRuleBindTypePolicy     = "policy"
	ACLBindingRuleBindTypeManagement = "management"
)

// Auth method and binding rule bounds. Both are written through Raft and
// read on every login, so every field is bounded before it is accepted.
const (
	MaxACLAuthMethodNameLength      = 128
	MaxACLAuthMethodPubKeys         = 16
	MaxACLAuthMethodPubKeyBytes     = 16 << 10
	MaxACLAuthMethodListItems       = 64
	MaxACLAuthMethodStringBytes     = 1024
	MaxACLAuthMethodClaimMappings   = 64
	MaxACLAuthMethodCACertBytes     = 64 << 10
	MaxACLBindingRuleDescriptionLen = 256
	MaxACLBindingRuleSelectorBytes  = 2048
	MaxACLBindingRuleBindNameLength = 256
	// MaxACLAuthMethods bounds the auth methods of a cluster and
	// MaxACLBindingRulesPerMethod the rules one login evaluates.
	MaxACLAuthMethods                = 256
	MaxACLBindingRulesPerMethod      = 256
	MaxACLAuthMethodMaxTokenTTL      = DefaultACLTokenMaxExpirationTTL
	MaxACLAuthMethodLeeway           = 24 * time.Hour
	DefaultACLAuthMethodMaxTokenTTL  = time.Hour
	ACLAuthMethodNameRule            = `^[a-zA-Z0-9_-]{1,128}$`
	aclClaimMappingTargetRule        = `^[a-zA-Z0-9_]{1,128}$`
	aclSigningAlgsRuleDescription    = "RS256 RS384 RS512 ES256 ES384 ES512 PS256 PS384 PS512 EdDSA"
	maxACLAuthMethodClaimMappingName = 256
)

var (
	aclAuthMethodNameRE   = regexp.MustCompile(ACLAuthMethodNameRule)
	aclClaimMappingTarget = regexp.MustCompile(aclClaimMappingTargetRule)
)

// ACLAuthMethodSigningAlgs are the JWT signature algorithms an auth method
// may accept. "none" and the HMAC algorithms are never accepted: a method
// holds public keys only.
var ACLAuthMethodSigningAlgs = strings.Fields(aclSigningAlgsRuleDescription)

// ACLAuthMethodConfig is the JWT configuration of an auth method (Nomad's
// field names). Exactly one key source is set: JWTValidationPubKeys (PEM)
// or JWKSURL.
type ACLAuthMethodConfig struct {
	JWTValidationPubKeys []string          `codec:",omitempty"`
	JWKSURL              string            `codec:",omitempty"`
	JWKSCACert           string            `codec:",omitempty"`
	OIDCDiscoveryURL     string            `codec:",omitempty"`
	BoundAudiences       []string          `codec:",omitempty"`
	BoundIssuer          []string          `codec:",omitempty"`
	ClaimMappings        map[string]string `codec:",omitempty"`
	ListClaimMappings    map[string]string `codec:",omitempty"`
	SigningAlgs          []string          `codec:",omitempty"`
	ExpirationLeeway     time.Duration     `codec:",omitempty"`
	NotBeforeLeeway      time.Duration     `codec:",omitempty"`
	ClockSkewLeeway      time.Duration     `codec:",omitempty"`
}

// MarshalJSON writes the leeways as duration strings, as Nomad's API
// client reads them.
func (c ACLAuthMethodConfig) MarshalJSON() ([]byte, error) {
	type plain ACLAuthMethodConfig
	return json.Marshal(struct {
		ExpirationLeeway string
		NotBeforeLeeway  string
		ClockSkewLeeway  string
		*plain
	}{c.ExpirationLeeway.String(), c.NotBeforeLeeway.String(), c.ClockSkewLeeway.String(), (*plain)(&c)})
}

// UnmarshalJSON reads the leeways as duration strings or nanoseconds.
func (c *ACLAuthMethodConfig) UnmarshalJSON(b []byte) error {
	type plain ACLAuthMethodConfig
	aux := struct {
		ExpirationLeeway json.RawMessage
		NotBeforeLeeway  json.RawMessage
		ClockSkewLeeway  json.RawMessage
		*plain
	}{plain: (*plain)(c)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *time.Duration
	}{
		{"ExpirationLeeway", aux.ExpirationLeeway, &c.ExpirationLeeway},
		{"NotBeforeLeeway", aux.NotBeforeLeeway, &c.NotBeforeLeeway},
		{"ClockSkewLeeway", aux.ClockSkewLeeway, &c.ClockSkewLeeway},
	} {
		d, err := decodeDuration(f.raw)
		if err != nil {
			return NewError(ErrInvalid, "auth method Config.%s: %v", f.name, err)
		}
		*f.dst = d
	}
	return nil
}

// ACLAuthMethod is a way to log in: a JWT whose signature and claims it
// verifies is exchanged for an ACL token whose roles and policies the
// method's binding rules decide.
type ACLAuthMethod struct {
	Name          string `codec:",omitempty"`
	Type          string `codec:",omitempty"`
	TokenLocality string `codec:",omitempty"`
	// TokenNameFormat names the tokens of a login (Nomad 1.7): it may
	// interpolate ${auth_method_type}, ${auth_method_name} and
	// ${value.<claim>}; empty, "token created via login: <name>".
	TokenNameFormat string `codec:",omitempty"`
	// MaxTokenTTL is the lifetime of the tokens a login creates.
	MaxTokenTTL time.Duration        `codec:",omitempty"`
	Default     bool                 `codec:",omitempty"`
	Config      *ACLAuthMethodConfig `codec:",omitempty"`
	Hash        []byte               `codec:",omitempty"`
	CreateTime  time.Time
	ModifyTime  time.Time
	CreateIndex uint64 `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
}

// MarshalJSON writes MaxTokenTTL as a duration string, as Nomad does.
func (m ACLAuthMethod) MarshalJSON() ([]byte, error) {
	type plain ACLAuthMethod
	return json.Marshal(struct {
		MaxTokenTTL string
		*plain
	}{m.MaxTokenTTL.String(), (*plain)(&m)})
}

// UnmarshalJSON reads MaxTokenTTL as a duration string or nanoseconds.
func (m *ACLAuthMethod) UnmarshalJSON(b []byte) error {
	type plain ACLAuthMethod
	aux := struct {
		MaxTokenTTL json.RawMessage
		*plain
	}{plain: (*plain)(m)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	d, err := decodeDuration(aux.MaxTokenTTL)
	if err != nil {
		return NewError(ErrInvalid, "auth method MaxTokenTTL: %v", err)
	}
	m.MaxTokenTTL = d
	return nil
}

// ACLAuthMethodListStub is an auth method in a listing.
type ACLAuthMethodListStub struct {
	Name        string
	Type        string
	Default     bool
	Hash        []byte
	CreateIndex uint64
	ModifyIndex uint64
}

// ValidACLAuthMethodName reports whether name follows ACLAuthMethodNameRule.
func ValidACLAuthMethodName(name string) bool {
	return len(name) <= MaxACLAuthMethodNameLength && aclAuthMethodNameRE.MatchString(name)
}

// Canonicalize fills in the defaults Nomad applies: local tokens and a
// one-hour token TTL.
func (m *ACLAuthMethod) Canonicalize() {
	if m.TokenLocality == "" {
		m.TokenLocality = ACLAuthMethodTokenLocalityLocal
	}
	if m.MaxTokenTTL == 0 {
		m.MaxTokenTTL = DefaultACLAuthMethodMaxTokenTTL
	}
}

// Validate checks every field of the method against its rule and bound.
// It does not parse the keys (the endpoint does, where the JOSE library
// lives); it bounds their size and count.
func (m *ACLAuthMethod) Validate() error {
	var l errList
	if m == nil {
		l.add("auth method: missing")
		return l.err()
	}
	if !ValidACLAuthMethodName(m.Name) {
		l.add("auth method name %s: must match %s", quoteBounded(m.Name), ACLAuthMethodNameRule)
	}
	switch m.Type {
	case ACLAuthMethodTypeJWT, ACLAuthMethodTypeOIDC:
	default:
		l.add("auth method %s: Type %s: must be %q or %q", quoteBounded(m.Name), quoteBounded(m.Type), ACLAuthMethodTypeJWT, ACLAuthMethodTypeOIDC)
	}
	switch m.TokenLocality {
	case ACLAuthMethodTokenLocalityLocal, ACLAuthMethodTokenLocalityGlobal:
	default:
		l.add("auth method %s: TokenLocality %s: must be %q or %q", quoteBounded(m.Name), quoteBounded(m.TokenLocality),
			ACLAuthMethodTokenLocalityLocal, ACLAuthMethodTokenLocalityGlobal)
	}
	if n := len(m.TokenNameFormat); n > MaxACLTokenNameLength {
		l.add("auth method %s: TokenNameFormat: must be at most %d bytes (got %d)", quoteBounded(m.Name), MaxACLTokenNameLength, n)
	}
	if m.MaxTokenTTL < DefaultACLTokenMinExpirationTTL || m.MaxTokenTTL > MaxACLAuthMethodMaxTokenTTL {
		l.add("auth method %s: MaxTokenTTL %s: must be between %s and %s", quoteBounded(m.Name), m.MaxTokenTTL,
			DefaultACLTokenMinExpirationTTL, MaxACLAuthMethodMaxTokenTTL)
	}
	// An OIDC method is stored and listed as Nomad's, but no login goes
	// through it: drover serves no OIDC flow.
	jwt := m.Type == ACLAuthMethodTypeJWT
	if m.Config == nil {
		if jwt {
			l.add("auth method %s: Config: missing", quoteBounded(m.Name))
		}
		return l.err()
	}
	m.Config.validate(&l, quoteBounded(m.Name), jwt)
	return l.err()
}

func (c *ACLAuthMethodConfig) validate(l *errList, name string, jwt bool) {
	switch {
	case jwt && len(c.JWTValidationPubKeys) == 0 && c.JWKSURL == "":
		l.add("auth method %s: Config: one of JWTValidationPubKeys or JWKSURL is required", name)
	case len(c.JWTValidationPubKeys) > 0 && c.JWKSURL != "":
		l.add("auth method %s: Config: JWTValidationPubKeys and JWKSURL are exclusive", name)
	}
	if jwt && c.OIDCDiscoveryURL != "" {
		l.add("auth method %s: Config.OIDCDiscoveryURL: OIDC discovery is not supported by drover; give JWTValidationPubKeys or JWKSURL", name)
	}
	if len(c.OIDCDiscoveryURL) > MaxACLAuthMethodStringBytes {
		l.add("auth method %s: Config.OIDCDiscoveryURL: at most %d bytes", name, MaxACLAuthMethodStringBytes)
	}
	if n := len(c.JWTValidationPubKeys); n > MaxACLAuthMethodPubKeys {
		l.add("auth method %s: Config.JWTValidationPubKeys: at most %d keys (got %d)", name, MaxACLAuthMethodPubKeys, n)
	}
	for i, k := range c.JWTValidationPubKeys {
		if len(k) > MaxACLAuthMethodPubKeyBytes {
			l.add("auth method %s: Config.JWTValidationPubKeys[%d]: at most %d bytes (got %d)", name, i, MaxACLAuthMethodPubKeyBytes, len(k))
		}
	}
	if c.JWKSURL != "" && !strings.HasPrefix(c.JWKSURL, "https://") && !strings.HasPrefix(c.JWKSURL, "http://") {
		l.add("auth method %s: Config.JWKSURL %s: must be an http:// or https:// URL", name, quoteBounded(c.JWKSURL))
	}
	if len(c.JWKSURL) > MaxACLAuthMethodStringBytes {
		l.add("auth method %s: Config.JWKSURL: at most %d bytes", name, MaxACLAuthMethodStringBytes)
	}
	if len(c.JWKSCACert) > MaxACLAuthMethodCACertBytes {
		l.add("auth method %s: Config.JWKSCACert: at most %d bytes", name, MaxACLAuthMethodCACertBytes)
	}
	for _, f := range []struct {
		field string
		vals  []string
	}{{"BoundAudiences", c.BoundAudiences}, {"BoundIssuer", c.BoundIssuer}, {"SigningAlgs", c.SigningAlgs}} {
		if len(f.vals) > MaxACLAuthMethodListItems {
			l.add("auth method %s: Config.%s: at most %d items (got %d)", name, f.field, MaxACLAuthMethodListItems, len(f.vals))
			continue
		}
		for i, v := range f.vals {
			if v == "" || len(v) > MaxACLAuthMethodStringBytes {
				l.add("auth method %s: Config.%s[%d]: must be 1 to %d bytes", name, f.field, i, MaxACLAuthMethodStringBytes)
			}
		}
	}
	for i, a := range c.SigningAlgs {
		if !slices.Contains(ACLAuthMethodSigningAlgs, a) {
			l.add("auth method %s: Config.SigningAlgs[%d] %s: must be one of %s", name, i, quoteBounded(a), aclSigningAlgsRuleDescription)
		}
	}
	for _, f := range []struct {
		field string
		d     time.Duration
	}{{"ExpirationLeeway", c.ExpirationLeeway}, {"NotBeforeLeeway", c.NotBeforeLeeway}, {"ClockSkewLeeway", c.ClockSkewLeeway}} {
		// Zero is the default leeway, a negative one none (as Nomad).
		if f.d > MaxACLAuthMethodLeeway {
			l.add("auth method %s: Config.%s %s: must be at most %s (negative disables it)", name, f.field, f.d, MaxACLAuthMethodLeeway)
		}
	}
	targets := map[string]string{}
	for _, f := range []struct {
		field string
		m     map[string]string
	}{{"ClaimMappings", c.ClaimMappings}, {"ListClaimMappings", c.ListClaimMappings}} {
		if len(f.m) > MaxACLAuthMethodClaimMappings {
			l.add("auth method %s: Config.%s: at most %d mappings (got %d)", name, f.field, MaxACLAuthMethodClaimMappings, len(f.m))
			continue
		}
		for _, claim := range sortedKeys(f.m) {
			target := f.m[claim]
			if claim == "" || len(claim) > maxACLAuthMethodClaimMappingName {
				l.add("auth method %s: Config.%s: a claim name must be 1 to %d bytes", name, f.field, maxACLAuthMethodClaimMappingName)
			}
			if !aclClaimMappingTarget.MatchString(target) {
				l.add("auth method %s: Config.%s[%s] %s: must match %s", name, f.field, quoteBounded(claim), quoteBounded(target), aclClaimMappingTargetRule)
			}
			if prev, ok := targets[target]; ok {
				l.add("auth method %s: Config.%s[%s]: target %q is already mapped from claim %s", name, f.field, quoteBounded(claim), target, quoteBounded(prev))
			}
			targets[target] = claim
		}
	}
}

// SetHash sets and returns the method's Hash over every field a user
// sets.
func (m *ACLAuthMethod) SetHash() []byte {
	h := sha256.New()
	writeField(h, m.Name)
	writeField(h, m.Type)
	writeField(h, m.TokenLocality)
	writeField(h, m.TokenNameFormat)
	_ = binary.Write(h, binary.BigEndian, int64(m.MaxTokenTTL))
	writeField(h, fmt.Sprint(m.Default))
	if m.Config != nil {
		b, _ := json.Marshal(m.Config) // maps marshal in key order
		writeField(h, string(b))
	}
	m.Hash = h.Sum(nil)
	return m.Hash
}

// Copy returns a deep copy of the method.
func (m *ACLAuthMethod) Copy() *ACLAuthMethod {
	if m == nil {
		return nil
	}
	c := *m
	c.Hash = slices.Clone(m.Hash)
	if m.Config != nil {
		cc := *m.Config
		cc.JWTValidationPubKeys = slices.Clone(m.Config.JWTValidationPubKeys)
		cc.BoundAudiences = slices.Clone(m.Config.BoundAudiences)
		cc.BoundIssuer = slices.Clone(m.Config.BoundIssuer)
		cc.SigningAlgs = slices.Clone(m.Config.SigningAlgs)
		cc.ClaimMappings = cloneStringMap(m.Config.ClaimMappings)
		cc.ListClaimMappings = cloneStringMap(m.Config.ListClaimMappings)
		c.Config = &cc
	}
	return &c
}

func cloneStringMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Stub returns the method as a listing shows it.
func (m *ACLAuthMethod) Stub() *ACLAuthMethodListStub {
	return &ACLAuthMethodListStub{Name: m.Name, Type: m.Type, Default: m.Default, Hash: slices.Clone(m.Hash),
		CreateIndex: m.CreateIndex, ModifyIndex: m.ModifyIndex}
}

// ACLBindingRule maps the claims of a login to a role, a policy or a
// management token. Selector picks the logins it applies to (empty: all);
// BindName may interpolate mapped claims (${value.x}).
type ACLBindingRule struct {
	ID          string `codec:",omitempty"`
	Description string `codec:",omitempty"`
	AuthMethod  string `codec:",omitempty"`
	Selector    string `codec:",omitempty"`
	BindType    string `codec:",omitempty"`
	BindName    string `codec:",omitempty"`
	Hash        []byte `codec:",omitempty"`
	CreateTime  time.Time
	ModifyTime  time.Time
	CreateIndex uint64 `codec:",omitempty"`
	ModifyIndex uint64 `codec:",omitempty"`
}

// ACLBindingRuleListStub is a binding rule in a listing.
type ACLBindingRuleListStub struct {
	ID          string
	Description string
	AuthMethod  string
	Hash        []byte
	CreateIndex uint64
	ModifyIndex uint64
}

// Validate checks the rule's fields against their rules and bounds. The
// selector's syntax is checked by the endpoint (core/acl/selector), which
// owns the language.
func (r *ACLBindingRule) Validate() error {
	var l errList
	if r == nil {
		l.add("binding rule: missing")
		return l.err()
	}
	if r.ID != "" && !IsUUID(r.ID) {
		l.add("binding rule ID %s: must be a UUID", quoteBounded(r.ID))
	}
	if !ValidACLAuthMethodName(r.AuthMethod) {
		l.add("binding rule AuthMethod %s: must match %s", quoteBounded(r.AuthMethod), ACLAuthMethodNameRule)
	}
	if n := len(r.Description); n > MaxACLBindingRuleDescriptionLen {
		l.add("binding rule Description: must be at most %d bytes (got %d)", MaxACLBindingRuleDescriptionLen, n)
	}
	if n := len(r.Selector); n > MaxACLBindingRuleSelectorBytes {
		l.add("binding rule Selector: must be at most %d bytes (got %d)", MaxACLBindingRuleSelectorBytes, n)
	}
	switch r.BindType {
	case ACLBindingRuleBindTypeRole, ACLBindingRuleBindTypePolicy:
		if r.BindName == "" {
			l.add("binding rule BindName: required for BindType %q", r.BindType)
		}
	case ACLBindingRuleBindTypeManagement:
		if r.BindName != "" {
			l.add("binding rule BindName: must be empty for BindType %q", r.BindType)
		}
	default:
		l.add("binding rule BindType %s: must be %q, %q or %q", quoteBounded(r.BindType),
			ACLBindingRuleBindTypeRole, ACLBindingRuleBindTypePolicy, ACLBindingRuleBindTypeManagement)
	}
	if n := len(r.BindName); n > MaxACLBindingRuleBindNameLength {
		l.add("binding rule BindName: must be at most %d bytes (got %d)", MaxACLBindingRuleBindNameLength, n)
	}
	return l.err()
}

// SetHash sets and returns the rule's Hash.
func (r *ACLBindingRule) SetHash() []byte {
	h := sha256.New()
	for _, s := range []string{r.Description, r.AuthMethod, r.Selector, r.BindType, r.BindName} {
		writeField(h, s)
	}
	r.Hash = h.Sum(nil)
	return r.Hash
}

// Copy returns a deep copy of the rule.
func (r *ACLBindingRule) Copy() *ACLBindingRule {
	if r == nil {
		return nil
	}
	c := *r
	c.Hash = slices.Clone(r.Hash)
	return &c
}

// Stub returns the rule as a listing shows it.
func (r *ACLBindingRule) Stub() *ACLBindingRuleListStub {
	return &ACLBindingRuleListStub{ID: r.ID, Description: r.Description, AuthMethod: r.AuthMethod,
		Hash: slices.Clone(r.Hash), CreateIndex: r.CreateIndex, ModifyIndex: r.ModifyIndex}
}

// ACLLoginRequest is the body of POST /v1/acl/login.
type ACLLoginRequest struct {
	AuthMethodName string
	LoginToken     string
}

// MaxACLLoginTokenBytes bounds the JWT of a login.
const MaxACLLoginTokenBytes = 16 << 10

// ACLAuthMethodUpsertRequest writes auth methods (type 100).
type ACLAuthMethodUpsertRequest struct {
	AuthMethods []*ACLAuthMethod `codec:",omitempty"`
}

// ACLAuthMethodDeleteRequest deletes auth methods by name, with their
// binding rules (type 101).
type ACLAuthMethodDeleteRequest struct {
	Names []string `codec:",omitempty"`
}

// ACLBindingRuleUpsertRequest writes binding rules (type 102).
type ACLBindingRuleUpsertRequest struct {
	BindingRules []*ACLBindingRule `codec:",omitempty"`
}

// ACLBindingRuleDeleteRequest deletes binding rules by ID (type 103).
type ACLBindingRuleDeleteRequest struct {
	IDs []string `codec:",omitempty"`
}

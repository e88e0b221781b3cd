package pki

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

const (
	// TokenPrefix opens every join token.
	TokenPrefix  = "DRJT"
	tokenVersion = "1"
	secretBytes  = 32
)

var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// JoinToken lets an agent join the cluster in one role. Its text is
// DRJT-1-<ca-fingerprint>-<s|c>-<secret> (see the package doc). The secret
// is shown only by Reveal.
type JoinToken struct {
	role        Role
	fingerprint [sha256.Size]byte
	secret      [secretBytes]byte
}

// NewJoinToken makes a token for role in the cluster whose CA has
// caFingerprint, with a secret read from rnd (crypto/rand when nil).
func NewJoinToken(role Role, caFingerprint string, rnd io.Reader) (*JoinToken, error) {
	if !role.valid() {
		return nil, invalid(ErrMalformedToken, "new join token: role %q is neither %q nor %q", role, RoleServer, RoleClient)
	}
	t := &JoinToken{role: role}
	if err := decodeFingerprint(caFingerprint, &t.fingerprint); err != nil {
		return nil, invalid(ErrMalformedToken, "new join token: CA %v", err)
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	if _, err := io.ReadFull(rnd, t.secret[:]); err != nil {
		return nil, fmt.Errorf("new join token: read random secret: %w", err)
	}
	return t, nil
}

// ParseJoinToken reads a token's text; surrounding white space is ignored.
// Errors say which part is wrong and never repeat the input.
func ParseJoinToken(s string) (*JoinToken, error) {
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) != 5 {
		return nil, invalid(ErrMalformedToken, "join token: want 5 parts separated by '-' (%s-%s-<ca-fingerprint>-<s|c>-<secret>), got %d", TokenPrefix, tokenVersion, len(parts))
	}
	if parts[0] != TokenPrefix {
		return nil, invalid(ErrMalformedToken, "join token: must begin with %q", TokenPrefix+"-")
	}
	if parts[1] != tokenVersion {
		return nil, invalid(ErrMalformedToken, "join token: version must be %q (part 2)", tokenVersion)
	}
	t := &JoinToken{}
	if err := decodeFingerprint(parts[2], &t.fingerprint); err != nil {
		return nil, invalid(ErrMalformedToken, "join token: CA %v (part 3)", err)
	}
	switch parts[3] {
	case "s":
		t.role = RoleServer
	case "c":
		t.role = RoleClient
	default:
		return nil, invalid(ErrMalformedToken, "join token: role must be \"s\" (server) or \"c\" (client) (part 4)")
	}
	if len(parts[4]) != secretEncoding.EncodedLen(secretBytes) {
		return nil, invalid(ErrMalformedToken, "join token: secret must be %d base32 characters, got %d (part 5)", secretEncoding.EncodedLen(secretBytes), len(parts[4]))
	}
	n, err := secretEncoding.Decode(t.secret[:], []byte(parts[4]))
	if err != nil || n != secretBytes {
		// The decoder's error quotes an offset only, but stay generic.
		return nil, invalid(ErrMalformedToken, "join token: secret is not lower-case base32 (a-z, 2-7) (part 5)")
	}
	return t, nil
}

func decodeFingerprint(s string, dst *[sha256.Size]byte) error {
	if len(s) != hex.EncodedLen(sha256.Size) || strings.ToLower(s) != s {
		return fmt.Errorf("fingerprint must be %d lower-case hex digits, got %d characters", hex.EncodedLen(sha256.Size), len(s))
	}
	if _, err := hex.Decode(dst[:], []byte(s)); err != nil {
		return fmt.Errorf("fingerprint is not hex")
	}
	return nil
}

// Role is the role the token grants.
func (t *JoinToken) Role() Role { return t.role }

// CAFingerprint is the fingerprint of the CA the token belongs to.
func (t *JoinToken) CAFingerprint() string { return hex.EncodeToString(t.fingerprint[:]) }

// Reveal is the token's full text, secret included: for the operator who
// asked for it, never for a log.
func (t *JoinToken) Reveal() string {
	return TokenPrefix + "-" + tokenVersion + "-" + t.CAFingerprint() + "-" + string(t.role[0]) + "-" + secretEncoding.EncodeToString(t.secret[:])
}

// ID names the token without revealing it (a truncated hash of the whole
// text), so logs can tell which token an agent joined with.
func (t *JoinToken) ID() string {
	sum := sha256.Sum256([]byte("drover join token id\x00" + t.Reveal()))
	return hex.EncodeToString(sum[:8])
}

// Equal compares two tokens in constant time.
func (t *JoinToken) Equal(o *JoinToken) bool {
	if t == nil || o == nil {
		return t == o
	}
	return subtle.ConstantTimeCompare([]byte(t.Reveal()), []byte(o.Reveal())) == 1
}

// String is a redacted form: DRJT-1-<fingerprint>-<role>-REDACTED(id).
func (t JoinToken) String() string {
	if !t.role.valid() {
		return "pki.JoinToken{}"
	}
	return TokenPrefix + "-" + tokenVersion + "-" + t.CAFingerprint() + "-" + string(t.role[0]) + "-REDACTED(" + t.ID() + ")"
}

// GoString is String, so that %#v does not print the secret.
func (t JoinToken) GoString() string { return t.String() }

// Format prints String for every verb.
func (t JoinToken) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

// MarshalJSON writes the redacted form: JSON is for APIs and logs. There is
// no UnmarshalJSON, so that decoding a redacted token fails loudly; Raft
// uses Tokens.Marshal.
func (t JoinToken) MarshalJSON() ([]byte, error) { return json.Marshal(t.String()) }

// macKey is the key of the join proof: HKDF-SHA256 of the secret, salted
// with the CA fingerprint and bound to the role, so that a proof is never
// valid for another cluster or role even if two secrets collided.
func (t *JoinToken) macKey() []byte {
	k, err := hkdf.Key(sha256.New, t.secret[:], t.fingerprint[:], "drover join v1 "+string(t.role), sha256.Size)
	if err != nil {
		// Only a key length beyond 255*32 bytes fails.
		panic("pki: hkdf: " + err.Error())
	}
	return k
}

// Tokens are the cluster's two join tokens, as the servers keep them in
// Raft. A Tokens value is never changed: With and Rotate return a copy, so
// one read from the state store can be used without locks.
type Tokens struct {
	server, client *JoinToken
}

// NewTokens makes a server and a client token for the CA with
// caFingerprint, as the first server bootstrap does.
func NewTokens(caFingerprint string, rnd io.Reader) (*Tokens, error) {
	s, err := NewJoinToken(RoleServer, caFingerprint, rnd)
	if err != nil {
		return nil, err
	}
	c, err := NewJoinToken(RoleClient, caFingerprint, rnd)
	if err != nil {
		return nil, err
	}
	return &Tokens{server: s, client: c}, nil
}

// Get is the token of role, or nil.
func (ts *Tokens) Get(role Role) *JoinToken {
	switch role {
	case RoleServer:
		return ts.server
	case RoleClient:
		return ts.client
	}
	return nil
}

// With is a copy in which tok replaces the token of its role.
func (ts *Tokens) With(tok *JoinToken) *Tokens {
	cp := *ts
	if tok.role == RoleServer {
		cp.server = tok
	} else {
		cp.client = tok
	}
	return &cp
}

// Rotate is a copy with a new secret for role, and the new token. Proofs
// made with the old token fail from the moment the copy is in use. The
// leader rotates and puts the copy through Raft: randomness has no place
// in an FSM apply.
func (ts *Tokens) Rotate(role Role, rnd io.Reader) (*Tokens, *JoinToken, error) {
	old := ts.Get(role)
	if old == nil {
		return nil, nil, invalid(ErrMalformedToken, "rotate join token: role %q is neither %q nor %q", role, RoleServer, RoleClient)
	}
	tok, err := NewJoinToken(role, old.CAFingerprint(), rnd)
	if err != nil {
		return nil, nil, err
	}
	return ts.With(tok), tok, nil
}

type tokensWire struct {
	Server, Client string
}

// Marshal serialises both tokens, secrets included, for Raft.
func (ts *Tokens) Marshal() ([]byte, error) {
	return json.Marshal(tokensWire{Server: ts.server.Reveal(), Client: ts.client.Reveal()})
}

// UnmarshalTokens reads what Marshal wrote.
func UnmarshalTokens(data []byte) (*Tokens, error) {
	var w tokensWire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, invalid(ErrMalformedToken, "unmarshal join tokens: %v", err)
	}
	s, err := ParseJoinToken(w.Server)
	if err != nil {
		return nil, fmt.Errorf("unmarshal join tokens: server: %w", err)
	}
	c, err := ParseJoinToken(w.Client)
	if err != nil {
		return nil, fmt.Errorf("unmarshal join tokens: client: %w", err)
	}
	if s.role != RoleServer || c.role != RoleClient {
		return nil, invalid(ErrMalformedToken, "unmarshal join tokens: roles are swapped")
	}
	return &Tokens{server: s, client: c}, nil
}

func (ts Tokens) String() string {
	return fmt.Sprintf("pki.Tokens{server=%v client=%v}", ts.server, ts.client)
}

// GoString is String.
func (ts Tokens) GoString() string { return ts.String() }

// Format prints String for every verb.
func (ts Tokens) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(ts.String())) }

// MarshalJSON writes the redacted tokens.
func (ts Tokens) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct{ Server, Client *JoinToken }{ts.server, ts.client})
}

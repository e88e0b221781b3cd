package pki

import (
	"bytes"
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"sync"
	"time"
)

const (
	// ChallengeTTL is how long a join challenge may be answered. A joiner
	// answers at once over the same connection, so seconds are plenty;
	// short lives keep a flood of unanswered challenges from lasting.
	ChallengeTTL = 15 * time.Second
	// MaxPendingChallenges bounds the challenges one server holds, so that
	// unauthenticated callers cannot grow its memory.
	MaxPendingChallenges = 4096
	// MaxChallengesPerCaller bounds the challenges one caller (a source
	// address) holds: its next one replaces its oldest, so one source can
	// neither fill the table nor keep another's challenge from being made.
	MaxChallengesPerCaller = 4
	nonceBytes             = 32
	macDomain              = "drover join proof v1"
)

// Challenge is a server's single-use nonce that a join request must answer.
type Challenge struct {
	Nonce     []byte
	ExpiresAt time.Time
}

// Challenges hands out and redeems join challenges; it is the replay guard
// of the join exchange. It is safe for concurrent use and starts no
// goroutine: expired challenges are swept whenever a new one is made.
//
// The table is bounded per caller and in all: a caller's new challenge
// evicts its own oldest once it holds MaxChallengesPerCaller, and a full
// table evicts its oldest challenge. Making a challenge therefore never
// fails for lack of room, and a flood (from one source or many) can at worst
// evict a challenge that is older than the flood's last limit-many ones,
// which a joiner that answers at once does not hold: it asks again.
type Challenges struct {
	ttl       time.Duration
	limit     int
	perCaller int

	mu       sync.Mutex
	order    *list.List               // of *pendingChallenge, oldest first
	byNonce  map[string]*list.Element // hex nonce → element of order
	byCaller map[string][]*list.Element
}

type pendingChallenge struct {
	nonce  string
	caller string
	exp    time.Time
}

// NewChallenges returns an empty guard. Zero ttl, limit or perCaller mean
// ChallengeTTL, MaxPendingChallenges and MaxChallengesPerCaller.
func NewChallenges(ttl time.Duration, limit, perCaller int) *Challenges {
	if ttl <= 0 {
		ttl = ChallengeTTL
	}
	if limit <= 0 {
		limit = MaxPendingChallenges
	}
	if perCaller <= 0 {
		perCaller = MaxChallengesPerCaller
	}
	return &Challenges{ttl: ttl, limit: limit, perCaller: min(perCaller, limit),
		order: list.New(), byNonce: make(map[string]*list.Element), byCaller: make(map[string][]*list.Element)}
}

// New makes a challenge for caller (its source address: the key of the
// per-caller bound) valid until now plus the guard's TTL.
func (c *Challenges) New(caller string, now time.Time) (Challenge, error) {
	nonce := make([]byte, nonceBytes)
	if _, err := rand.Read(nonce); err != nil {
		return Challenge{}, fmt.Errorf("join challenge: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Challenges expire in the order they were made.
	for e := c.order.Front(); e != nil && !now.Before(e.Value.(*pendingChallenge).exp); e = c.order.Front() {
		c.remove(e)
	}
	if mine := c.byCaller[caller]; len(mine) >= c.perCaller {
		c.remove(mine[0])
	}
	if c.order.Len() >= c.limit {
		c.remove(c.order.Front())
	}
	exp := now.Add(c.ttl)
	p := &pendingChallenge{nonce: hex.EncodeToString(nonce), caller: caller, exp: exp}
	e := c.order.PushBack(p)
	c.byNonce[p.nonce] = e
	c.byCaller[caller] = append(c.byCaller[caller], e)
	return Challenge{Nonce: nonce, ExpiresAt: exp}, nil
}

// remove drops e from every index. c.mu is held.
func (c *Challenges) remove(e *list.Element) {
	p := e.Value.(*pendingChallenge)
	c.order.Remove(e)
	delete(c.byNonce, p.nonce)
	mine := c.byCaller[p.caller]
	for i, x := range mine {
		if x == e {
			mine = append(mine[:i:i], mine[i+1:]...)
			break
		}
	}
	if len(mine) == 0 {
		delete(c.byCaller, p.caller)
	} else {
		c.byCaller[p.caller] = mine
	}
}

// Pending is the number of challenges issued and neither redeemed, evicted
// nor swept.
func (c *Challenges) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// PendingFor is the number of caller's pending challenges.
func (c *Challenges) PendingFor(caller string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byCaller[caller])
}

// redeem consumes a nonce: a second redeem of the same nonce fails, and so
// does one after its expiry or eviction. These failures are the joiner's
// cue to ask for a new challenge, so their kind is ErrUnavailable (try
// again), not a refusal.
func (c *Challenges) redeem(nonce []byte, now time.Time) error {
	k := hex.EncodeToString(nonce)
	c.mu.Lock()
	var exp time.Time
	e, ok := c.byNonce[k]
	if ok {
		exp = e.Value.(*pendingChallenge).exp
		c.remove(e)
	}
	c.mu.Unlock()
	switch {
	case !ok:
		return retry(ErrChallenge, "join challenge is unknown, already used or replaced by newer ones; ask for a new one")
	case !now.Before(exp):
		return retry(ErrChallenge, "join challenge expired %s ago; ask for a new one", now.Sub(exp).Round(time.Millisecond))
	}
	return nil
}

// JoinParams is what a joiner asks to be certified as.
type JoinParams struct {
	// ID is the server name or the client's node ID.
	ID string
	// DNSNames and IPAddresses are a server's host names; a client's must
	// be empty.
	DNSNames    []string
	IPAddresses []net.IP
}

// JoinRequest is the joiner's answer to a challenge. It proves the token
// without carrying it: MAC is HMAC-SHA256 keyed by a key derived from the
// token's secret over the nonce, the role and the CSR.
type JoinRequest struct {
	Nonce []byte
	Role  Role
	// CAFingerprint is the token's, so that a server of another CA can say
	// so instead of "bad proof".
	CAFingerprint string
	// TokenID is the token's ID (JoinToken.ID), for the server's logs.
	TokenID string
	// CSR is a PKCS #10 request, DER, for the joiner's fresh key.
	CSR []byte
	MAC []byte
}

// NewKey makes a key for an agent's certificate (ECDSA P-256).
func NewKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// NewCSR builds a PKCS #10 request (DER) for key naming p's ID and hosts.
// The CA takes only the key and, for servers, the hosts from it.
func NewCSR(key crypto.Signer, p JoinParams) ([]byte, error) {
	if err := validateID(p.ID); err != nil {
		return nil, invalid(ErrJoinRefused, "CSR: %v", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: p.ID},
		DNSNames:    p.DNSNames,
		IPAddresses: p.IPAddresses,
	}, key)
	if err != nil {
		return nil, fmt.Errorf("CSR: %w", err)
	}
	return der, nil
}

// BuildJoinRequest answers ch with a CSR for key and a proof of token.
func BuildJoinRequest(token *JoinToken, ch Challenge, key crypto.Signer, p JoinParams) (*JoinRequest, error) {
	if len(ch.Nonce) != nonceBytes {
		return nil, invalid(ErrChallenge, "join request: challenge nonce has %d bytes, want %d", len(ch.Nonce), nonceBytes)
	}
	if token.role == RoleClient && (len(p.DNSNames) > 0 || len(p.IPAddresses) > 0) {
		return nil, invalid(ErrJoinRefused, "join request: a client names no hosts, got %d DNS names and %d IP addresses", len(p.DNSNames), len(p.IPAddresses))
	}
	csr, err := NewCSR(key, p)
	if err != nil {
		return nil, err
	}
	return &JoinRequest{
		Nonce:         append([]byte(nil), ch.Nonce...),
		Role:          token.role,
		CAFingerprint: token.CAFingerprint(),
		TokenID:       token.ID(),
		CSR:           csr,
		MAC:           joinMAC(token, ch.Nonce, csr),
	}, nil
}

// joinMAC: every field is length-prefixed so that no two inputs encode
// alike.
func joinMAC(token *JoinToken, nonce, csr []byte) []byte {
	m := hmac.New(sha256.New, token.macKey())
	var buf bytes.Buffer
	for _, f := range [][]byte{[]byte(macDomain), token.fingerprint[:], nonce, []byte(token.role), csr} {
		_ = binary.Write(&buf, binary.BigEndian, uint32(len(f)))
		buf.Write(f)
	}
	m.Write(buf.Bytes())
	return m.Sum(nil)
}

// JoinGrant is a verified join request: the role the token granted, the
// identity the joiner asked for and its CSR. The server may refuse it on
// its own grounds (a node ID already registered to another live node)
// before CA.IssueJoin.
type JoinGrant struct {
	Role    Role
	ID      string
	TokenID string
	CSR     *x509.CertificateRequest
}

// VerifyJoinRequest checks req against the challenges this server issued
// and the cluster's tokens, at now. The challenge is used up whatever the
// outcome, so each proof is checked once. Errors never quote the token.
func VerifyJoinRequest(req *JoinRequest, challenges *Challenges, tokens *Tokens, now time.Time) (*JoinGrant, error) {
	if req == nil {
		return nil, invalid(ErrJoinRefused, "join request is empty")
	}
	if err := challenges.redeem(req.Nonce, now); err != nil {
		return nil, err
	}
	tok := tokens.Get(req.Role)
	if tok == nil {
		return nil, invalid(ErrJoinRefused, "join request: role %q is neither %q nor %q", req.Role, RoleServer, RoleClient)
	}
	if req.CAFingerprint != tok.CAFingerprint() {
		return nil, denied(ErrJoinRefused, "Permission denied: the join token is for the cluster CA %s, this cluster's CA is %s", req.CAFingerprint, tok.CAFingerprint())
	}
	if !hmac.Equal(req.MAC, joinMAC(tok, req.Nonce, req.CSR)) {
		return nil, denied(ErrJoinRefused, "Permission denied: the join proof does not match this cluster's %s join token (token %s): a wrong, rotated or other-role token", req.Role, req.TokenID)
	}
	csr, err := x509.ParseCertificateRequest(req.CSR)
	if err != nil {
		return nil, invalid(ErrJoinRefused, "join request: parse CSR: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, denied(ErrJoinRefused, "Permission denied: join request: CSR signature: %v", err)
	}
	if err := validateID(csr.Subject.CommonName); err != nil {
		return nil, invalid(ErrJoinRefused, "join request: CSR common name: %v", err)
	}
	if req.Role == RoleClient && (len(csr.DNSNames) > 0 || len(csr.IPAddresses) > 0 || len(csr.URIs) > 0 || len(csr.EmailAddresses) > 0) {
		return nil, invalid(ErrJoinRefused, "join request: a client's CSR names no hosts")
	}
	return &JoinGrant{Role: req.Role, ID: csr.Subject.CommonName, TokenID: req.TokenID, CSR: csr}, nil
}

// JoinResponse carries the joiner's certificate and the CA's, DER.
type JoinResponse struct {
	Certificate []byte
	CA          []byte
}

// IssueJoin issues the certificate of a verified grant, for the role the
// token granted.
func (ca *CA) IssueJoin(g *JoinGrant, ttl time.Duration, now time.Time) (*JoinResponse, error) {
	cert, err := ca.IssueCSR(g.CSR, g.Role, g.ID, ttl, now)
	if err != nil {
		return nil, err
	}
	return &JoinResponse{Certificate: cert.Raw, CA: ca.trust.cert.Raw}, nil
}

// CompleteJoin checks a join answer on the joiner's side: the CA must be
// the one the token pins, the certificate signed by it, for key, in the
// role of the token. It returns the TLS certificate to put in a CertStore
// and the cluster's Trust.
func CompleteJoin(token *JoinToken, key crypto.Signer, resp *JoinResponse) (*tls.Certificate, *Trust, error) {
	if resp == nil {
		return nil, nil, invalid(ErrJoinRefused, "join response is empty")
	}
	if got := fingerprintOf(resp.CA); got != token.CAFingerprint() {
		return nil, nil, denied(ErrPinMismatch, "join response: the CA's fingerprint is %s, the join token's is %s", got, token.CAFingerprint())
	}
	trust, err := trustFromDER(resp.CA)
	if err != nil {
		return nil, nil, err
	}
	cert, err := TLSCertificate(resp.Certificate, resp.CA, key)
	if err != nil {
		return nil, nil, err
	}
	id, err := trust.Verify([]*x509.Certificate{cert.Leaf}, x509.ExtKeyUsageClientAuth, time.Now())
	if err != nil {
		return nil, nil, err
	}
	if id.Role != token.role {
		return nil, nil, denied(ErrJoinRefused, "join response: certificate is for role %s, the token's is %s", id.Role, token.role)
	}
	return cert, trust, nil
}

// TLSCertificate assembles a TLS certificate from an issued leaf, the CA
// certificate (both DER) and the leaf's key. The CA goes in the chain so
// that a joiner, which knows only the CA's fingerprint, can pin it.
func TLSCertificate(leafDER, caDER []byte, key crypto.Signer) (*tls.Certificate, error) {
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		return nil, invalid(ErrUntrusted, "certificate: parse: %v", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return nil, invalid(ErrUntrusted, "certificate %s is not for this key", serialOf(leaf))
	}
	return &tls.Certificate{
		Certificate: [][]byte{leafDER, caDER},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}

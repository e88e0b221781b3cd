package structs

import "fmt"

// ClusterPKI is the cluster CA (key included) and the two join tokens
// (secrets included), as Raft and the servers' state stores keep them. It
// is the most secret object of the cluster: no API answer ever carries it,
// and fmt prints a redacted form. CA and Tokens are what pki.CA.Marshal and
// pki.Tokens.Marshal wrote.
type ClusterPKI struct {
	CA            []byte
	Tokens        []byte
	CAFingerprint string
	CreateIndex   uint64
	ModifyIndex   uint64
}

func (p ClusterPKI) String() string {
	return fmt.Sprintf("ClusterPKI{CA %s, tokens redacted, index %d/%d}", p.CAFingerprint, p.CreateIndex, p.ModifyIndex)
}

// GoString is String.
func (p ClusterPKI) GoString() string { return p.String() }

// Format prints String for every verb, so that no verb prints the key.
func (p ClusterPKI) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(p.String())) }

// PKIInitRequest stores the cluster PKI the first server created. It is
// applied only while the state holds none: every later one is a no-op, so
// two servers racing to store theirs cannot replace a CA in use.
type PKIInitRequest struct {
	PKI ClusterPKI
}

// Format keeps the request redacted.
func (r PKIInitRequest) Format(f fmt.State, _ rune) {
	_, _ = f.Write([]byte("PKIInitRequest{" + r.PKI.String() + "}"))
}

// PKITokensRequest replaces the join tokens (a rotation). CAFingerprint
// must be the stored CA's: tokens of another CA are refused.
type PKITokensRequest struct {
	Tokens        []byte
	CAFingerprint string
}

// Format keeps the request redacted.
func (r PKITokensRequest) Format(f fmt.State, _ rune) {
	_, _ = f.Write([]byte("PKITokensRequest{CA " + r.CAFingerprint + ", tokens redacted}"))
}

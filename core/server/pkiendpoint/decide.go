package pkiendpoint

import (
	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/structs"
)

// The rules of the PKI endpoints, apart from the reads, issuing and
// writes that surround them.

// parseRole is the role a join token is for.
func parseRole(role string) (pki.Role, error) {
	switch r := pki.Role(role); r {
	case pki.RoleServer, pki.RoleClient:
		return r, nil
	}
	return "", structs.NewError(structs.ErrInvalid, "join token role %q must be %q or %q", role, pki.RoleServer, pki.RoleClient)
}

// checkInit allows storing a cluster PKI whose tokens and fingerprint
// are its CA's and, on a server that trusts a CA (trust not nil), whose
// CA is that one.
func checkInit(p structs.ClusterPKI, trust *pki.Trust) error {
	ca, err := pki.UnmarshalCA(p.CA)
	if err != nil {
		return structs.NewError(structs.ErrInvalid, "cluster PKI: CA: %v", err)
	}
	toks, err := pki.UnmarshalTokens(p.Tokens)
	if err != nil {
		return structs.NewError(structs.ErrInvalid, "cluster PKI: tokens: %v", err)
	}
	if ca.Fingerprint() != p.CAFingerprint || toks.Get(pki.RoleServer).CAFingerprint() != ca.Fingerprint() ||
		toks.Get(pki.RoleClient).CAFingerprint() != ca.Fingerprint() {
		return structs.NewError(structs.ErrInvalid, "cluster PKI: the tokens and the CAFingerprint must be the CA's")
	}
	if trust != nil && ca.Fingerprint() != trust.Fingerprint() {
		return structs.NewError(structs.ErrInvalid, "cluster PKI: CA %s is not the one this cluster trusts (%s)", ca.Fingerprint(), trust.Fingerprint())
	}
	return nil
}

// checkNodeIDFree allows a client to join as node id unless a registered
// node that is not down (n, nil: none) holds the ID.
func checkNodeIDFree(id string, n *structs.Node) error {
	if n != nil && n.Status != structs.NodeStatusDown {
		return structs.NewError(structs.ErrPermissionDenied, "Permission denied: node ID %q belongs to a registered node that is not down", id)
	}
	return nil
}

func roleOf(r *pki.JoinRequest) string {
	if r == nil {
		return ""
	}
	return string(r.Role)
}

func tokenIDOf(r *pki.JoinRequest) string {
	if r == nil {
		return ""
	}
	return r.TokenID
}

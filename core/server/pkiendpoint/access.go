package pkiendpoint

import (
	"context"
	"sort"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// Access is who may call one RPC method. A method missing from the
// server's table is server-only: a method added without a thought for
// its callers is safe.
type Access struct {
	// Public methods need no certificate: the join exchange only.
	Public bool
	// Check decides for an authenticated caller (nil: any identity).
	Check func(id pki.Identity, req any) error
}

// ForNode lets a server call, or the client whose node ID the request
// names (nodeID reads it from the request); action names the call for
// the refusal.
func ForNode(action string, nodeID func(req any) string) Access {
	return Access{Check: func(id pki.Identity, req any) error { return id.RequireNode(nodeID(req), action) }}
}

// PublicMethods are the methods of rules a caller without a certificate
// may reach, sorted.
func PublicMethods(rules map[string]Access) []string {
	var out []string
	for m, rule := range rules {
		if rule.Public {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// PeerIdentity is the verified identity of an RPC's caller, by trust
// (nil: this server runs without the cluster PKI, and nobody has one).
func PeerIdentity(ctx context.Context, trust *pki.Trust) (pki.Identity, error) {
	if trust == nil {
		return pki.Identity{}, structs.NewError(structs.ErrPermissionDenied, "Permission denied: this server runs without the cluster PKI")
	}
	st := rpc.PeerTLS(ctx)
	if st == nil {
		return pki.Identity{}, structs.NewError(structs.ErrPermissionDenied, "Permission denied: the caller presented no certificate")
	}
	return trust.PeerIdentity(*st)
}

// Authorizer decides every RPC by the caller's certificate and rules.
// Only with the cluster PKI (trust not nil): with operator-supplied
// certificates, which carry no drover identity, any certificate of the CA
// may call anything, and Authorizer is nil.
func Authorizer(trust *pki.Trust, rules map[string]Access) rpc.Authorizer {
	if trust == nil {
		return nil
	}
	return func(ctx context.Context, method string, req any) error {
		return authorize(rules, method, req, func() (pki.Identity, error) { return PeerIdentity(ctx, trust) })
	}
}

// PreAuthorizer refuses, before the request is read, a call whose method
// the caller's certificate can never be allowed: server-only methods to a
// client (or to a caller without a valid identity). Calls that the
// Authorizer decides from the request pass. Nil without the cluster PKI.
func PreAuthorizer(trust *pki.Trust, rules map[string]Access) rpc.PreAuthorizer {
	if trust == nil {
		return nil
	}
	return func(ctx context.Context, method string) error {
		return preAuthorize(rules, method, func() (pki.Identity, error) { return PeerIdentity(ctx, trust) })
	}
}

// authorize decides one call of method with req; identity verifies the
// caller, and is not asked for a public method.
func authorize(rules map[string]Access, method string, req any, identity func() (pki.Identity, error)) error {
	rule, listed := rules[method]
	if listed && rule.Public {
		return nil
	}
	id, err := identity()
	if err != nil {
		return err
	}
	if !listed {
		return id.RequireServer("call " + method)
	}
	if rule.Check == nil {
		return nil
	}
	return rule.Check(id, req)
}

// preAuthorize decides a call of method before its request is read:
// listed methods pass (authorize decides them), the rest need a server.
func preAuthorize(rules map[string]Access, method string, identity func() (pki.Identity, error)) error {
	if _, listed := rules[method]; listed {
		return nil
	}
	id, err := identity()
	if err != nil {
		return err
	}
	return id.RequireServer("call " + method)
}

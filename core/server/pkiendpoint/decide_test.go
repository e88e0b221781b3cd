package pkiendpoint

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/structs"
)

func TestParseRole(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want pki.Role
		bad  bool
	}{
		{in: "server", want: pki.RoleServer},
		{in: "client", want: pki.RoleClient},
		{in: "Server", bad: true},
		{in: "", bad: true},
	} {
		got, err := parseRole(tt.in)
		if tt.bad != (err != nil) || got != tt.want {
			t.Errorf("parseRole(%q) = %q, %v", tt.in, got, err)
		}
		if err != nil && !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("parseRole(%q): %v, want invalid", tt.in, err)
		}
	}
}

func TestCheckInit(t *testing.T) {
	ca, toks := newCA(t)
	other, otherToks := newCA(t)
	marshal := func(c *pki.CA, tk *pki.Tokens) structs.ClusterPKI {
		cb, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		tb, err := tk.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return structs.ClusterPKI{CA: cb, Tokens: tb, CAFingerprint: c.Fingerprint()}
	}
	good := marshal(ca, toks)
	wrongFP := good
	wrongFP.CAFingerprint = other.Fingerprint()
	mixed := marshal(ca, otherToks)
	mixed.CAFingerprint = ca.Fingerprint()
	garbled := good
	garbled.CA = []byte("nope")
	garbledTokens := good
	garbledTokens.Tokens = []byte("nope")
	tests := []struct {
		name  string
		p     structs.ClusterPKI
		trust *pki.Trust
		ok    bool
	}{
		{name: "the trusted CA", p: good, trust: ca.Trust(), ok: true},
		{name: "without trust, any consistent CA", p: marshal(other, otherToks), ok: true},
		{name: "another CA than the trusted one", p: marshal(other, otherToks), trust: ca.Trust()},
		{name: "fingerprint of another CA", p: wrongFP},
		{name: "tokens of another CA", p: mixed},
		{name: "CA unreadable", p: garbled},
		{name: "tokens unreadable", p: garbledTokens},
	}
	for _, tt := range tests {
		err := checkInit(tt.p, tt.trust)
		if tt.ok != (err == nil) {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", tt.name, err)
		}
	}
}

func TestCheckNodeIDFree(t *testing.T) {
	for _, tt := range []struct {
		name string
		node *structs.Node
		ok   bool
	}{
		{name: "unknown ID", ok: true},
		{name: "down node", node: &structs.Node{Status: structs.NodeStatusDown}, ok: true},
		{name: "ready node", node: &structs.Node{Status: structs.NodeStatusReady}},
		{name: "initializing node", node: &structs.Node{Status: structs.NodeStatusInit}},
	} {
		err := checkNodeIDFree("n1", tt.node)
		if tt.ok != (err == nil) {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, structs.ErrPermissionDenied) {
			t.Errorf("%s: %v, want permission denied", tt.name, err)
		}
	}
}

func TestAuthorize(t *testing.T) {
	server := pki.Identity{Role: pki.RoleServer, ID: "s1"}
	client := pki.Identity{Role: pki.RoleClient, ID: "node-a"}
	type nodeReq struct{ NodeID string }
	rules := map[string]Access{
		"PKI.Join":    {Public: true},
		"PKI.Renew":   {},
		"Node.Update": ForNode("update", func(r any) string { return r.(*nodeReq).NodeID }),
	}
	noCert := func() (pki.Identity, error) {
		return pki.Identity{}, structs.NewError(structs.ErrPermissionDenied, "no certificate")
	}
	as := func(id pki.Identity) func() (pki.Identity, error) {
		return func() (pki.Identity, error) { return id, nil }
	}
	tests := []struct {
		name     string
		method   string
		req      any
		identity func() (pki.Identity, error)
		allowed  bool
		// preAllowed: whether the PreAuthorizer lets the call through.
		preAllowed bool
	}{
		{"public without a certificate", "PKI.Join", nil, noCert, true, true},
		{"listed method without a certificate", "PKI.Renew", nil, noCert, false, true},
		{"listed method, any identity", "PKI.Renew", nil, as(client), true, true},
		{"per-node method, own node", "Node.Update", &nodeReq{"node-a"}, as(client), true, true},
		{"per-node method, another node", "Node.Update", &nodeReq{"node-b"}, as(client), false, true},
		{"per-node method, server", "Node.Update", &nodeReq{"node-b"}, as(server), true, true},
		{"unlisted method, server", "Job.Register", nil, as(server), true, true},
		{"unlisted method, client", "Job.Register", nil, as(client), false, false},
		{"unlisted method without a certificate", "Job.Register", nil, noCert, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := authorize(rules, tt.method, tt.req, tt.identity)
			if tt.allowed != (err == nil) {
				t.Errorf("authorize = %v, want allowed %v", err, tt.allowed)
			}
			if err != nil && !errors.Is(err, structs.ErrPermissionDenied) {
				t.Errorf("authorize refusal %v: want permission denied", err)
			}
			err = preAuthorize(rules, tt.method, tt.identity)
			if tt.preAllowed != (err == nil) {
				t.Errorf("preAuthorize = %v, want allowed %v", err, tt.preAllowed)
			}
		})
	}
	if got := PublicMethods(rules); !slices.Equal(got, []string{"PKI.Join"}) {
		t.Errorf("PublicMethods = %v", got)
	}
}

// Without the cluster PKI there is nothing to authorize with: any
// certificate of the CA may call anything.
func TestAuthorizersNeedTrust(t *testing.T) {
	if Authorizer(nil, nil) != nil || PreAuthorizer(nil, nil) != nil {
		t.Fatal("authorizers without trust")
	}
	ca, _ := newCA(t)
	az := Authorizer(ca.Trust(), map[string]Access{})
	if az == nil || PreAuthorizer(ca.Trust(), nil) == nil {
		t.Fatal("no authorizers with trust")
	}
	if err := az(context.Background(), "Job.Register", nil); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("a call without TLS: %v, want permission denied", err)
	}
}

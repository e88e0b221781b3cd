package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/hashicorp/go-hclog"
)

func TestNewCAClusterID(t *testing.T) {
	tests := []struct {
		id      string
		wantErr string
	}{
		{id: "c1"},
		{id: "0f8fad5b-d9cb-469f-a165-70999cba4b8e"},
		{id: "", wantErr: "1 to 63"},
		{id: strings.Repeat("a", 64), wantErr: "1 to 63"},
		{id: "Prod", wantErr: "a-z, 0-9"},
		{id: "a/b", wantErr: "a-z, 0-9"},
		{id: "-a", wantErr: "begin or end"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			ca, err := NewCA(tc.id, time.Now())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, structs.ErrInvalid) {
					t.Fatalf("err = %v, want invalid %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := ca.Trust().Certificate()
			if !c.IsCA || !c.MaxPathLenZero || c.MaxPathLen != 0 {
				t.Error("CA may sign intermediates")
			}
			if got := c.NotAfter.Sub(c.NotBefore); got < CAValidity {
				t.Errorf("validity %s, want at least %s", got, CAValidity)
			}
			if len(c.PermittedURIDomains) != 1 || c.PermittedURIDomains[0] != tc.id || !c.PermittedDNSDomainsCritical {
				t.Errorf("name constraints %v critical=%v", c.PermittedURIDomains, c.PermittedDNSDomainsCritical)
			}
			if _, ok := c.PublicKey.(*ecdsa.PublicKey); !ok {
				t.Errorf("key %T, want ECDSA", c.PublicKey)
			}
			if ca.ClusterID() != tc.id || len(ca.Fingerprint()) != 64 {
				t.Errorf("cluster %q fingerprint %q", ca.ClusterID(), ca.Fingerprint())
			}
			if want := fingerprintOf(c.Raw); ca.Fingerprint() != want {
				t.Errorf("fingerprint %s, want %s", ca.Fingerprint(), want)
			}
		})
	}
}

func TestCAMarshalRoundTrip(t *testing.T) {
	c := newCluster(t, "c1")
	data, err := c.ca.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalCA(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Fingerprint() != c.ca.Fingerprint() || back.ClusterID() != "c1" {
		t.Fatalf("round trip changed the CA: %v vs %v", back, c.ca)
	}
	// The restored CA signs certificates the original's trust accepts.
	key, _ := NewKey()
	cert, err := back.Issue(IssueRequest{PublicKey: key.Public(), Role: RoleClient, ID: "n1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ca.Trust().Verify([]*x509.Certificate{cert}, x509.ExtKeyUsageClientAuth, time.Now()); err != nil {
		t.Fatal(err)
	}

	other := newCluster(t, "c1")
	otherData, _ := other.ca.Marshal()
	mixed := append(bytes.Clone(data[:bytes.Index(data, []byte("-----BEGIN PRIVATE KEY"))]), otherData[bytes.Index(otherData, []byte("-----BEGIN PRIVATE KEY")):]...)
	bad := []struct {
		name, data, wantErr string
	}{
		{"empty", "", "want a CERTIFICATE and a PRIVATE KEY"},
		{"cert only", string(c.ca.CertPEM()), "want a CERTIFICATE and a PRIVATE KEY"},
		{"key of another CA", string(mixed), "does not belong"},
		{"foreign block", string(data) + "-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n", "unexpected PEM block"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UnmarshalCA([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}

	tr, err := NewTrust(c.ca.CertPEM())
	if err != nil || tr.Fingerprint() != c.ca.Fingerprint() || tr.ClusterID() != "c1" {
		t.Fatalf("NewTrust: %v %v", tr, err)
	}
	if _, err := NewTrust([]byte("nope")); err == nil {
		t.Fatal("NewTrust accepted garbage")
	}
}

// TestCANeverPrintsKey formats a CA every way a log or API answer could and
// looks for any spelling of the private key.
func TestCANeverPrintsKey(t *testing.T) {
	c := newCluster(t, "c1")
	ca := c.ca
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(ca.key)
	b64 := base64.StdEncoding.EncodeToString(pkcs8)
	raw, err := ca.key.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	d := new(big.Int).SetBytes(raw)
	forbidden := []string{d.String(), d.Text(16), hex.EncodeToString(raw), b64[40:80], "PRIVATE KEY"}

	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
		outs = append(outs, fmt.Sprintf(verb, ca), fmt.Sprintf(verb, *ca), fmt.Sprintf(verb, []any{ca}), fmt.Sprintf(verb, struct{ CA *CA }{ca}))
	}
	for _, v := range []any{ca, *ca, struct{ CA *CA }{ca}} {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(j))
	}
	for _, jsonFormat := range []bool{false, true} {
		var buf bytes.Buffer
		hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: jsonFormat}).Info("bootstrapped", "ca", ca, "value", *ca)
		outs = append(outs, buf.String())
	}
	for _, out := range outs {
		for _, f := range forbidden {
			if strings.Contains(out, f) {
				t.Fatalf("output reveals the CA key (%q): %s", f, out)
			}
		}
	}
	if s := ca.String(); !strings.Contains(s, ca.Fingerprint()) || !strings.Contains(s, "c1") {
		t.Errorf("String() = %q, want cluster and fingerprint", s)
	}
	var j struct{ Fingerprint, Certificate string }
	raw, _ = json.Marshal(ca)
	if err := json.Unmarshal(raw, &j); err != nil || j.Fingerprint != ca.Fingerprint() || !strings.Contains(j.Certificate, "BEGIN CERTIFICATE") {
		t.Errorf("JSON = %s, want fingerprint and certificate", raw)
	}
}

func TestIssue(t *testing.T) {
	c := newCluster(t, "c1")
	now := time.Now()
	key, _ := NewKey()
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	tests := []struct {
		name    string
		req     IssueRequest
		wantErr string
		wantTTL time.Duration
	}{
		{name: "server with hosts", req: IssueRequest{PublicKey: key.Public(), Role: RoleServer, ID: "srv1.global", DNSNames: []string{"localhost", "server.global.drover"}, IPAddresses: []net.IP{net.IPv4(10, 0, 0, 1)}}, wantTTL: DefaultTTL},
		{name: "client", req: IssueRequest{PublicKey: key.Public(), Role: RoleClient, ID: "0f8fad5b-d9cb-469f-a165-70999cba4b8e", TTL: time.Hour}, wantTTL: time.Hour},
		{name: "client with DNS", req: IssueRequest{PublicKey: key.Public(), Role: RoleClient, ID: "n1", DNSNames: []string{"leader.example.com"}}, wantErr: "client certificates name no hosts"},
		{name: "client with IP", req: IssueRequest{PublicKey: key.Public(), Role: RoleClient, ID: "n1", IPAddresses: []net.IP{net.IPv4(10, 0, 0, 1)}}, wantErr: "client certificates name no hosts"},
		{name: "unknown role", req: IssueRequest{PublicKey: key.Public(), Role: "admin", ID: "n1"}, wantErr: `role "admin"`},
		{name: "no ID", req: IssueRequest{PublicKey: key.Public(), Role: RoleClient}, wantErr: "1 to 128"},
		{name: "ID with slash", req: IssueRequest{PublicKey: key.Public(), Role: RoleClient, ID: "a/b"}, wantErr: "may hold only"},
		{name: "ID dot dot", req: IssueRequest{PublicKey: key.Public(), Role: RoleClient, ID: ".."}, wantErr: "may not be"},
		{name: "wildcard", req: IssueRequest{PublicKey: key.Public(), Role: RoleServer, ID: "s", DNSNames: []string{"*.example.com"}}, wantErr: "wildcards"},
		{name: "no key", req: IssueRequest{Role: RoleServer, ID: "s"}, wantErr: "public key is missing"},
		{name: "weak RSA", req: IssueRequest{PublicKey: weak.Public(), Role: RoleServer, ID: "s"}, wantErr: "1024 bits"},
		{name: "P-224", req: IssueRequest{PublicKey: p224.Public(), Role: RoleServer, ID: "s"}, wantErr: "P-224"},
		{name: "negative TTL", req: IssueRequest{PublicKey: key.Public(), Role: RoleServer, ID: "s", TTL: -time.Hour}, wantErr: "TTL"},
		{name: "TTL too long", req: IssueRequest{PublicKey: key.Public(), Role: RoleServer, ID: "s", TTL: MaxTTL + time.Hour}, wantErr: "TTL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cert, err := c.ca.Issue(tc.req, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Certificates hold whole seconds.
			if short := now.Add(tc.wantTTL).Sub(cert.NotAfter); short < 0 || short >= time.Second {
				t.Errorf("NotAfter %s, want now + %s", cert.NotAfter, tc.wantTTL)
			}
			if len(cert.ExtKeyUsage) != 2 {
				t.Errorf("ExtKeyUsage %v, want server and client auth", cert.ExtKeyUsage)
			}
			wantURI := "drover://c1/" + string(tc.req.Role) + "/" + tc.req.ID
			if len(cert.URIs) != 1 || cert.URIs[0].String() != wantURI {
				t.Errorf("URIs %v, want %s", cert.URIs, wantURI)
			}
			if len(cert.DNSNames) != len(tc.req.DNSNames) || len(cert.IPAddresses) != len(tc.req.IPAddresses) {
				t.Errorf("hosts %v %v, want %v %v", cert.DNSNames, cert.IPAddresses, tc.req.DNSNames, tc.req.IPAddresses)
			}
			for _, n := range tc.req.DNSNames {
				if err := cert.VerifyHostname(n); err != nil {
					t.Errorf("host %s: %v", n, err)
				}
			}
			id, err := c.ca.Trust().Verify([]*x509.Certificate{cert}, x509.ExtKeyUsageServerAuth, now)
			if err != nil || id != (Identity{ClusterID: "c1", Role: tc.req.Role, ID: tc.req.ID}) {
				t.Errorf("Verify = %v, %v", id, err)
			}
		})
	}

	// A certificate never outlives the CA.
	old, err := NewCA("c1", now.Add(-CAValidity+time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := old.Issue(IssueRequest{PublicKey: key.Public(), Role: RoleClient, ID: "n1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.NotAfter.Equal(old.Trust().Certificate().NotAfter) {
		t.Errorf("NotAfter %s past the CA's %s", cert.NotAfter, old.Trust().Certificate().NotAfter)
	}
}

// TestVerifyRefuses is what an RPC layer relies on: only a current
// certificate from this cluster's CA naming one identity of this cluster
// passes.
func TestVerifyRefuses(t *testing.T) {
	now := time.Now()
	c := newCluster(t, "c1")
	other := newCluster(t, "c2")
	sameName := newCluster(t, "c1") // another CA that calls itself c1
	caCert := c.ca.Trust().Certificate()
	key, _ := NewKey()
	forger, _ := NewKey()

	issue := func(ca *CA, role Role, id string, at time.Time, ttl time.Duration) *x509.Certificate {
		cert, err := ca.Issue(IssueRequest{PublicKey: key.Public(), Role: role, ID: id, TTL: ttl}, at)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	leaf := func(uris ...string) *x509.Certificate {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: "x"},
			NotBefore:   now.Add(-time.Hour),
			NotAfter:    now.Add(time.Hour),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		}
		for _, s := range uris {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			tmpl.URIs = append(tmpl.URIs, u)
		}
		return tmpl
	}
	// A forger copies the CA's name into a certificate of its own key.
	fakeCA := *caCert
	fakeCA.PublicKey = forger.Public()

	tests := []struct {
		name    string
		chain   []*x509.Certificate
		usage   x509.ExtKeyUsage
		want    Identity
		wantErr string
	}{
		{name: "server", chain: []*x509.Certificate{issue(c.ca, RoleServer, "s1", now, 0)}, want: Identity{"c1", RoleServer, "s1"}},
		{name: "client", chain: []*x509.Certificate{issue(c.ca, RoleClient, "n1", now, 0)}, usage: x509.ExtKeyUsageClientAuth, want: Identity{"c1", RoleClient, "n1"}},
		{name: "no certificate", wantErr: "no certificate"},
		{name: "another cluster's CA", chain: []*x509.Certificate{issue(other.ca, RoleServer, "s1", now, 0)}, wantErr: "unknown authority"},
		{name: "another CA with the same cluster ID", chain: []*x509.Certificate{issue(sameName.ca, RoleServer, "s1", now, 0)}, wantErr: "unknown authority"},
		{name: "expired", chain: []*x509.Certificate{issue(c.ca, RoleClient, "n1", now.Add(-100*time.Hour), time.Hour)}, wantErr: "expired"},
		{name: "not yet valid", chain: []*x509.Certificate{issue(c.ca, RoleClient, "n1", now.Add(time.Hour), time.Hour)}, wantErr: "not yet valid"},
		{name: "forged server SAN signed by another key", chain: []*x509.Certificate{signWith(t, leaf("drover://c1/server/s1"), &fakeCA, key.Public(), forger)}, wantErr: "not valid for cluster"},
		{name: "forged server SAN with the CA cert appended", chain: []*x509.Certificate{signWith(t, leaf("drover://c1/server/s1"), &fakeCA, key.Public(), forger), caCert}, wantErr: "not valid for cluster"},
		{name: "CA-signed for another cluster", chain: []*x509.Certificate{signWith(t, leaf("drover://c2/server/s1"), caCert, key.Public(), c.ca.key)}, wantErr: "not permitted"},
		{name: "two identities", chain: []*x509.Certificate{signWith(t, leaf("drover://c1/client/n1", "drover://c1/server/s1"), caCert, key.Public(), c.ca.key)}, wantErr: "exactly one"},
		{name: "no identity", chain: []*x509.Certificate{signWith(t, leaf(), caCert, key.Public(), c.ca.key)}, wantErr: "exactly one"},
		{name: "unknown role", chain: []*x509.Certificate{signWith(t, leaf("drover://c1/admin/x"), caCert, key.Public(), c.ca.key)}, wantErr: "unknown role"},
		{name: "extra path", chain: []*x509.Certificate{signWith(t, leaf("drover://c1/server/s1/x"), caCert, key.Public(), c.ca.key)}, wantErr: "malformed identity"},
		{name: "the CA itself", chain: []*x509.Certificate{caCert}, wantErr: "malformed identity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			usage := tc.usage
			if usage == 0 {
				usage = x509.ExtKeyUsageServerAuth
			}
			id, err := c.ca.Trust().Verify(tc.chain, usage, now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if !errors.Is(err, ErrUntrusted) || !errors.Is(err, structs.ErrPermissionDenied) {
					t.Errorf("err %v is not ErrUntrusted / permission denied", err)
				}
				return
			}
			if err != nil || id != tc.want {
				t.Fatalf("Verify = %v, %v; want %v", id, err, tc.want)
			}
		})
	}
}

func TestIdentityRules(t *testing.T) {
	srv := Identity{"c1", RoleServer, "s1"}
	cli := Identity{"c1", RoleClient, "n1"}
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"server touches raft", srv.RequireServer("add a Raft peer"), true},
		{"client touches raft", cli.RequireServer("add a Raft peer"), false},
		{"server acts for a node", srv.RequireNode("n2", "update allocs"), true},
		{"client acts for itself", cli.RequireNode("n1", "update allocs"), true},
		{"client acts for another", cli.RequireNode("n2", "update allocs"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", tc.err, tc.ok)
			}
			if tc.err != nil && (!errors.Is(tc.err, structs.ErrPermissionDenied) || !errors.Is(tc.err, ErrNotAllowed) || !strings.Contains(tc.err.Error(), "client n1")) {
				t.Errorf("err %v: want a permission-denied naming the caller", tc.err)
			}
		})
	}
}

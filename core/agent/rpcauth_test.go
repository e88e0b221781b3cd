package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
)

// rawRPC is a gRPC connection to an agent's RPC port that the test
// controls below drover's client: its source address (localIP, "" for any)
// and a count of the bytes it wrote.
type rawRPC struct {
	cc   *grpc.ClientConn
	sent atomic.Int64
}

func dialRaw(t *testing.T, addr string, cfg *tls.Config, localIP string) *rawRPC {
	t.Helper()
	r := &rawRPC{}
	d := &net.Dialer{Timeout: 10 * time.Second}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(credentials.NewTLS(cfg)),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", a)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: c, n: &r.sent}, nil
		}),
		grpc.WithDefaultCallOptions(grpc.CallContentSubtype(rpc.CodecName),
			grpc.MaxCallSendMsgSize(rpc.MaxMessageBytes), grpc.MaxCallRecvMsgSize(rpc.MaxMessageBytes)),
	)
	if err != nil {
		t.Fatal(err)
	}
	r.cc = cc
	t.Cleanup(func() { cc.Close() })
	return r
}

func (r *rawRPC) call(ctx context.Context, method string, req, resp any) error {
	return r.cc.Invoke(ctx, "/"+rpc.ServiceName+"/"+method, req, resp)
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// operatorCertFiles writes an operator CA and a server certificate of it.
func operatorCertFiles(t *testing.T, dir string) (ca *testCA, caPath, cert, key string) {
	t.Helper()
	ca = newTestCA(t, "operator-ca")
	caPath = filepath.Join(dir, "operator-ca.pem")
	if err := os.WriteFile(caPath, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key = ca.issue(t, dir, "operator-server", "server.global.drover", "localhost")
	return ca, caPath, cert, key
}

// selfRPCAuth is what GET /v1/agent/self says about RPC authentication,
// in stats and in the member tags.
func selfRPCAuth(t *testing.T, url string, tlsCfg *tls.Config) (stats, tag string) {
	t.Helper()
	code, body, err := get(url+"/v1/agent/self", tlsCfg)
	if err != nil || code != http.StatusOK {
		t.Fatalf("agent self: %d %v", code, err)
	}
	var self struct {
		Member struct{ Tags map[string]string } `json:"member"`
		Stats  struct {
			RPC struct{ Auth string } `json:"rpc"`
		} `json:"stats"`
	}
	if err := json.Unmarshal([]byte(body), &self); err != nil {
		t.Fatalf("agent self: %v", err)
	}
	return self.Stats.RPC.Auth, self.Member.Tags["rpc_auth"]
}

// A tls block with certificates for HTTPS only (no rpc = true) keeps RPC
// on the cluster PKI: a plaintext gRPC client, or a TLS one without a
// certificate, can neither add a Raft peer nor deregister a job, while the
// HTTPS API serves the operator's certificate and a client joins by token.
func TestHTTPSOnlyTLSKeepsRPCAuthenticated(t *testing.T) {
	dir := t.TempDir()
	ca, caPath, cert, key := operatorCertFiles(t, dir)
	rpcPort := freePort(t)
	rpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))
	cfg := pkiServerConfig(dir, "s1", rpcPort)
	cfg.TLS = &TLSConfig{HTTP: true, CAFile: caPath, CertFile: cert, KeyFile: key}
	srv, logs := mustPKIAgent(t, cfg, Options{})

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	addPeer := func(c *rpc.Conn) error {
		_, err := rpc.Call[server.RaftPeerArgs, server.Empty](ctx, c, "Operator.RaftAddPeer", &server.RaftPeerArgs{ID: "evil", Address: "127.0.0.1:1"})
		return err
	}
	deregister := func(c *rpc.Conn) error {
		_, err := rpc.Call[server.JobRefArgs, structs.JobDeregisterResponse](ctx, c, "Job.Deregister", &server.JobRefArgs{JobID: "web", Namespace: "default"})
		return err
	}
	plain := certConn(t, rpcAddr, nil)
	anon := certConn(t, rpcAddr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	for _, tc := range []struct {
		name string
		conn *rpc.Conn
		call func(*rpc.Conn) error
		want error
	}{
		{"plaintext: add a raft peer", plain, addPeer, structs.ErrUnavailable},
		{"plaintext: deregister a job", plain, deregister, structs.ErrUnavailable},
		{"TLS without a certificate: add a raft peer", anon, addPeer, structs.ErrPermissionDenied},
		{"TLS without a certificate: deregister a job", anon, deregister, structs.ErrPermissionDenied},
	} {
		if err := tc.call(tc.conn); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if peers, _ := srv.Server().Operator().RaftPeers(); len(peers.Servers) != 1 {
		t.Fatalf("raft peers after the refused adds: %+v", peers.Servers)
	}
	if strings.Contains(logs.String(), "INSECURE") {
		t.Fatal("an authenticated agent logged INSECURE")
	}

	// HTTPS serves the operator's certificate and says how RPC is
	// authenticated.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	stats, tag := selfRPCAuth(t, "https://"+srv.HTTPAddr(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if stats != rpcAuthPKI || tag != rpcAuthPKI {
		t.Fatalf("agent self: rpc auth %q, member tag %q, want %q", stats, tag, rpcAuthPKI)
	}

	// Agents still join and work over the cluster PKI.
	tok, err := srv.Server().PKI().JoinToken("client")
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := mustPKIAgent(t, pkiClientConfig(dir, "c1", rpcAddr, tok), Options{})
	waitNodeReady(t, srv, cli)
}

// The explicit opt-out is the only way to plaintext RPC, and it says so:
// one WARN line at start, and agent self shows it.
func TestRPCPlaintextOptOutIsLoud(t *testing.T) {
	dir := t.TempDir()
	_, caPath, cert, key := operatorCertFiles(t, dir)
	off := false
	for _, tc := range []struct {
		name  string
		tls   *TLSConfig
		https bool
	}{
		{"auto = false", &TLSConfig{Auto: &off}, false},
		{"auto = false with HTTPS certificates", &TLSConfig{Auto: &off, HTTP: true, CAFile: caPath, CertFile: cert, KeyFile: key}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rpcPort := freePort(t)
			cfg := pkiServerConfig(t.TempDir(), "s1", rpcPort)
			cfg.TLS = tc.tls
			a, logs := mustPKIAgent(t, cfg, Options{})
			var warn []string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "INSECURE") {
					warn = append(warn, l)
				}
			}
			if len(warn) != 1 || !strings.Contains(warn[0], "[WARN]") {
				t.Fatalf("want one WARN line about INSECURE RPC, got %q", warn)
			}
			url, cl := "http://"+a.HTTPAddr(), (*tls.Config)(nil)
			if tc.https {
				url, cl = "https://"+a.HTTPAddr(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
			}
			if stats, tag := selfRPCAuth(t, url, cl); stats != rpcAuthNone || tag != rpcAuthNone {
				t.Fatalf("agent self: rpc auth %q, member tag %q, want %q", stats, tag, rpcAuthNone)
			}
		})
	}
}

// Certificate, key and CA files named in the tls block are read and checked
// at start even when they serve nothing yet: the start fails with an error
// naming the file and the problem, and the agent leaves nothing running
// (its HTTP listener is closed, no cluster CA was made).
func TestTLSFilesCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	ca, caPath, cert, key := operatorCertFiles(t, dir)
	_, otherKey := ca.issue(t, dir, "other")
	expired := ca.issueExpired(t, dir, "expired")
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name         string
		tls          TLSConfig
		want1, want2 string
	}{
		{"passwd as certificate, nothing on", TLSConfig{CAFile: caPath, CertFile: "/etc/passwd", KeyFile: key}, "tls.cert_file /etc/passwd", "no PEM certificate"},
		{"passwd as certificate, https", TLSConfig{HTTP: true, CAFile: caPath, CertFile: "/etc/passwd", KeyFile: key}, "tls.cert_file /etc/passwd", "no PEM certificate"},
		{"passwd as key", TLSConfig{CAFile: caPath, CertFile: cert, KeyFile: "/etc/passwd"}, "tls.key_file /etc/passwd", "no PEM private key"},
		{"passwd as CA", TLSConfig{HTTP: true, CAFile: "/etc/passwd", CertFile: cert, KeyFile: key}, "tls.ca_file /etc/passwd", "no PEM certificate"},
		{"missing certificate", TLSConfig{HTTP: true, CAFile: caPath, CertFile: missing, KeyFile: key}, "tls.cert_file " + missing, "no such file"},
		{"key of another certificate", TLSConfig{HTTP: true, CAFile: caPath, CertFile: cert, KeyFile: otherKey}, "tls.cert_file " + cert, "tls.key_file " + otherKey},
		{"expired certificate", TLSConfig{HTTP: true, CAFile: caPath, CertFile: expired, KeyFile: key}, "tls.cert_file " + expired, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pkiServerConfig(t.TempDir(), "s1", freePort(t))
			tlsCfg := tc.tls
			cfg.TLS = &tlsCfg
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			logs := &lockedBuffer{}
			a, err := New(cfg, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs}), SelfExe: os.Args[0], HTTPListener: ln,
				PluginEnv: []string{testPluginEnv + "=1"}})
			if err == nil {
				a.Shutdown()
				t.Fatal("the agent started")
			}
			if !strings.Contains(err.Error(), tc.want1) || !strings.Contains(err.Error(), tc.want2) {
				t.Fatalf("start error %q, want it to name %q and %q", err, tc.want1, tc.want2)
			}
			if c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second); err == nil {
				c.Close()
				t.Fatal("the failed agent's HTTP listener is still open")
			}
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "server", "pki", "ca.json")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the failed agent made a cluster CA: %v", err)
			}
		})
	}
}

// An unauthenticated caller cannot make a server read a large request:
// 60 MB to a server-only method, or to the join method, is refused after
// at most a flow-control window of it was sent, not after all of it. Nor
// can a client's certificate, for a method only servers may call.
func TestUnauthenticatedLargeRequestRefusedBeforeRead(t *testing.T) {
	dir := t.TempDir()
	rpcPort := freePort(t)
	rpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))
	srv, _ := mustPKIAgent(t, pkiServerConfig(dir, "s1", rpcPort), Options{})
	tokText, err := srv.Server().PKI().JoinToken("client")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := pki.ParseJoinToken(tokText)
	const size = 60 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	for _, tc := range []struct {
		method string
		req    any
		want   codes.Code
	}{
		{"Operator.RaftAddPeer", &server.RaftPeerArgs{ID: strings.Repeat("x", size), Address: "127.0.0.1:1"}, codes.PermissionDenied},
		{"PKI.Join", &pki.JoinRequest{CSR: make([]byte, size)}, codes.ResourceExhausted},
	} {
		c := dialRaw(t, rpcAddr, pki.PinnedTLSConfig(tok), "")
		err := c.call(ctx, tc.method, tc.req, &server.Empty{})
		if status.Code(err) != tc.want {
			t.Fatalf("%s, 60 MB without a certificate: %v, want %s", tc.method, err, tc.want)
		}
		if n := c.sent.Load(); n > 2<<20 {
			t.Fatalf("%s: the server let a caller without a certificate send %d bytes before refusing it", tc.method, n)
		}
	}

	// A client's certificate is refused a server-only method from the
	// call's headers too, before its body is read.
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := srv.pki.localCA.Issue(pki.IssueRequest{PublicKey: key.Public(), Role: pki.RoleClient, ID: "node-x"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pki.TLSCertificate(leaf.Raw, srv.pki.trust.Certificate().Raw, key)
	if err != nil {
		t.Fatal(err)
	}
	store, err := pki.NewCertStore(cert)
	if err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, rpcAddr, pki.ClientTLSConfig(store, srv.pki.trust, pki.RoleServer), "")
	err = c.call(ctx, "Operator.RaftAddPeer", &server.RaftPeerArgs{ID: strings.Repeat("x", size), Address: "127.0.0.1:1"}, &server.Empty{})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a client certificate, 60 MB to a server-only method: %v, want PermissionDenied", err)
	}
	if n := c.sent.Load(); n > 2<<20 {
		t.Fatalf("the server let a client certificate send %d bytes to a server-only method before refusing it", n)
	}
	if peers, _ := srv.Server().Operator().RaftPeers(); len(peers.Servers) != 1 {
		t.Fatalf("raft peers: %+v", peers.Servers)
	}
}

// A flood of join challenges (4,096 and more, from several source
// addresses) does not keep an agent from joining.
func TestJoinDuringChallengeFlood(t *testing.T) {
	dir := t.TempDir()
	rpcPort := freePort(t)
	rpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))
	srv, _ := mustPKIAgent(t, pkiServerConfig(dir, "s1", rpcPort), Options{})
	tokText, err := srv.Server().PKI().JoinToken("client")
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := pki.ParseJoinToken(tokText)

	// The flood comes from 127.0.0.2-9, the joiner from 127.0.0.1: every
	// flooding host has one connection and four callers on it.
	var requested, granted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for h := 2; h <= 9; h++ {
		c := dialRaw(t, rpcAddr, pki.PinnedTLSConfig(tok), fmt.Sprintf("127.0.0.%d", h))
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := c.call(cctx, "PKI.JoinChallenge", &server.Empty{}, &server.JoinChallengeReply{})
					cancel()
					requested.Add(1)
					if err == nil {
						granted.Add(1)
					}
				}
			}()
		}
	}
	waitFor(t, "4,096 flooding challenge requests", func() (bool, string) {
		return requested.Load() >= pki.MaxPendingChallenges, fmt.Sprintf("%d requested", requested.Load())
	})
	cli, logs, err := startPKIAgent(t, pkiClientConfig(dir, "c1", rpcAddr, tokText), Options{JoinWait: testTimeout})
	if err != nil {
		t.Fatalf("join during a flood of %d challenge requests (%d granted): %v\n%s", requested.Load(), granted.Load(), err, logs)
	}
	waitNodeReady(t, srv, cli)
	t.Logf("joined during a flood of %d challenge requests, %d granted", requested.Load(), granted.Load())
}

// issueExpired writes a certificate of ca that expired an hour ago (its
// key is not written: the expiry is found first) and returns its path.
func (ca *testCA) issueExpired(t *testing.T, dir, name string) string {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A client whose server is unreachable when it starts keeps trying to join,
// with a WARN line per attempt, and joins once the server is back (that a
// wrong token ends the start at once is TestPKIJoinAuthorizeRotate's).
func TestJoinRetriesUnreachableServer(t *testing.T) {
	testtier.Agent(t)
	dir := t.TempDir()
	rpcPort := freePort(t)
	rpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))
	srvCfg := pkiServerConfig(dir, "s1", rpcPort)
	srv, _ := mustPKIAgent(t, srvCfg, Options{})
	tok, err := srv.Server().PKI().JoinToken("client")
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	type result struct {
		a   *Agent
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := New(pkiClientConfig(dir, "c1", rpcAddr, tok), Options{
			Logger:  hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs}),
			SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{testPluginEnv + "=1"}, JoinWait: 2 * testTimeout,
		})
		done <- result{a, err}
	}()
	var cli *Agent
	t.Cleanup(func() {
		if cli == nil {
			if r := <-done; r.a != nil {
				r.a.Shutdown()
			}
		}
	})
	waitFor(t, "the client to retry its join", func() (bool, string) {
		return strings.Count(logs.String(), "join failed; retrying") >= 2, "not yet"
	})
	srv, _ = mustPKIAgent(t, srvCfg, Options{})
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("client start: %v\n%s", r.err, logs)
		}
		cli = r.a
		t.Cleanup(cli.Shutdown)
	case <-time.After(2 * testTimeout):
		t.Fatalf("the client did not join once the server was back\n%s", logs)
	}
	waitNodeReady(t, srv, cli)
	if !strings.Contains(logs.String(), "[WARN]") || !strings.Contains(logs.String(), "attempt=") {
		t.Fatalf("the retries are not logged as warnings with their attempt:\n%s", logs)
	}
}

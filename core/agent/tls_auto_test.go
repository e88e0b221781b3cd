package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
)

// startPKIAgent is startTestAgent with options; the error is returned.
func startPKIAgent(t *testing.T, cfg *Config, opts Options) (*Agent, *lockedBuffer, error) {
	t.Helper()
	testtier.Agent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	opts.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: logs})
	opts.SelfExe, opts.HTTPListener, opts.PluginEnv = os.Args[0], ln, []string{testPluginEnv + "=1"}
	a, err := New(cfg, opts)
	if err != nil {
		return nil, logs, err
	}
	t.Cleanup(func() {
		a.Shutdown()
		if t.Failed() {
			t.Logf("--- %s log ---\n%s", cfg.NodeName, logs)
		}
	})
	return a, logs, nil
}

func mustPKIAgent(t *testing.T, cfg *Config, opts Options) (*Agent, *lockedBuffer) {
	t.Helper()
	a, logs, err := startPKIAgent(t, cfg, opts)
	if err != nil {
		t.Fatalf("New %s: %v\n%s", cfg.NodeName, err, logs)
	}
	return a, logs
}

func pkiServerConfig(dir, name string, rpcPort int) *Config {
	return &Config{
		NodeName: name, Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, name), BindAddr: "127.0.0.1",
		LogLevel: "INFO", Ports: &Ports{RPC: rpcPort},
		Server: &ServerConfig{Enabled: true, BootstrapExpect: 1},
	}
}

func pkiClientConfig(dir, name, rpcAddr, token string) *Config {
	return &Config{
		NodeName: name, Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, name), BindAddr: "127.0.0.1",
		LogLevel: "INFO",
		Client:   &ClientConfig{Enabled: true, Servers: []string{rpcAddr}, JoinToken: token},
	}
}

func waitNodeReady(t *testing.T, srv, cli *Agent) {
	t.Helper()
	waitFor(t, "node "+cli.cfg.NodeName+" ready", func() (bool, string) {
		n, _ := srv.Server().State().NodeByID(nil, cli.Client().NodeID())
		if n == nil {
			return false, "no node"
		}
		return n.Status == structs.NodeStatusReady, n.Status
	})
}

// certConn dials addr presenting cert (nil: none, pinned to the CA of
// trust through tok).
func certConn(t *testing.T, addr string, cfg *tls.Config) *rpc.Conn {
	t.Helper()
	conn, err := rpc.Dial(addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func agentTLS(t *testing.T, a *Agent) *tls.Config {
	t.Helper()
	store, err := pki.NewCertStore(a.pki.store.Current())
	if err != nil {
		t.Fatal(err)
	}
	return pki.ClientTLSConfig(store, a.pki.trust, pki.RoleServer)
}

func TestPKIJoinAuthorizeRotate(t *testing.T) {
	dir := t.TempDir()
	rpcPort := freePort(t)
	rpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))
	srv, srvLogs := mustPKIAgent(t, pkiServerConfig(dir, "s1", rpcPort), Options{})
	clientTok, err := srv.Server().PKI().JoinToken("client")
	if err != nil {
		t.Fatal(err)
	}
	serverTok, err := srv.Server().PKI().JoinToken("server")
	if err != nil {
		t.Fatal(err)
	}
	// The CA's files are private.
	for _, f := range []string{"server/pki/ca.json", "server/pki/tokens.json"} {
		st, err := os.Stat(filepath.Join(dir, "s1", f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v", f, err, st.Mode())
		}
	}
	// The leader stores the CA in Raft.
	waitFor(t, "the PKI in the state", func() (bool, string) {
		p, _ := srv.Server().State().PKI(nil)
		return p != nil, "none"
	})

	ca, _ := mustPKIAgent(t, pkiClientConfig(dir, "ca", rpcAddr, clientTok), Options{})
	cb, _ := mustPKIAgent(t, pkiClientConfig(dir, "cb", rpcAddr, clientTok), Options{})
	waitNodeReady(t, srv, ca)
	waitNodeReady(t, srv, cb)
	if ca.pki.id != ca.Client().NodeID() {
		t.Fatalf("client certificate names %q, node ID is %q", ca.pki.id, ca.Client().NodeID())
	}

	tok, _ := pki.ParseJoinToken(clientTok)
	anon := certConn(t, rpcAddr, pki.PinnedTLSConfig(tok))
	plain := certConn(t, rpcAddr, nil)
	asA := certConn(t, rpcAddr, agentTLS(t, ca))
	nA, _ := srv.Server().State().NodeByID(nil, ca.Client().NodeID())
	secretA := nA.SecretID
	nodeA, nodeB := ca.Client().NodeID(), cb.Client().NodeID()

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	type callFn func(c *rpc.Conn) error
	addPeer := func(c *rpc.Conn) error {
		_, err := rpc.Call[server.RaftPeerArgs, server.Empty](ctx, c, "Operator.RaftAddPeer", &server.RaftPeerArgs{ID: "evil", Address: "127.0.0.1:1"})
		return err
	}
	register := func(c *rpc.Conn) error {
		_, err := rpc.Call[server.NodeRegisterArgs, server.TTLReply](ctx, c, "Node.Register", &server.NodeRegisterArgs{Node: &structs.Node{ID: "fake-node", SecretID: "x", Datacenter: "dc1", Name: "fake"}})
		return err
	}
	allocsOf := func(node, secret string) callFn {
		return func(c *rpc.Conn) error {
			_, err := rpc.Call[server.NodeAllocsArgs, server.NodeAllocsReply](ctx, c, "Node.GetAllocs", &server.NodeAllocsArgs{NodeID: node, SecretID: secret})
			return err
		}
	}
	jobRegister := func(c *rpc.Conn) error {
		_, err := rpc.Call[server.JobRegisterArgs, structs.JobRegisterResponse](ctx, c, "Job.Register", &server.JobRegisterArgs{})
		return err
	}
	serverInfo := func(c *rpc.Conn) error {
		_, err := rpc.Call[server.Empty, server.ServerInfo](ctx, c, "Status.ServerInfo", &server.Empty{})
		return err
	}
	for _, tc := range []struct {
		name string
		conn *rpc.Conn
		call callFn
		want error // nil: allowed
	}{
		{"plaintext add peer", plain, addPeer, structs.ErrUnavailable},
		{"plaintext register", plain, register, structs.ErrUnavailable},
		{"no certificate: add peer", anon, addPeer, structs.ErrPermissionDenied},
		{"no certificate: register node", anon, register, structs.ErrPermissionDenied},
		{"no certificate: read allocs", anon, allocsOf(nodeA, secretA), structs.ErrPermissionDenied},
		{"no certificate: server info", anon, serverInfo, structs.ErrPermissionDenied},
		{"client: add peer", asA, addPeer, structs.ErrPermissionDenied},
		{"client: job register", asA, jobRegister, structs.ErrPermissionDenied},
		{"client: server info", asA, serverInfo, nil},
		{"client: register another node", asA, register, structs.ErrPermissionDenied},
		{"client A reads node B's allocs", asA, allocsOf(nodeB, secretA), structs.ErrPermissionDenied},
		{"client A reads its own allocs", asA, allocsOf(nodeA, secretA), nil},
	} {
		err := tc.call(tc.conn)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if peers, _ := srv.Server().Operator().RaftPeers(); len(peers.Servers) != 1 {
		t.Fatalf("raft peers after the refused adds: %+v", peers.Servers)
	}

	// A wrong token (right CA, wrong secret) is refused without echoing
	// any secret.
	other, err := pki.NewTokens(tok.CAFingerprint(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	wrong := other.Get(pki.RoleClient).Reveal()
	_, logs, err := startPKIAgent(t, pkiClientConfig(dir, "wrong", rpcAddr, wrong), Options{JoinWait: 20 * time.Second})
	if !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("join with a wrong token: %v\n%s", err, logs)
	}
	for _, secret := range []string{wrong, clientTok, serverTok} {
		s := secret[strings.LastIndex(secret, "-")+1:]
		if strings.Contains(err.Error(), s) || strings.Contains(logs.String(), s) || strings.Contains(srvLogs.String(), s) {
			t.Fatalf("a token secret leaked into an error or log")
		}
	}

	// A join may not take the node ID of a live node.
	if err := os.MkdirAll(filepath.Join(dir, "squat", "client"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "squat", "client", "node-id"), []byte(nodeA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, logs, err := startPKIAgent(t, pkiClientConfig(dir, "squat", rpcAddr, clientTok), Options{JoinWait: 20 * time.Second}); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("join as the live node %s: %v\n%s", nodeA, err, logs)
	}

	// Raft over the mux needs a server certificate: a client's is cut off.
	raftConn, err := tls.Dial("tcp", rpcAddr, agentTLS(t, ca))
	if err == nil {
		_, _ = raftConn.Write([]byte{rpc.RaftTag, 0, 0, 0})
		_ = raftConn.SetReadDeadline(time.Now().Add(testTimeout))
		if n, rerr := raftConn.Read(make([]byte, 1)); rerr == nil {
			t.Fatalf("a client certificate got a Raft connection (read %d bytes)", n)
		}
		raftConn.Close()
	}
	if !strings.Contains(srvLogs.String(), "raft connection refused") {
		waitFor(t, "the mux to log the refused Raft connection", func() (bool, string) {
			return strings.Contains(srvLogs.String(), "raft connection refused"), "not logged"
		})
	}

	// The HTTP API shows the token and rotates it.
	httpGet := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+srv.HTTPAddr()+path, nil)
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Role, Token string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Token
	}
	if st, got := httpGet(http.MethodGet, "/v1/operator/join-token/client"); st != http.StatusOK || got != clientTok {
		t.Fatalf("GET join-token/client: %d, same token %v", st, got == clientTok)
	}
	if st, _ := httpGet(http.MethodGet, "/v1/operator/join-token/nobody"); st != http.StatusBadRequest {
		t.Fatalf("GET join-token/nobody: %d, want 400", st)
	}

	// Rotation: the old client token joins no more; joined agents carry on.
	st, newTok := httpGet(http.MethodPut, "/v1/operator/join-token/client/rotate")
	if st != http.StatusOK || newTok == "" {
		t.Fatalf("PUT join-token/client/rotate: %d", st)
	}
	if newTok == clientTok {
		t.Fatal("rotation kept the token")
	}
	if got, _ := srv.Server().PKI().JoinToken("client"); got != newTok {
		t.Fatal("JoinToken does not show the rotated token")
	}
	if _, logs, err := startPKIAgent(t, pkiClientConfig(dir, "late", rpcAddr, clientTok), Options{JoinWait: 20 * time.Second}); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("join with the rotated-out token: %v\n%s", err, logs)
	}
	late, _ := mustPKIAgent(t, pkiClientConfig(dir, "late2", rpcAddr, newTok), Options{})
	waitNodeReady(t, srv, late)
	if err := allocsOf(nodeA, secretA)(certConn(t, rpcAddr, agentTLS(t, ca))); err != nil {
		t.Fatalf("client A after the rotation: %v", err)
	}

	// A restarted client uses its stored certificate: no token needed.
	ca.Shutdown()
	again, _ := mustPKIAgent(t, pkiClientConfig(dir, "ca", rpcAddr, ""), Options{})
	if again.Client().NodeID() != nodeA {
		t.Fatalf("restarted client is node %s, was %s", again.Client().NodeID(), nodeA)
	}
	waitNodeReady(t, srv, again)
}

func TestPKIRenewalKeepsTasks(t *testing.T) {
	dir := t.TempDir()
	rpcPort := freePort(t)
	rpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))
	opts := Options{CertTTL: 12 * time.Second}
	srv, _ := mustPKIAgent(t, pkiServerConfig(dir, "s1", rpcPort), opts)
	tok, err := srv.Server().PKI().JoinToken("client")
	if err != nil {
		t.Fatal(err)
	}
	cli, _ := mustPKIAgent(t, pkiClientConfig(dir, "c1", rpcAddr, tok), opts)
	waitNodeReady(t, srv, cli)
	first := cli.pki.store.Current().Leaf
	srvFirst := srv.pki.store.Current().Leaf
	waitFor(t, "the client and server certificates renewed", func() (bool, string) {
		c, s := cli.pki.store.Current().Leaf, srv.pki.store.Current().Leaf
		return c.SerialNumber.Cmp(first.SerialNumber) != 0 && s.SerialNumber.Cmp(srvFirst.SerialNumber) != 0, "same serials"
	})
	renewed := cli.pki.store.Current().Leaf
	if !renewed.NotAfter.After(first.NotAfter) {
		t.Fatalf("renewed certificate ends %s, the first %s", renewed.NotAfter, first.NotAfter)
	}
	// The renewed certificate is persisted and the node keeps working on
	// new connections.
	// (or a later one: renewals go on every 8 s here).
	stored, err := loadStoredCert(filepath.Join(dir, "c1", "pki"))
	if err != nil || stored == nil || stored.Leaf.NotAfter.Before(renewed.NotAfter) {
		t.Fatalf("stored certificate is not the renewed one: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn := certConn(t, rpcAddr, agentTLS(t, cli))
	n0, _ := srv.Server().State().NodeByID(nil, cli.Client().NodeID())
	if _, err := rpc.Call[server.NodeAuthArgs, server.TTLReply](ctx, conn, "Node.Heartbeat", &server.NodeAuthArgs{NodeID: n0.ID, SecretID: n0.SecretID}); err != nil {
		t.Fatalf("heartbeat with the renewed certificate: %v", err)
	}
	n, _ := srv.Server().State().NodeByID(nil, cli.Client().NodeID())
	if n == nil || n.Status != structs.NodeStatusReady {
		t.Fatalf("node after renewal: %v", n)
	}
}

// tls { http = true } without operator certificates serves HTTPS with the
// cluster CA's certificate; the config has no auto opt-out.
func TestPKIHTTPS(t *testing.T) {
	dir := t.TempDir()
	cfg := pkiServerConfig(dir, "s1", freePort(t))
	cfg.TLS = &TLSConfig{HTTP: true}
	srv, _ := mustPKIAgent(t, cfg, Options{})
	pool := srv.pki.trust.Pool()
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, Timeout: testTimeout}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get("https://" + srv.HTTPAddr() + "/v1/agent/self")
	if err != nil {
		t.Fatalf("HTTPS with the cluster CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestValidateAutoTLS(t *testing.T) {
	ca, err := pki.NewCA("c1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	toks, err := pki.NewTokens(ca.Fingerprint(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTok, cliTok := toks.Get(pki.RoleServer).Reveal(), toks.Get(pki.RoleClient).Reveal()
	off := false
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" valid
	}{
		{"server token as client token", Config{Client: &ClientConfig{JoinToken: srvTok}}, "client.join_token"},
		{"client token as server token", Config{Server: &ServerConfig{ServerJoin: &ServerJoin{Token: cliTok}}}, "server.server_join.token"},
		{"malformed token", Config{Client: &ClientConfig{JoinToken: "DRJT-1-nope"}}, "client.join_token"},
		{"right tokens", Config{Client: &ClientConfig{JoinToken: cliTok}, Server: &ServerConfig{ServerJoin: &ServerJoin{Token: srvTok}}}, ""},
		{"some cert files", Config{TLS: &TLSConfig{CAFile: "ca.pem"}}, "tls: ca_file, cert_file and key_file"},
		{"auto off, tls on, no files", Config{TLS: &TLSConfig{RPC: true, Auto: &off}}, "auto = false"},
		{"http without files", Config{TLS: &TLSConfig{HTTP: true}}, ""},
		{"cert_ttl too short", Config{TLS: &TLSConfig{CertTTL: "1s"}}, "tls.cert_ttl"},
		{"cert_ttl garbage", Config{TLS: &TLSConfig{CertTTL: "soon"}}, "tls.cert_ttl"},
	} {
		err := tc.cfg.validateAutoTLS()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error naming %q", tc.name, err, tc.want)
		case err != nil && (strings.Contains(err.Error(), srvTok[len(srvTok)-20:]) || strings.Contains(err.Error(), cliTok[len(cliTok)-20:])):
			t.Errorf("%s: the error quotes a token secret", tc.name)
		}
	}
}

// The stored certificate is one file: a renewal replaces chain and key
// together; the two files of older agents are still read and are removed by
// the next save.
func TestStoredCertFile(t *testing.T) {
	ca, err := pki.NewCA("c1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	issue := func(t *testing.T) *tls.Certificate {
		t.Helper()
		key, err := pki.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := ca.Issue(pki.IssueRequest{PublicKey: key.Public(), Role: pki.RoleClient, ID: "n1"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cert, err := pki.TLSCertificate(leaf.Raw, ca.Trust().Certificate().Raw, key)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	dir := t.TempDir()
	if got, err := loadStoredCert(dir); got != nil || err != nil {
		t.Fatalf("empty dir: %v, %v", got, err)
	}

	// An older agent's pair is read.
	old := issue(t)
	if err := saveCert(dir, old); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, storedCertFile))
	if err != nil {
		t.Fatal(err)
	}
	keyAt := strings.Index(string(data), "-----BEGIN "+storedKeyPEMType)
	if keyAt < 0 {
		t.Fatalf("no key in %s", storedCertFile)
	}
	for name, b := range map[string][]byte{legacyCertFile: data[:keyAt], legacyKeyFile: data[keyAt:]} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, storedCertFile)); err != nil {
		t.Fatal(err)
	}
	got, err := loadStoredCert(dir)
	if err != nil || got == nil || got.Leaf.SerialNumber.Cmp(old.Leaf.SerialNumber) != 0 {
		t.Fatalf("legacy pair: %v, %v", got, err)
	}

	// A save writes one 0600 file and removes the pair.
	renewed := issue(t)
	if err := saveCert(dir, renewed); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{legacyCertFile, legacyKeyFile, storedCertFile + ".tmp"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a save: %v", name, err)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, storedCertFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v", storedCertFile, fi, err)
	}
	got, err = loadStoredCert(dir)
	if err != nil || got == nil || got.Leaf.SerialNumber.Cmp(renewed.Leaf.SerialNumber) != 0 || len(got.Certificate) != 2 {
		t.Fatalf("after a save: %v, %v", got, err)
	}

	// A pair that does not match is an error naming the directory.
	if err := os.WriteFile(filepath.Join(dir, storedCertFile), append(data[:keyAt:keyAt], mustKeyPEM(t)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadStoredCert(dir); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("mismatched key: %v", err)
	}
}

func mustKeyPEM(t *testing.T) []byte {
	t.Helper()
	key, err := pki.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: storedKeyPEMType, Bytes: der})
}

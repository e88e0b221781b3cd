package agent

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
)

// The cluster PKI of an agent (see core/pki): outside dev mode and without
// operator certificates, the first server creates the cluster CA and two
// join tokens; every other agent joins with a token, receives a
// certificate, speaks mutual TLS with it and renews it before it expires.
//
// Files, all mode 0600 in directories of mode 0700:
//
//	<data_dir>/server/pki/ca.json, tokens.json   the creating server's CA and tokens
//	<data_dir>/pki/cert.pem, key.pem              a joined agent's certificate (chain) and key

const (
	minCertTTL = 10 * time.Second
	// defaultJoinWait bounds how long a joining agent tries its servers at
	// start before it gives up.
	defaultJoinWait = 5 * time.Minute
)

// validateAutoTLS checks the tls block and the join tokens.
func (c *Config) validateAutoTLS() error {
	if t := c.TLS; t != nil {
		files := t.CAFile != "" || t.CertFile != "" || t.KeyFile != ""
		if files && (t.CAFile == "" || t.CertFile == "" || t.KeyFile == "") {
			return fmt.Errorf("tls: ca_file, cert_file and key_file must all be set, or none (the cluster PKI issues the certificates)")
		}
		if !files && t.Auto != nil && !*t.Auto && (t.RPC || t.HTTP) {
			return fmt.Errorf("tls: ca_file, cert_file and key_file are required when TLS is enabled with auto = false")
		}
		if t.CertTTL != "" {
			d, err := time.ParseDuration(t.CertTTL)
			if err != nil {
				return fmt.Errorf("tls.cert_ttl: %v", err)
			}
			if d < minCertTTL || d > pki.MaxTTL {
				return fmt.Errorf("tls.cert_ttl: %s must be between %s and %s", d, minCertTTL, pki.MaxTTL)
			}
		}
	}
	if s := c.Server; s != nil && s.ServerJoin != nil && s.ServerJoin.Token != "" {
		if err := checkToken(s.ServerJoin.Token, pki.RoleServer); err != nil {
			return fmt.Errorf("server.server_join.token: %w", err)
		}
	}
	if cl := c.Client; cl != nil && cl.JoinToken != "" {
		if err := checkToken(cl.JoinToken, pki.RoleClient); err != nil {
			return fmt.Errorf("client.join_token: %w", err)
		}
	}
	return nil
}

// checkToken: the error never quotes the token.
func checkToken(s string, role pki.Role) error {
	tok, err := pki.ParseJoinToken(s)
	if err != nil {
		return err
	}
	if tok.Role() != role {
		return fmt.Errorf("this is a %s join token, a %s one is needed (drover operator join-token %s)", tok.Role(), role, role)
	}
	return nil
}

// operatorCerts reports whether the tls block names certificate files
// (read and checked at start whatever they serve; see loadTLS).
func operatorCerts(cfg *Config) bool {
	t := cfg.TLS
	return t != nil && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "")
}

// operatorRPC reports whether RPC uses the operator's certificates: only
// with rpc = true. Certificates for HTTPS alone leave RPC on the cluster
// PKI.
func operatorRPC(cfg *Config) bool {
	return operatorCerts(cfg) && cfg.TLS.RPC
}

// autoTLSOff reports the opt-out `tls { auto = false }`.
func autoTLSOff(cfg *Config) bool {
	return cfg.TLS != nil && cfg.TLS.Auto != nil && !*cfg.TLS.Auto
}

// usePKI: the cluster PKI authenticates RPC outside dev mode unless the
// operator's certificates do (rpc = true) or it is explicitly turned off
// (auto = false). Whatever else the tls block holds, RPC never falls back
// to plaintext.
func usePKI(cfg *Config) bool {
	return !cfg.DevMode && !operatorRPC(cfg) && !autoTLSOff(cfg)
}

// agentPKI is the agent's identity in the cluster PKI.
type agentPKI struct {
	logger hclog.Logger
	dir    string // <data_dir>/pki
	role   pki.Role
	id     string
	dns    []string
	ips    []net.IP
	trust  *pki.Trust
	store  *pki.CertStore
	// localCA and localTokens: this server created the cluster CA.
	localCA     *pki.CA
	localTokens *pki.Tokens
	ttl         time.Duration
	// persist: the certificate is kept in dir (not for the CA's holder,
	// which issues itself a new one at each start).
	persist bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// setupPKI finds or makes this agent's certificate: the local CA's (the
// server that created it), the stored one (a joined agent's restart), one
// obtained by joining with the configured token, or a new cluster CA (a
// server with none of these).
func (a *Agent) setupPKI(opts Options, dataDir string) (tlsConfigs, error) {
	cfg := a.cfg
	p := &agentPKI{logger: a.logger.Named("pki"), dir: filepath.Join(dataDir, "pki"), ttl: opts.CertTTL}
	if p.ttl == 0 && cfg.TLS != nil && cfg.TLS.CertTTL != "" {
		p.ttl, _ = time.ParseDuration(cfg.TLS.CertTTL) // validated
	}
	isServer := cfg.Server != nil && cfg.Server.Enabled
	var token string
	var joinAddrs []string
	if isServer {
		p.role, p.id = pki.RoleServer, cfg.NodeName
		if p.id == "" {
			p.id = "server-1" // the server's Raft ID (server.raftID)
		}
		p.dns = []string{"localhost", rpcServerName(cfg)}
		p.ips = []net.IP{net.IPv4(127, 0, 0, 1)}
		for _, h := range []string{cfg.BindAddr, advertiseHostOf(cfg.Advertise.rpcAddr()), advertiseHostOf(cfg.Advertise.httpAddr())} {
			if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
				p.ips = append(p.ips, ip)
			} else if h != "" && ip == nil {
				p.dns = append(p.dns, h)
			}
		}
		if j := cfg.Server.ServerJoin; j != nil {
			token, joinAddrs = j.Token, j.RetryJoin
		}
	} else {
		p.role = pki.RoleClient
		token, joinAddrs = cfg.Client.JoinToken, cfg.Client.Servers
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return tlsConfigs{}, fmt.Errorf("pki data dir: %w", err)
	}
	if err := a.obtainCert(p, opts, dataDir, token, joinAddrs); err != nil {
		return tlsConfigs{}, err
	}
	a.pki = p

	out := tlsConfigs{rpcClient: pki.ClientTLSConfig(p.store, p.trust, pki.RoleServer)}
	if isServer {
		out.rpcServer = pki.JoinServerTLSConfig(p.store, p.trust)
		trust := p.trust
		a.muxOpts = append(a.muxOpts, rpc.WithRaftAuth(func(cs tls.ConnectionState) error {
			id, err := trust.PeerIdentity(cs)
			if err != nil {
				return err
			}
			return id.RequireServer("speak Raft")
		}),
			// Peers without a certificate reach only the join exchange,
			// on a server of their own with tight limits (startServer).
			rpc.WithPublicSplit())
	}
	// HTTPS with the cluster certificate, unless the operator's serve it.
	if cfg.TLS != nil && cfg.TLS.HTTP && !operatorCerts(cfg) {
		store := p.store
		out.httpServer = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return store.Current(), nil },
			NextProtos:     []string{"h2", "http/1.1"},
		}
		out.httpClient = pki.ClientTLSConfig(p.store, p.trust, pki.RoleServer)
	}
	return out, nil
}

func rpcServerName(cfg *Config) string { return rpc.ServerName(cfg.Region) }

func advertiseHostOf(addr string) string {
	if addr == "" {
		return ""
	}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

func (a *Agent) obtainCert(p *agentPKI, opts Options, dataDir, token string, joinAddrs []string) error {
	caDir := filepath.Join(dataDir, "server", "pki")
	if p.role == pki.RoleServer {
		ca, toks, err := loadLocalCA(caDir)
		if err != nil {
			return err
		}
		if ca != nil {
			p.localCA, p.localTokens, p.trust = ca, toks, ca.Trust()
			p.logger.Info("acting as the cluster CA from the data dir", "ca_fingerprint", ca.Fingerprint())
			return p.issueLocal()
		}
	}
	if p.role == pki.RoleClient {
		p.id = a.clientNodeIDFile(dataDir)
	}
	cert, err := loadStoredCert(p.dir)
	if err != nil {
		p.logger.Warn("stored certificate unreadable; joining again", "error", err)
		cert = nil
	}
	if cert != nil {
		id, trust, err := checkStored(cert, p.role, p.id)
		if err == nil {
			p.id, p.trust, p.persist = id, trust, true
			p.store, err = pki.NewCertStore(cert)
			if err == nil {
				p.logger.Info("using the stored certificate", "identity", string(p.role)+" "+p.id, "not_after", cert.Leaf.NotAfter.UTC())
			}
			return err
		}
		p.logger.Warn("stored certificate unusable; joining again", "error", err)
	}
	if token != "" {
		if p.role == pki.RoleClient && p.id == "" {
			p.id = uuid.NewString()
		}
		wait := opts.JoinWait
		if wait <= 0 {
			wait = defaultJoinWait
		}
		return a.join(p, token, joinAddrs, wait)
	}
	if p.role == pki.RoleClient {
		return fmt.Errorf("client.join_token: a client joins its cluster with the client join token (run `drover operator join-token client` against a server); "+
			"none is configured and %s holds no valid certificate (or set tls { auto = false } for an insecure cluster)", p.dir)
	}
	// A server with no CA, no certificate and no token creates the cluster.
	if j := a.cfg.Server.ServerJoin; j != nil && len(j.RetryJoin) > 0 {
		p.logger.Warn("server_join lists servers but no token: this server creates a new cluster CA; " +
			"servers joining an existing cluster need server_join { token = ... } (drover operator join-token server)")
	}
	ca, err := pki.NewCA(uuid.NewString(), time.Now())
	if err != nil {
		return err
	}
	toks, err := pki.NewTokens(ca.Fingerprint(), rand.Reader)
	if err != nil {
		return err
	}
	if err := saveLocalCA(caDir, ca, toks); err != nil {
		return err
	}
	p.localCA, p.localTokens, p.trust = ca, toks, ca.Trust()
	p.logger.Info("created the cluster CA and join tokens; show them with `drover operator join-token server|client`",
		"ca_fingerprint", ca.Fingerprint(), "cluster_id", ca.ClusterID())
	return p.issueLocal()
}

// clientNodeIDFile is the node ID the client persisted, if any.
func (a *Agent) clientNodeIDFile(dataDir string) string {
	dir := a.cfg.Client.StateDir
	if dir == "" {
		dir = filepath.Join(dataDir, "client")
	}
	b, err := os.ReadFile(filepath.Join(dir, "node-id"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// issueLocal issues the CA holder's own certificate.
func (p *agentPKI) issueLocal() error {
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	leaf, err := p.localCA.Issue(pki.IssueRequest{PublicKey: key.Public(), Role: p.role, ID: p.id, DNSNames: p.dns, IPAddresses: p.ips, TTL: p.ttl}, time.Now())
	if err != nil {
		return err
	}
	cert, err := pki.TLSCertificate(leaf.Raw, p.localCA.Trust().Certificate().Raw, key)
	if err != nil {
		return err
	}
	if p.store == nil {
		p.store, err = pki.NewCertStore(cert)
		return err
	}
	return p.store.Replace(cert)
}

// join obtains a certificate with token from one of addrs, trying them in
// turn with backoff until one grants it or wait has passed, with a log
// line per failed attempt. A failure that trying again may cure (a server
// unreachable or without a leader, a rate limit, a challenge lost to a
// flood: ErrUnavailable or a transport error) is retried; a refusal (wrong
// or rotated token, node ID in use: ErrPermissionDenied, ErrInvalid) ends
// it at once.
func (a *Agent) join(p *agentPKI, token string, addrs []string, wait time.Duration) error {
	tok, err := pki.ParseJoinToken(token)
	if err != nil {
		return err // validated with the config
	}
	if len(addrs) == 0 {
		return errors.New("join: no server addresses to join (server_join.retry_join or client.servers)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	params := pki.JoinParams{ID: p.id, DNSNames: p.dns, IPAddresses: p.ips}
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		var lastErr error
		for _, addr := range addrs {
			key, err := pki.NewKey()
			if err != nil {
				return err
			}
			cert, trust, err := joinOnce(ctx, addr, tok, key, params)
			if err == nil {
				p.trust, p.persist = trust, true
				if p.store, err = pki.NewCertStore(cert); err != nil {
					return err
				}
				if err := saveCert(p.dir, cert); err != nil {
					return err
				}
				p.logger.Info("joined the cluster PKI", "server", addr, "identity", string(p.role)+" "+p.id,
					"token_id", tok.ID(), "ca_fingerprint", trust.Fingerprint(), "not_after", cert.Leaf.NotAfter.UTC())
				return nil
			}
			if permanentJoinError(err) {
				return fmt.Errorf("join the cluster through %s: %w", addr, err)
			}
			lastErr = fmt.Errorf("%s: %w", addr, err)
		}
		left := time.Until(deadlineOf(ctx))
		p.logger.Warn("join failed; retrying", "attempt", attempt, "error", lastErr, "retry_in", delay, "gives_up_in", left.Round(time.Second))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("join the cluster: no server granted a certificate within %s (%d attempts): %w", wait, attempt, lastErr)
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// permanentJoinError: a refusal that trying again will not cure.
func permanentJoinError(err error) bool {
	return errors.Is(err, structs.ErrPermissionDenied) || errors.Is(err, structs.ErrInvalid)
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func joinOnce(ctx context.Context, addr string, tok *pki.JoinToken, key crypto.Signer, params pki.JoinParams) (*tls.Certificate, *pki.Trust, error) {
	// One connection for both steps: the challenge lives on the server
	// that issued it.
	conn, err := rpc.Dial(addr, pki.PinnedTLSConfig(tok))
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch, err := rpc.Call[server.Empty, server.JoinChallengeReply](ctx, conn, "PKI.JoinChallenge", &server.Empty{})
	if err != nil {
		return nil, nil, err
	}
	req, err := pki.BuildJoinRequest(tok, ch.Challenge, key, params)
	if err != nil {
		return nil, nil, err
	}
	resp, err := rpc.Call[pki.JoinRequest, pki.JoinResponse](ctx, conn, "PKI.Join", req)
	if err != nil {
		return nil, nil, err
	}
	return pki.CompleteJoin(tok, key, resp)
}

// renewAt is when to renew leaf: after two thirds of its lifetime counted
// from its issue (the CA backdates NotBefore by five minutes for clock
// skew, which must not count, or a short lifetime would renew at once).
func renewAt(leaf *x509.Certificate) time.Time {
	start := leaf.NotBefore.Add(5 * time.Minute)
	if !start.Before(leaf.NotAfter) {
		start = leaf.NotBefore
	}
	return start.Add(leaf.NotAfter.Sub(start) * 2 / 3)
}

// startRenewal renews the certificate before it expires, for as long as
// the agent runs. Connections already open keep their certificate; new
// handshakes present the new one, so nothing restarts.
func (a *Agent) startRenewal(remote *remoteServers) {
	p := a.pki
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			leaf := p.store.Current().Leaf
			wait := time.Until(renewAt(leaf))
			t := time.NewTimer(max(wait, 0))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if err := a.renewOnce(ctx, remote); err != nil {
				retry := min(max(time.Until(leaf.NotAfter)/10, time.Second), 30*time.Second)
				p.logger.Warn("certificate renewal failed; retrying", "error", err, "retry_in", retry, "not_after", leaf.NotAfter.UTC())
				select {
				case <-ctx.Done():
					return
				case <-time.After(retry):
				}
			}
		}
	}()
}

func (a *Agent) renewOnce(ctx context.Context, remote *remoteServers) error {
	p := a.pki
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	var resp *pki.JoinResponse
	switch {
	case a.server != nil && a.server.PKI().HasCA():
		resp, err = a.server.PKI().IssueOwn(pki.IssueRequest{PublicKey: key.Public(), Role: p.role, ID: p.id, DNSNames: p.dns, IPAddresses: p.ips})
	case remote != nil:
		var csr []byte
		if csr, err = pki.NewCSR(key, pki.JoinParams{ID: p.id}); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err = call[server.RenewArgs, pki.JoinResponse](cctx, remote, "PKI.Renew", &server.RenewArgs{CSR: csr})
		cancel()
	default:
		return errors.New("no server can issue a certificate yet")
	}
	if err != nil {
		return err
	}
	cert, err := pki.TLSCertificate(resp.Certificate, resp.CA, key)
	if err != nil {
		return err
	}
	if _, _, err := checkStoredWithTrust(cert, p.trust, p.role, p.id); err != nil {
		return fmt.Errorf("renewed certificate: %w", err)
	}
	// Stored first: the certificate in use is always the one a restart
	// would find.
	if p.persist {
		if err := saveCert(p.dir, cert); err != nil {
			return err
		}
	}
	old := p.store.Current().Leaf
	if err := p.store.Replace(cert); err != nil {
		return err
	}
	// Servers check a caller's certificate on every call, and an open
	// connection keeps the certificate of its handshake: move to new
	// connections before the old certificate expires, leaving calls in
	// flight half of its remaining life to finish.
	if a.pool != nil {
		a.pool.Refresh(max(time.Until(old.NotAfter)/2, time.Second))
	}
	p.logger.Info("certificate renewed", "serial", cert.Leaf.SerialNumber.Text(16), "not_after", cert.Leaf.NotAfter.UTC())
	return nil
}

func (p *agentPKI) stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
}

// checkStored verifies a stored certificate: chained to the CA in its own
// chain, valid now, of role (and id, when known).
func checkStored(cert *tls.Certificate, role pki.Role, id string) (string, *pki.Trust, error) {
	if len(cert.Certificate) < 2 {
		return "", nil, errors.New("stored certificate has no CA certificate in its chain")
	}
	caCert, err := x509.ParseCertificate(cert.Certificate[1])
	if err != nil {
		return "", nil, err
	}
	trust, err := pki.NewTrust(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}))
	if err != nil {
		return "", nil, err
	}
	return checkStoredWithTrust(cert, trust, role, id)
}

func checkStoredWithTrust(cert *tls.Certificate, trust *pki.Trust, role pki.Role, id string) (string, *pki.Trust, error) {
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return "", nil, err
		}
	}
	got, err := trust.Verify([]*x509.Certificate{leaf}, x509.ExtKeyUsageClientAuth, time.Now())
	if err != nil {
		return "", nil, err
	}
	if got.Role != role {
		return "", nil, fmt.Errorf("stored certificate is for a %s, this agent is a %s", got.Role, role)
	}
	if id != "" && got.ID != id {
		return "", nil, fmt.Errorf("stored certificate is for %q, this agent is %q", got.ID, id)
	}
	return got.ID, trust, nil
}

func loadLocalCA(dir string) (*pki.CA, *pki.Tokens, error) {
	caBytes, err := os.ReadFile(filepath.Join(dir, "ca.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cluster CA: %w", err)
	}
	ca, err := pki.UnmarshalCA(caBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster CA in %s: %w", dir, err)
	}
	tokBytes, err := os.ReadFile(filepath.Join(dir, "tokens.json"))
	if err != nil {
		return nil, nil, fmt.Errorf("join tokens: %w", err)
	}
	toks, err := pki.UnmarshalTokens(tokBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("join tokens in %s: %w", dir, err)
	}
	return ca, toks, nil
}

func saveLocalCA(dir string, ca *pki.CA, toks *pki.Tokens) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cluster CA dir: %w", err)
	}
	caBytes, err := ca.Marshal()
	if err != nil {
		return err
	}
	tokBytes, err := toks.Marshal()
	if err != nil {
		return err
	}
	// Tokens first: a CA file alone would fail the next start.
	if err := writeSecret(filepath.Join(dir, "tokens.json"), tokBytes); err != nil {
		return err
	}
	return writeSecret(filepath.Join(dir, "ca.json"), caBytes)
}

// The agent's certificate chain and its key live in one file, written
// atomically, so a crash or a reader during a renewal never sees the key of
// one certificate beside another's chain. Agents before this kept them in
// cert.pem and key.pem; those are still read, and removed on the next save.
const (
	storedCertFile   = "identity.pem"
	legacyCertFile   = "cert.pem"
	legacyKeyFile    = "key.pem"
	storedKeyPEMType = "EC PRIVATE KEY"
)

func loadStoredCert(dir string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, storedCertFile))
	keyPEM := certPEM
	if errors.Is(err, os.ErrNotExist) {
		certPEM, keyPEM, err = loadLegacyCert(dir)
		if certPEM == nil && err == nil {
			return nil, nil
		}
	}
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("stored certificate in %s: %w", dir, err)
	}
	return &cert, nil
}

func loadLegacyCert(dir string) (certPEM, keyPEM []byte, err error) {
	certPEM, err = os.ReadFile(filepath.Join(dir, legacyCertFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = os.ReadFile(filepath.Join(dir, legacyKeyFile))
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func saveCert(dir string, cert *tls.Certificate) error {
	var data []byte
	for _, der := range cert.Certificate {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	k, ok := cert.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New("certificate key is not ECDSA")
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: storedKeyPEMType, Bytes: der})...)
	if err := writeSecret(filepath.Join(dir, storedCertFile), data); err != nil {
		return err
	}
	for _, name := range []string{legacyCertFile, legacyKeyFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writeSecret writes a file of mode 0600 atomically and durably: the data
// reaches the disk before the rename makes it the file.
func writeSecret(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// serverPKIConfig is the server's part.
func (p *agentPKI) serverPKIConfig() *server.PKIConfig {
	return &server.PKIConfig{Trust: p.trust, LocalCA: p.localCA, LocalTokens: p.localTokens, CertTTL: p.ttl}
}

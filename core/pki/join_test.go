package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/hashicorp/go-hclog"
)

// wireReq and wireResp are the test's stand-in for the RPC layer: JSON
// lines over a real TLS connection.
type wireReq struct {
	Op   string
	Join *JoinRequest
	CSR  []byte
}

type wireResp struct {
	Challenge *Challenge
	Join      *JoinResponse
	Identity  *Identity
	Serial    string
	Err       string
}

// testServer is a server agent's join and RPC listener on loopback, built
// the way the agent is meant to wire this package.
type testServer struct {
	t          *testing.T
	ln         net.Listener
	ca         *CA
	store      *CertStore
	tokens     atomic.Pointer[Tokens]
	challenges *Challenges
	skew       atomic.Int64 // added to the server's clock
	logs       *syncBuffer
	logger     hclog.Logger

	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]bool
}

// startServer serves c's join exchange with cert (a server certificate of
// c unless a test passes a forged one).
func startServer(t *testing.T, c *cluster, cert *tls.Certificate) *testServer {
	t.Helper()
	store, err := NewCertStore(cert)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	s := &testServer{
		t: t, ca: c.ca, store: store, challenges: NewChallenges(0, 0, 0), logs: logs,
		logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
		ln:     tls.NewListener(inner, JoinServerTLSConfig(store, c.ca.Trust())),
		conns:  make(map[net.Conn]bool),
	}
	s.tokens.Store(c.tokens)
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

func (s *testServer) now() time.Time { return time.Now().Add(time.Duration(s.skew.Load())) }

func (s *testServer) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[conn] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				_ = conn.Close()
			}()
			s.handle(conn.(*tls.Conn))
		}()
	}
}

func (s *testServer) stop() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *testServer) handle(conn *tls.Conn) {
	if err := conn.Handshake(); err != nil {
		s.logger.Warn("handshake failed", "remote", conn.RemoteAddr(), "error", err)
		return
	}
	dec, enc := json.NewDecoder(conn), json.NewEncoder(conn)
	for {
		var req wireReq
		if err := dec.Decode(&req); err != nil {
			return
		}
		var resp wireResp
		var err error
		switch req.Op {
		case "challenge":
			var ch Challenge
			ch, err = s.challenges.New(conn.RemoteAddr().String(), s.now())
			resp.Challenge = &ch
		case "join":
			var g *JoinGrant
			g, err = VerifyJoinRequest(req.Join, s.challenges, s.tokens.Load(), s.now())
			if err == nil {
				s.logger.Info("join granted", "role", g.Role, "id", g.ID, "token", g.TokenID)
				resp.Join, err = s.ca.IssueJoin(g, 0, s.now())
			}
		case "whoami", "renew":
			var id Identity
			id, err = s.ca.Trust().PeerIdentity(conn.ConnectionState())
			if err == nil {
				resp.Identity = &id
				resp.Serial = conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
			}
			if err == nil && req.Op == "renew" {
				var cert *x509.Certificate
				cert, err = s.ca.Renew(id, req.CSR, 0, s.now())
				if err == nil {
					resp.Join = &JoinResponse{Certificate: cert.Raw, CA: s.ca.Trust().Certificate().Raw}
				}
			}
		}
		if err != nil {
			s.logger.Warn("request refused", "op", req.Op, "request", req.Join, "error", err)
			resp.Err = err.Error()
		}
		if err := enc.Encode(&resp); err != nil {
			return
		}
	}
}

// peer is one TLS connection to a test server.
type peer struct {
	conn *tls.Conn
	dec  *json.Decoder
	enc  *json.Encoder
}

func dial(t *testing.T, addr string, cfg *tls.Config) (*peer, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &peer{conn: conn, dec: json.NewDecoder(conn), enc: json.NewEncoder(conn)}, nil
}

func (p *peer) call(t *testing.T, req wireReq) (*wireResp, error) {
	t.Helper()
	_ = p.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := p.enc.Encode(&req); err != nil {
		return nil, err
	}
	var resp wireResp
	if err := p.dec.Decode(&resp); err != nil {
		return nil, err
	}
	if resp.Err != "" {
		return &resp, errors.New(resp.Err)
	}
	return &resp, nil
}

// joiner runs the joiner's side of the exchange step by step, so that
// tests can tamper with any step.
type joiner struct {
	token  *JoinToken
	params JoinParams
	// tamper changes the request before it is sent.
	tamper func(*JoinRequest)
	// skew is applied to the server's clock between challenge and join.
	skew time.Duration
}

func (j joiner) run(t *testing.T, s *testServer) (*tls.Certificate, *Trust, error) {
	t.Helper()
	p, err := dial(t, s.addr(), PinnedTLSConfig(j.token))
	if err != nil {
		return nil, nil, err
	}
	resp, err := p.call(t, wireReq{Op: "challenge"})
	if err != nil {
		return nil, nil, err
	}
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	req, err := BuildJoinRequest(j.token, *resp.Challenge, key, j.params)
	if err != nil {
		return nil, nil, err
	}
	if j.tamper != nil {
		j.tamper(req)
	}
	if j.skew != 0 {
		s.skew.Add(int64(j.skew))
		defer s.skew.Add(-int64(j.skew))
	}
	resp, err = p.call(t, wireReq{Op: "join", Join: req})
	if err != nil {
		return nil, nil, err
	}
	return CompleteJoin(j.token, key, resp.Join)
}

func TestJoinOverTLS(t *testing.T) {
	c := newCluster(t, "c1")
	srv := startServer(t, c, c.tlsCert(t, RoleServer, "s1", 0))
	serverTok, clientTok := c.tokens.Get(RoleServer), c.tokens.Get(RoleClient)
	// A token of the right cluster whose secret nobody issued.
	wrong, err := NewJoinToken(RoleClient, c.ca.Fingerprint(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var replay *JoinRequest

	tests := []struct {
		name     string
		j        joiner
		wantRole Role
		wantErr  string
		wantIs   error
	}{
		{name: "client joins", j: joiner{token: clientTok, params: JoinParams{ID: "node-1"}}, wantRole: RoleClient},
		{name: "server joins with hosts", j: joiner{token: serverTok, params: JoinParams{ID: "s2", DNSNames: []string{"s2.example.com"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 2)}}}, wantRole: RoleServer},
		{name: "wrong secret", j: joiner{token: wrong, params: JoinParams{ID: "node-2"}},
			wantErr: "join proof does not match this cluster's client join token", wantIs: ErrJoinRefused},
		{name: "client token asks for server role", j: joiner{token: clientTok, params: JoinParams{ID: "s3"}, tamper: func(r *JoinRequest) { r.Role = RoleServer }},
			wantErr: "does not match this cluster's server join token", wantIs: ErrJoinRefused},
		{name: "client token with host names", j: joiner{token: clientTok, params: JoinParams{ID: "n", DNSNames: []string{"leader.example.com"}}},
			wantErr: "a client names no hosts", wantIs: ErrJoinRefused},
		{name: "swapped CSR", j: joiner{token: clientTok, params: JoinParams{ID: "node-3"}, tamper: func(r *JoinRequest) {
			k, _ := NewKey()
			r.CSR, _ = NewCSR(k, JoinParams{ID: "node-3"})
		}}, wantErr: "join proof does not match", wantIs: ErrJoinRefused},
		{name: "token of another CA fingerprint", j: joiner{token: clientTok, params: JoinParams{ID: "node-4"}, tamper: func(r *JoinRequest) { r.CAFingerprint = testFP }},
			wantErr: "the join token is for the cluster CA " + testFP, wantIs: ErrJoinRefused},
		{name: "first use of a request", j: joiner{token: clientTok, params: JoinParams{ID: "node-5"}, tamper: func(r *JoinRequest) { replay = r }}, wantRole: RoleClient},
		{name: "replayed challenge", j: joiner{token: clientTok, params: JoinParams{ID: "node-6"}, tamper: func(r *JoinRequest) { *r = *replay }},
			wantErr: "join challenge is unknown, already used", wantIs: ErrChallenge},
		{name: "expired challenge", j: joiner{token: clientTok, params: JoinParams{ID: "node-7"}, skew: ChallengeTTL + time.Second},
			wantErr: "join challenge expired", wantIs: ErrChallenge},
	}
	var errs []string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cert, trust, err := tc.j.run(t, srv)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				errs = append(errs, err.Error())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if trust.Fingerprint() != c.ca.Fingerprint() {
				t.Fatalf("trust %v, want the cluster's CA", trust)
			}
			// From now on the joiner speaks mutual TLS.
			store, err := NewCertStore(cert)
			if err != nil {
				t.Fatal(err)
			}
			p, err := dial(t, srv.addr(), ClientTLSConfig(store, trust, RoleServer))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.call(t, wireReq{Op: "whoami"})
			if err != nil {
				t.Fatal(err)
			}
			want := Identity{ClusterID: "c1", Role: tc.wantRole, ID: tc.j.params.ID}
			if *resp.Identity != want {
				t.Fatalf("server sees %v, want %v", *resp.Identity, want)
			}
			if tc.wantRole == RoleServer {
				if err := cert.Leaf.VerifyHostname("s2.example.com"); err != nil {
					t.Errorf("server certificate: %v", err)
				}
			}
		})
	}

	// The same refusals, checked on the library's errors directly, keep
	// their kinds for the RPC layer.
	ch, _ := srv.challenges.New("test", time.Now())
	key, _ := NewKey()
	req, _ := BuildJoinRequest(wrong, ch, key, JoinParams{ID: "n"})
	_, err = VerifyJoinRequest(req, srv.challenges, c.tokens, time.Now())
	if !errors.Is(err, ErrJoinRefused) || !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("wrong token: err %v, want ErrJoinRefused and permission denied", err)
	}
	_, err = VerifyJoinRequest(req, srv.challenges, c.tokens, time.Now())
	if !errors.Is(err, ErrChallenge) {
		t.Errorf("replay: err %v, want ErrChallenge", err)
	}

	// A peer without a certificate is let through for the join, but has
	// no identity for anything else.
	p, err := dial(t, srv.addr(), PinnedTLSConfig(clientTok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.call(t, wireReq{Op: "whoami"}); err == nil || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("anonymous whoami: err = %v, want no certificate", err)
	}

	// No secret in any error or log line.
	for _, e := range errs {
		assertNoSecret(t, "join error", e, serverTok, clientTok, wrong)
	}
	logs := srv.logs.String()
	if !strings.Contains(logs, "request refused") || !strings.Contains(logs, "join granted") {
		t.Fatalf("server logged neither refusals nor grants:\n%s", logs)
	}
	assertNoSecret(t, "server log", logs, serverTok, clientTok, wrong)
}

func TestJoinTokenRotation(t *testing.T) {
	c := newCluster(t, "c1")
	srv := startServer(t, c, c.tlsCert(t, RoleServer, "s1", 0))
	old := c.tokens.Get(RoleClient)
	if _, _, err := (joiner{token: old, params: JoinParams{ID: "n1"}}).run(t, srv); err != nil {
		t.Fatal(err)
	}
	rotated, fresh, err := c.tokens.Rotate(RoleClient, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.tokens.Store(rotated)
	if _, _, err := (joiner{token: old, params: JoinParams{ID: "n2"}}).run(t, srv); err == nil || !strings.Contains(err.Error(), "join proof does not match") {
		t.Fatalf("old token after rotation: err = %v", err)
	}
	if _, _, err := (joiner{token: fresh, params: JoinParams{ID: "n3"}}).run(t, srv); err != nil {
		t.Fatalf("new token: %v", err)
	}
	if _, _, err := (joiner{token: rotated.Get(RoleServer), params: JoinParams{ID: "s2"}}).run(t, srv); err != nil {
		t.Fatalf("server token after a client rotation: %v", err)
	}
}

// TestJoinPinning: a joiner talks only to a server that proves the CA of
// its token.
func TestJoinPinning(t *testing.T) {
	c := newCluster(t, "c1")
	token := c.tokens.Get(RoleClient)
	evil := newCluster(t, "c1")

	// Leaf of the evil CA, sent along with the real CA's (public)
	// certificate so that the fingerprint is found in the chain.
	forged := evil.tlsCert(t, RoleServer, "s1", 0)
	forged.Certificate = [][]byte{forged.Certificate[0], c.ca.Trust().Certificate().Raw}
	// A compromised client node of the real cluster posing as a server.
	clientCert := c.tlsCert(t, RoleClient, "n9", 0)
	expired := c.tlsCert(t, RoleServer, "s1", time.Minute)
	past, err := c.ca.Issue(IssueRequest{PublicKey: expired.Leaf.PublicKey, Role: RoleServer, ID: "s1", TTL: time.Hour}, time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired.Certificate[0], expired.Leaf = past.Raw, past

	tests := []struct {
		name    string
		cert    *tls.Certificate
		wantErr string
	}{
		{name: "server of another CA", cert: evil.tlsCert(t, RoleServer, "s1", 0), wantErr: "presented no CA certificate with fingerprint " + c.ca.Fingerprint()},
		{name: "real CA in the chain, leaf of another key", cert: forged, wantErr: "not valid for cluster"},
		{name: "client certificate of the cluster", cert: clientCert, wantErr: "not a server"},
		{name: "expired server certificate", cert: expired, wantErr: "expired"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mitm := startServer(t, evil, tc.cert)
			_, _, err := (joiner{token: token, params: JoinParams{ID: "n1"}}).run(t, mitm)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !errors.Is(err, ErrPinMismatch) {
				t.Errorf("err %v is not ErrPinMismatch", err)
			}
			assertNoSecret(t, "pin error", err.Error(), token)
		})
	}
}

// A flood of challenges cannot lock a joiner out: one caller holds at most
// its few newest ones, the table never passes its limit, a joiner's
// challenge made during the flood is still redeemable, and a lost
// challenge is a "try again", not a refusal.
func TestChallengeFlood(t *testing.T) {
	c := NewChallenges(0, 0, 0)
	now := time.Now()
	legit, err := c.New("10.0.0.1", now)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*MaxPendingChallenges; i++ {
		if _, err := c.New("10.6.6.6", now); err != nil {
			t.Fatalf("challenge %d of a flood: %v", i, err)
		}
	}
	if got := c.PendingFor("10.6.6.6"); got != MaxChallengesPerCaller {
		t.Fatalf("one flooding caller holds %d challenges, want %d", got, MaxChallengesPerCaller)
	}
	if got := c.Pending(); got != MaxChallengesPerCaller+1 {
		t.Fatalf("pending %d after a one-source flood, want %d", got, MaxChallengesPerCaller+1)
	}
	if err := c.redeem(legit.Nonce, now.Add(time.Second)); err != nil {
		t.Fatalf("the joiner's challenge after a one-source flood: %v", err)
	}

	// Many sources: the table stays at its limit and evicts its oldest;
	// a challenge made during the flood survives the next limit-1 ones.
	c = NewChallenges(0, 64, 0)
	for i := 0; i < 1000; i++ {
		if _, err := c.New(fmt.Sprintf("10.1.%d.%d", i/256, i%256), now); err != nil {
			t.Fatal(err)
		}
	}
	legit, _ = c.New("10.0.0.1", now)
	for i := 0; i < 63; i++ {
		_, _ = c.New(fmt.Sprintf("10.2.0.%d", i), now)
	}
	if got := c.Pending(); got != 64 {
		t.Fatalf("pending %d, want the limit 64", got)
	}
	if err := c.redeem(legit.Nonce, now); err != nil {
		t.Fatalf("the joiner's challenge during a many-source flood: %v", err)
	}

	// Challenges expire within seconds, and a lost one asks for a retry.
	old, _ := c.New("10.0.0.1", now)
	err = c.redeem(old.Nonce, now.Add(ChallengeTTL))
	if !errors.Is(err, ErrChallenge) || !errors.Is(err, structs.ErrUnavailable) || errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("expired challenge: %v, want ErrChallenge of kind unavailable", err)
	}
	if ChallengeTTL > 30*time.Second {
		t.Fatalf("ChallengeTTL %s: challenges must expire within seconds", ChallengeTTL)
	}
	if _, err := c.New("10.0.0.1", now.Add(ChallengeTTL+time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := c.Pending(); got != 1 {
		t.Fatalf("pending %d after every earlier challenge expired, want 1", got)
	}
	err = c.redeem(old.Nonce, now)
	if !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("replayed challenge: %v, want kind unavailable", err)
	}
}

package pkiendpoint

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// testPKI is a PKI over a real FSM without Raft: Apply encodes the entry
// as the server does and applies it at the next index.
type testPKI struct {
	*PKI
	fsm *fsm.FSM

	mu    sync.Mutex
	index uint64
}

func (h *testPKI) State() *state.StateStore { return h.fsm.State() }

func (h *testPKI) apply(t structs.MessageType, msg any) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := msg.(structs.Stamped); ok {
		st.StampNow(time.Now().UnixNano())
	}
	buf, err := fsm.Encode(t, msg)
	if err != nil {
		return 0, err
	}
	h.index++
	if resp, ok := h.fsm.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: buf}).(error); ok && resp != nil {
		return h.index, resp
	}
	return h.index, nil
}

type leading struct{}

func (leading) LeaderConn(context.Context) (*rpc.Conn, bool, error) { return nil, false, nil }

func newTestPKI(t *testing.T, cfg *Config) *testPKI {
	t.Helper()
	f, err := fsm.New(hclog.NewNullLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &testPKI{fsm: f}
	h.PKI = New(cfg, Deps{State: f.State, Apply: h.apply, Leader: leading{},
		CatchUp: func(context.Context) error { return nil }, HasLeader: func() bool { return true }})
	return h
}

// newCA is a cluster CA and its join tokens.
func newCA(t *testing.T) (*pki.CA, *pki.Tokens) {
	t.Helper()
	ca, err := pki.NewCA("c1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	toks, err := pki.NewTokens(ca.Fingerprint(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ca, toks
}

func TestWithoutClusterPKI(t *testing.T) {
	for name, cfg := range map[string]*Config{"nil config": nil, "no trust": {}} {
		t.Run(name, func(t *testing.T) {
			p := newTestPKI(t, cfg)
			if p.HasCA() || p.HoldsLocalCA() {
				t.Fatal("a server without the cluster PKI claims a CA")
			}
			if _, err := p.JoinChallenge("h"); !errors.Is(err, structs.ErrInvalid) {
				t.Errorf("join challenge: %v, want invalid", err)
			}
			if _, err := p.JoinToken("client"); !errors.Is(err, structs.ErrInvalid) {
				t.Errorf("join token: %v, want invalid", err)
			}
			if _, err := p.RotateJoinToken(context.Background(), "client"); !errors.Is(err, structs.ErrInvalid) {
				t.Errorf("rotate: %v, want invalid", err)
			}
			if _, err := PeerIdentity(context.Background(), p.trust()); !errors.Is(err, structs.ErrPermissionDenied) {
				t.Errorf("peer identity: %v, want permission denied", err)
			}
		})
	}
}

// A server that trusts the CA but neither created it nor received it yet
// sends callers elsewhere.
func TestTrustWithoutCAYet(t *testing.T) {
	ca, _ := newCA(t)
	p := newTestPKI(t, &Config{Trust: ca.Trust()})
	if p.HasCA() {
		t.Fatal("HasCA before the CA arrived")
	}
	if _, err := p.JoinChallenge("h"); !errors.Is(err, structs.ErrUnavailable) {
		t.Errorf("join challenge: %v, want unavailable", err)
	}
	if _, err := p.IssueOwn(pki.IssueRequest{}); !errors.Is(err, structs.ErrUnavailable) {
		t.Errorf("issue own: %v, want unavailable", err)
	}
}

// The creating server acts as the CA from its local copy, stores it in
// Raft, and from then on rotates tokens there; joins follow the rotation.
func TestLocalCAStoredRotatedAndJoined(t *testing.T) {
	ctx := context.Background()
	ca, toks := newCA(t)
	p := newTestPKI(t, &Config{Trust: ca.Trust(), LocalCA: ca, LocalTokens: toks, CertTTL: time.Hour})
	if !p.HasCA() || !p.HoldsLocalCA() {
		t.Fatal("the creating server has no CA")
	}
	first, err := p.JoinToken("client")
	if err != nil || first != toks.Get(pki.RoleClient).Reveal() {
		t.Fatalf("join token before storing: %q, %v", first, err)
	}
	if _, err := p.JoinToken("admin"); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("join token of an unknown role: %v", err)
	}
	if _, err := p.RotateJoinToken(ctx, "client"); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("rotate before the PKI is stored: %v, want unavailable", err)
	}

	done := make(chan struct{})
	go func() { defer close(done); StoreLocalCA(ctx, p.PKI) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("StoreLocalCA did not return once the PKI was stored")
	}
	stored, err := p.State().PKI(nil)
	if err != nil || stored == nil || stored.CAFingerprint != ca.Fingerprint() {
		t.Fatalf("stored PKI %v, %v", stored, err)
	}

	rotated, err := p.RotateJoinToken(ctx, "client")
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := p.JoinToken("client"); rotated == first || now != rotated {
		t.Fatalf("after rotation the token is %q (rotated %q, first %q)", now, rotated, first)
	}

	join := func(tokenText, nodeID string) (*pki.JoinResponse, error) {
		t.Helper()
		tok, err := pki.ParseJoinToken(tokenText)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := p.JoinChallenge("10.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		key, err := pki.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		req, err := pki.BuildJoinRequest(tok, ch.Challenge, key, pki.JoinParams{ID: nodeID})
		if err != nil {
			t.Fatal(err)
		}
		return p.Join(ctx, req)
	}
	if _, err := join(first, uuid.NewString()); err == nil {
		t.Error("the rotated-out token still joins")
	}
	resp, err := join(rotated, uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Certificate) == 0 || len(resp.CA) == 0 {
		t.Fatalf("join response %+v", resp)
	}

	taken := uuid.NewString()
	node := &structs.Node{ID: taken, SecretID: uuid.NewString(), Name: "n", Datacenter: "dc1", Status: structs.NodeStatusReady}
	if err := p.State().UpsertNode(1000, node); err != nil {
		t.Fatal(err)
	}
	if _, err := join(rotated, taken); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("join as a live node's ID: %v, want permission denied", err)
	}
}

// A forwarded PKI.Init of a CA this server does not trust is refused, and
// nothing is stored.
func TestInitRefusesAForeignCA(t *testing.T) {
	ca, _ := newCA(t)
	other, otherToks := newCA(t)
	p := newTestPKI(t, &Config{Trust: ca.Trust()})
	caBytes, err := other.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tokBytes, err := otherToks.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	err = p.init(context.Background(), &InitArgs{PKI: structs.ClusterPKI{CA: caBytes, Tokens: tokBytes, CAFingerprint: other.Fingerprint()}})
	if !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("init with a foreign CA: %v, want invalid", err)
	}
	if stored, _ := p.State().PKI(nil); stored != nil {
		t.Fatal("a refused init stored the PKI")
	}
}

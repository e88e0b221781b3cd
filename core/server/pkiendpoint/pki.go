// Package pkiendpoint is a server's part of the cluster PKI: it hands out
// join challenges, answers joins and renewals with certificates of the
// cluster CA, reveals and rotates the join tokens, and stores the CA of
// the server that created it in Raft. It also decides every RPC by the
// caller's certificate (access.go), from a table the server gives.
//
// The rules (which PKI may be stored, which roles exist, whether a node
// ID may join, who may call which method) are pure functions in
// decide.go and access.go; the methods read the state, apply them, then
// issue or write through Raft. The server wires a PKI to its state, Raft
// and leader (Deps) and registers its RPC handlers with Register.
package pkiendpoint

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Config is a server's part of the cluster PKI (nil: none, as in dev
// mode or with operator-supplied certificates).
type Config struct {
	// Trust is the cluster CA's certificate: every caller's certificate
	// is checked against it.
	Trust *pki.Trust
	// LocalCA and LocalTokens are set on the server that created the
	// cluster's CA (from its data dir). It acts as the CA from them until
	// the state holds the PKI, and stores them there when it can.
	LocalCA     *pki.CA
	LocalTokens *pki.Tokens
	// CertTTL is the lifetime of the certificates this server issues
	// (0: pki.DefaultTTL).
	CertTTL time.Duration
}

// Deps is what a PKI needs from its server.
type Deps struct {
	// State returns the server's current state store (a snapshot restore
	// replaces it, so the PKI calls it on each read).
	State func() *state.StateStore
	// Apply commits one entry through Raft on the leader and returns its
	// index once the local FSM applied it; errors keep their structs
	// kind, and without leadership it is structs.ErrNoLeader.
	Apply func(t structs.MessageType, msg any) (uint64, error)
	// Leader forwards writes from a follower.
	Leader leaderrpc.Leader
	// CatchUp waits until this server applied the leader's last log
	// index; it returns nil at once on the leader or without one, and an
	// error of kind structs.ErrUnavailable when this server lags.
	CatchUp func(ctx context.Context) error
	// HasLeader reports whether the cluster has a leader now.
	HasLeader func() bool
	// Logger logs joins, renewals and rotations (nil: nothing).
	Logger hclog.Logger
}

// PKI serves the PKI endpoints of one server. The zero value is not
// usable; use New.
type PKI struct {
	cfg    *Config // nil without the cluster PKI
	deps   Deps
	logger hclog.Logger
	// challenges are the join challenges this server handed out.
	challenges *pki.Challenges

	// The parsed PKI of the state store, cached per index.
	mu    sync.Mutex
	index uint64
	ca    *pki.CA
	toks  *pki.Tokens
}

// New returns the PKI endpoints of a server; cfg nil, or without Trust,
// is a server without the cluster PKI.
func New(cfg *Config, deps Deps) *PKI {
	p := &PKI{deps: deps, logger: deps.Logger}
	if p.logger == nil {
		p.logger = hclog.NewNullLogger()
	}
	if cfg != nil && cfg.Trust != nil {
		p.cfg = cfg
		p.challenges = pki.NewChallenges(0, 0, 0)
	}
	return p
}

func errNoPKI() error {
	return structs.NewError(structs.ErrInvalid, "this server runs without the cluster PKI (dev mode or operator-supplied certificates)")
}

// clusterCA is the CA and tokens this server issues and verifies with: the
// state's once stored, else its own local ones, else none (ErrUnavailable:
// the caller should try another server).
func (p *PKI) clusterCA() (*pki.CA, *pki.Tokens, error) {
	if p.cfg == nil {
		return nil, nil, errNoPKI()
	}
	stored, err := p.deps.State().PKI(nil)
	if err != nil {
		return nil, nil, err
	}
	if stored == nil {
		if p.cfg.LocalCA != nil {
			return p.cfg.LocalCA, p.cfg.LocalTokens, nil
		}
		return nil, nil, structs.NewError(structs.ErrUnavailable, "this server has not received the cluster CA yet; try another server")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ca == nil || p.index != stored.ModifyIndex {
		ca, err := pki.UnmarshalCA(stored.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster CA in the state: %w", err)
		}
		toks, err := pki.UnmarshalTokens(stored.Tokens)
		if err != nil {
			return nil, nil, fmt.Errorf("join tokens in the state: %w", err)
		}
		p.ca, p.toks, p.index = ca, toks, stored.ModifyIndex
	}
	return p.ca, p.toks, nil
}

// HasCA reports whether this server can issue certificates now.
func (p *PKI) HasCA() bool {
	_, _, err := p.clusterCA()
	return err == nil
}

// HoldsLocalCA reports whether this server created the cluster's CA and
// so must store it in Raft (StoreLocalCA).
func (p *PKI) HoldsLocalCA() bool { return p.cfg != nil && p.cfg.LocalCA != nil }

// StoreLocalCA puts the local CA and tokens of p into Raft, through the
// leader, until the state holds a PKI or ctx ends. It returns at once on
// a server that holds no local CA.
func StoreLocalCA(ctx context.Context, p *PKI) {
	if !p.HoldsLocalCA() {
		return
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		stored, err := p.deps.State().PKI(nil)
		if err == nil && stored != nil {
			if stored.CAFingerprint != p.cfg.LocalCA.Fingerprint() {
				p.logger.Warn("the cluster stores another CA than this server's local one; the local one is unused",
					"cluster_ca", stored.CAFingerprint, "local_ca", p.cfg.LocalCA.Fingerprint())
			}
			return
		}
		if p.deps.HasLeader() {
			if err := p.storeLocal(ctx); err != nil {
				p.logger.Debug("storing the cluster PKI failed; retrying", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *PKI) storeLocal(ctx context.Context) error {
	caBytes, err := p.cfg.LocalCA.Marshal()
	if err != nil {
		return err
	}
	tokBytes, err := p.cfg.LocalTokens.Marshal()
	if err != nil {
		return err
	}
	args := &InitArgs{PKI: structs.ClusterPKI{CA: caBytes, Tokens: tokBytes, CAFingerprint: p.cfg.LocalCA.Fingerprint()}}
	return p.init(ctx, args)
}

// init stores a PKI (leader; followers forward). The FSM ignores it when
// the state holds one already.
func (p *PKI) init(ctx context.Context, a *InitArgs) error {
	if _, ok, err := leaderrpc.Forward[InitArgs, Empty](ctx, p.deps.Leader, "PKI.Init", a); ok {
		return err
	}
	var trust *pki.Trust
	if p.cfg != nil {
		trust = p.cfg.Trust
	}
	if err := checkInit(a.PKI, trust); err != nil {
		return err
	}
	_, err := p.deps.Apply(structs.PKIInitRequestType, &structs.PKIInitRequest{PKI: a.PKI})
	return err
}

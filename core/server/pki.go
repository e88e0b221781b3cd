package server

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// PKIConfig is a server's part of the cluster PKI (nil: none, as in dev
// mode or with operator-supplied certificates).
type PKIConfig struct {
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

// PKI RPC arguments and replies.
type (
	// JoinChallengeReply is a join challenge.
	JoinChallengeReply struct{ Challenge pki.Challenge }
	// RenewArgs carries a CSR (DER) for a fresh key of the caller.
	RenewArgs struct{ CSR []byte }
	// PKIInitArgs forwards the creating server's PKI to the leader.
	PKIInitArgs struct{ PKI structs.ClusterPKI }
	// JoinTokenArgs names a role ("server" or "client").
	JoinTokenArgs struct{ Role string }
	// JoinTokenReply carries a join token's text. It is a secret: only
	// servers receive it (and operators over the HTTP API).
	JoinTokenReply struct{ Token string }
)

// Format keeps the secret out of logs.
func (r JoinTokenReply) Format(f fmt.State, _ rune) {
	_, _ = f.Write([]byte("JoinTokenReply{redacted}"))
}

// Format keeps the key out of logs.
func (a PKIInitArgs) Format(f fmt.State, _ rune) {
	_, _ = f.Write([]byte("PKIInitArgs{" + a.PKI.String() + "}"))
}

// serverPKI is the server's CA state: the parsed PKI of the state store,
// cached per index, and the join challenges this server handed out.
type serverPKI struct {
	cfg        *PKIConfig
	challenges *pki.Challenges

	mu    sync.Mutex
	index uint64
	ca    *pki.CA
	toks  *pki.Tokens
}

func (s *Server) pkiEnabled() bool { return s.cfg.PKI != nil && s.cfg.PKI.Trust != nil }

// startPKI starts storing the local CA into Raft, when this server has one.
func (s *Server) startPKI() {
	if !s.pkiEnabled() {
		return
	}
	s.pki = &serverPKI{cfg: s.cfg.PKI, challenges: pki.NewChallenges(0, 0, 0)}
	if s.cfg.PKI.LocalCA == nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.storePKILoop(s.shutdownCtx)
	}()
}

// clusterCA is the CA and tokens this server issues and verifies with: the
// state's once stored, else its own local ones, else none (ErrUnavailable:
// the caller should try another server).
func (s *Server) clusterCA() (*pki.CA, *pki.Tokens, error) {
	if s.pki == nil {
		return nil, nil, structs.NewError(structs.ErrInvalid, "this server runs without the cluster PKI (dev mode or operator-supplied certificates)")
	}
	p, err := s.State().PKI(nil)
	if err != nil {
		return nil, nil, err
	}
	if p == nil {
		if s.cfg.PKI.LocalCA != nil {
			return s.cfg.PKI.LocalCA, s.cfg.PKI.LocalTokens, nil
		}
		return nil, nil, structs.NewError(structs.ErrUnavailable, "this server has not received the cluster CA yet; try another server")
	}
	sp := s.pki
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.ca == nil || sp.index != p.ModifyIndex {
		ca, err := pki.UnmarshalCA(p.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster CA in the state: %w", err)
		}
		toks, err := pki.UnmarshalTokens(p.Tokens)
		if err != nil {
			return nil, nil, fmt.Errorf("join tokens in the state: %w", err)
		}
		sp.ca, sp.toks, sp.index = ca, toks, p.ModifyIndex
	}
	return sp.ca, sp.toks, nil
}

// HasCA reports whether this server can issue certificates now.
func (s *Server) HasCA() bool {
	_, _, err := s.clusterCA()
	return err == nil
}

// storePKILoop puts the local CA and tokens into Raft, through the leader,
// until the state holds a PKI.
func (s *Server) storePKILoop(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		p, err := s.State().PKI(nil)
		if err == nil && p != nil {
			if p.CAFingerprint != s.cfg.PKI.LocalCA.Fingerprint() {
				s.logger.Warn("the cluster stores another CA than this server's local one; the local one is unused",
					"cluster_ca", p.CAFingerprint, "local_ca", s.cfg.PKI.LocalCA.Fingerprint())
			}
			return
		}
		if s.raft.Leader() != "" {
			if err := s.storeLocalPKI(ctx); err != nil {
				s.logger.Debug("storing the cluster PKI failed; retrying", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) storeLocalPKI(ctx context.Context) error {
	caBytes, err := s.cfg.PKI.LocalCA.Marshal()
	if err != nil {
		return err
	}
	tokBytes, err := s.cfg.PKI.LocalTokens.Marshal()
	if err != nil {
		return err
	}
	args := &PKIInitArgs{PKI: structs.ClusterPKI{CA: caBytes, Tokens: tokBytes, CAFingerprint: s.cfg.PKI.LocalCA.Fingerprint()}}
	return s.initPKI(ctx, args)
}

// initPKI stores a PKI (leader; followers forward). It is a no-op when the
// state holds one already.
func (s *Server) initPKI(ctx context.Context, a *PKIInitArgs) error {
	if _, ok, err := forward[PKIInitArgs, Empty](ctx, s, "PKI.Init", a); ok {
		return err
	}
	ca, err := pki.UnmarshalCA(a.PKI.CA)
	if err != nil {
		return structs.NewError(structs.ErrInvalid, "cluster PKI: CA: %v", err)
	}
	toks, err := pki.UnmarshalTokens(a.PKI.Tokens)
	if err != nil {
		return structs.NewError(structs.ErrInvalid, "cluster PKI: tokens: %v", err)
	}
	if ca.Fingerprint() != a.PKI.CAFingerprint || toks.Get(pki.RoleServer).CAFingerprint() != ca.Fingerprint() ||
		toks.Get(pki.RoleClient).CAFingerprint() != ca.Fingerprint() {
		return structs.NewError(structs.ErrInvalid, "cluster PKI: the tokens and the CAFingerprint must be the CA's")
	}
	if s.pki != nil && ca.Fingerprint() != s.cfg.PKI.Trust.Fingerprint() {
		return structs.NewError(structs.ErrInvalid, "cluster PKI: CA %s is not the one this cluster trusts (%s)", ca.Fingerprint(), s.cfg.PKI.Trust.Fingerprint())
	}
	if _, err := s.raftApply(structs.PKIInitRequestType, &structs.PKIInitRequest{PKI: a.PKI}); err != nil {
		return err
	}
	return nil
}

// JoinChallenge hands out a join challenge to caller (the source host of
// the call: the key of the per-caller bound), when this server can issue.
func (s *Server) JoinChallenge(caller string) (*JoinChallengeReply, error) {
	if _, _, err := s.clusterCA(); err != nil {
		return nil, err
	}
	ch, err := s.pki.challenges.New(caller, time.Now())
	if err != nil {
		return nil, err
	}
	return &JoinChallengeReply{Challenge: ch}, nil
}

// Join answers a join request made for one of this server's challenges.
// A follower first catches up with the leader's log, so that a token the
// leader just rotated out is refused here too.
func (s *Server) Join(ctx context.Context, req *pki.JoinRequest) (*pki.JoinResponse, error) {
	if err := s.catchUpWithLeader(ctx); err != nil {
		return nil, err
	}
	ca, toks, err := s.clusterCA()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	grant, err := pki.VerifyJoinRequest(req, s.pki.challenges, toks, now)
	if err != nil {
		s.logger.Warn("join refused", "role", roleOf(req), "token_id", tokenIDOf(req), "error", err)
		return nil, err
	}
	if grant.Role == pki.RoleClient {
		n, err := s.State().NodeByID(nil, grant.ID)
		if err != nil {
			return nil, err
		}
		if n != nil && n.Status != structs.NodeStatusDown {
			s.logger.Warn("join refused: node ID in use", "node_id", grant.ID, "token_id", grant.TokenID)
			return nil, structs.NewError(structs.ErrPermissionDenied, "Permission denied: node ID %q belongs to a registered node that is not down", grant.ID)
		}
	}
	resp, err := ca.IssueJoin(grant, s.cfg.PKI.CertTTL, now)
	if err != nil {
		return nil, err
	}
	s.logger.Info("join granted", "role", string(grant.Role), "id", grant.ID, "token_id", grant.TokenID)
	return resp, nil
}

// catchUpWithLeader waits until this follower applied the leader's last
// log index. Without a leader (a cluster still forming) it does not wait.
func (s *Server) catchUpWithLeader(ctx context.Context) error {
	if s.rpcPool == nil || s.IsLeader() {
		return nil
	}
	addr, _ := s.raft.LeaderWithID()
	if addr == "" {
		return nil
	}
	info, err := s.peerInfo(ctx, string(addr))
	if err != nil {
		return structs.NewError(structs.ErrUnavailable, "join: cannot reach the leader to catch up: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for s.raft.AppliedIndex() < info.LastIndex {
		select {
		case <-ctx.Done():
			return structs.NewError(structs.ErrUnavailable, "join: this server lags the leader (applied %d of %d); try another server", s.raft.AppliedIndex(), info.LastIndex)
		case <-t.C:
		}
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

// Renew issues a fresh certificate for peer, for the key of csr.
func (s *Server) Renew(peer pki.Identity, csr []byte) (*pki.JoinResponse, error) {
	ca, _, err := s.clusterCA()
	if err != nil {
		return nil, err
	}
	cert, err := ca.Renew(peer, csr, s.cfg.PKI.CertTTL, time.Now())
	if err != nil {
		return nil, err
	}
	s.logger.Debug("certificate renewed", "peer", peer.String(), "not_after", cert.NotAfter)
	return &pki.JoinResponse{Certificate: cert.Raw, CA: ca.Trust().Certificate().Raw}, nil
}

// IssueOwn issues a certificate for this server itself (the server that
// holds the CA does not call itself over RPC).
func (s *Server) IssueOwn(req pki.IssueRequest) (*pki.JoinResponse, error) {
	ca, _, err := s.clusterCA()
	if err != nil {
		return nil, err
	}
	req.TTL = s.cfg.PKI.CertTTL
	cert, err := ca.Issue(req, time.Now())
	if err != nil {
		return nil, err
	}
	return &pki.JoinResponse{Certificate: cert.Raw, CA: ca.Trust().Certificate().Raw}, nil
}

func parseRole(role string) (pki.Role, error) {
	switch r := pki.Role(role); r {
	case pki.RoleServer, pki.RoleClient:
		return r, nil
	}
	return "", structs.NewError(structs.ErrInvalid, "join token role %q must be %q or %q", role, pki.RoleServer, pki.RoleClient)
}

// JoinToken is the cluster's current join token for role, as text. It is
// a secret: callers must be operators.
func (s *Server) JoinToken(role string) (string, error) {
	r, err := parseRole(role)
	if err != nil {
		return "", err
	}
	_, toks, err := s.clusterCA()
	if err != nil {
		return "", err
	}
	return toks.Get(r).Reveal(), nil
}

// RotateJoinToken replaces the join token of role with a new one through
// Raft (leader; followers forward) and returns it. Certificates already
// issued stay valid; the old token no longer joins.
func (s *Server) RotateJoinToken(ctx context.Context, role string) (string, error) {
	r, err := parseRole(role)
	if err != nil {
		return "", err
	}
	if resp, ok, err := forward[JoinTokenArgs, JoinTokenReply](ctx, s, "PKI.RotateToken", &JoinTokenArgs{Role: role}); ok {
		if err != nil {
			return "", err
		}
		return resp.Token, nil
	}
	if s.pki == nil {
		return "", structs.NewError(structs.ErrInvalid, "this server runs without the cluster PKI (dev mode or operator-supplied certificates)")
	}
	p, err := s.State().PKI(nil)
	if err != nil {
		return "", err
	}
	if p == nil {
		return "", structs.NewError(structs.ErrUnavailable, "the cluster has not stored its PKI in Raft yet; retry once it has a leader")
	}
	_, toks, err := s.clusterCA()
	if err != nil {
		return "", err
	}
	next, tok, err := toks.Rotate(r, rand.Reader)
	if err != nil {
		return "", err
	}
	buf, err := next.Marshal()
	if err != nil {
		return "", err
	}
	if _, err := s.raftApply(structs.PKITokensRequestType, &structs.PKITokensRequest{Tokens: buf, CAFingerprint: p.CAFingerprint}); err != nil {
		return "", err
	}
	s.logger.Info("join token rotated", "role", string(r), "token_id", tok.ID())
	return tok.Reveal(), nil
}

// peerIdentity is the verified identity of an RPC's caller.
func (s *Server) peerIdentity(ctx context.Context) (pki.Identity, error) {
	if !s.pkiEnabled() {
		return pki.Identity{}, structs.NewError(structs.ErrPermissionDenied, "Permission denied: this server runs without the cluster PKI")
	}
	st := rpc.PeerTLS(ctx)
	if st == nil {
		return pki.Identity{}, structs.NewError(structs.ErrPermissionDenied, "Permission denied: the caller presented no certificate")
	}
	return s.cfg.PKI.Trust.PeerIdentity(*st)
}

// access is who may call one RPC method. Methods missing from rpcAccess are
// server-only: a method added without a thought for its callers is safe.
type access struct {
	// public methods need no certificate: the join exchange only.
	public bool
	// check decides for an authenticated caller (nil: any identity).
	check func(id pki.Identity, req any) error
}

// forNode lets a server, or the client whose node ID the request names.
func forNode(action string, nodeID func(req any) string) access {
	return access{check: func(id pki.Identity, req any) error { return id.RequireNode(nodeID(req), action) }}
}

var rpcAccess = map[string]access{
	"PKI.JoinChallenge": {public: true},
	"PKI.Join":          {public: true},
	"PKI.Renew":         {},
	// A client-only agent finds its servers' HTTP addresses with it (to
	// proxy the HTTP API); it tells nothing beyond the members list.
	"Status.ServerInfo": {},
	// A client agent authorizes its own HTTP API (logs, agent info) by
	// the caller's token; the reply holds no secret.
	"ACL.ResolveToken": {},
	"Node.Register": forNode("register", func(r any) string {
		if a, ok := r.(*NodeRegisterArgs); ok && a.Node != nil {
			return a.Node.ID
		}
		return ""
	}),
	"Node.Heartbeat":  forNode("heartbeat", func(r any) string { return r.(*NodeAuthArgs).NodeID }),
	"Node.GetAllocs":  forNode("read the allocations", func(r any) string { return r.(*NodeAllocsArgs).NodeID }),
	"CSIVolume.Claim": forNode("claim volumes", func(r any) string { return r.(*structs.CSIVolumeClaimArgs).NodeID }),
	"CSIVolume.Unpublish": forNode("release volume claims", func(r any) string {
		return r.(*structs.CSIVolumeUnpublishArgs).NodeID
	}),
	"CSIController.Poll": forNode("take CSI controller calls", func(r any) string { return r.(*structs.CSIControllerPollArgs).NodeID }),
	"CSIController.Done": forNode("report CSI controller calls", func(r any) string { return r.(*structs.CSIControllerDoneArgs).NodeID }),
	"Node.UpdateAllocs": forNode("update the allocations", func(r any) string {
		return r.(*NodeUpdateAllocsArgs).NodeID
	}),
	"ServiceRegistration.NodeUpdate": forNode("register services", func(r any) string {
		return r.(*structs.ServiceRegistrationNodeArgs).NodeID
	}),
	"ServiceRegistration.Lookup": forNode("read services", func(r any) string {
		return r.(*structs.ServiceLookupArgs).NodeID
	}),
}

// PublicMethods are the methods a caller without a certificate may reach:
// the join exchange. The agent serves them, and nothing else, to such
// callers (rpc.Server.ServePublic), with tight limits.
func PublicMethods() []string {
	var out []string
	for m, rule := range rpcAccess {
		if rule.public {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// Authorizer decides every RPC by the caller's certificate (see rpcAccess).
// Only with the cluster PKI: with operator-supplied certificates, which
// carry no drover identity, any certificate of the CA may call anything,
// as before.
func (s *Server) Authorizer() rpc.Authorizer {
	if !s.pkiEnabled() {
		return nil
	}
	return func(ctx context.Context, method string, req any) error {
		rule, listed := rpcAccess[method]
		if listed && rule.public {
			return nil
		}
		id, err := s.peerIdentity(ctx)
		if err != nil {
			return err
		}
		if !listed {
			return id.RequireServer("call " + method)
		}
		if rule.check == nil {
			return nil
		}
		return rule.check(id, req)
	}
}

// PreAuthorizer refuses, before the request is read, a call whose method
// the caller's certificate can never be allowed: server-only methods to a
// client (or to a caller without a valid identity). Calls that the
// Authorizer decides from the request pass.
func (s *Server) PreAuthorizer() rpc.PreAuthorizer {
	if !s.pkiEnabled() {
		return nil
	}
	return func(ctx context.Context, method string) error {
		if _, listed := rpcAccess[method]; listed {
			return nil
		}
		id, err := s.peerIdentity(ctx)
		if err != nil {
			return err
		}
		return id.RequireServer("call " + method)
	}
}

func (s *Server) registerPKIRPC(rs *rpc.Server) {
	rpc.Handle(rs, "PKI.JoinChallenge", func(ctx context.Context, _ *Empty) (*JoinChallengeReply, error) {
		return s.JoinChallenge(rpc.PeerHost(ctx))
	})
	rpc.Handle(rs, "PKI.Join", func(ctx context.Context, a *pki.JoinRequest) (*pki.JoinResponse, error) {
		return s.Join(ctx, a)
	})
	rpc.Handle(rs, "PKI.Renew", func(ctx context.Context, a *RenewArgs) (*pki.JoinResponse, error) {
		id, err := s.peerIdentity(ctx)
		if err != nil {
			return nil, err
		}
		return s.Renew(id, a.CSR)
	})
	rpc.Handle(rs, "PKI.Init", func(ctx context.Context, a *PKIInitArgs) (*Empty, error) {
		return &Empty{}, s.initPKI(context.WithValue(ctx, forwardedKey{}, true), a)
	})
	rpc.Handle(rs, "PKI.RotateToken", func(ctx context.Context, a *JoinTokenArgs) (*JoinTokenReply, error) {
		tok, err := s.RotateJoinToken(context.WithValue(ctx, forwardedKey{}, true), a.Role)
		if err != nil {
			return nil, err
		}
		return &JoinTokenReply{Token: tok}, nil
	})
}

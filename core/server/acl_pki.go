package server

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/aclendpoint"
	"github.com/drover-org/drover/core/server/pkiendpoint"
	"github.com/drover-org/drover/core/structs"
)

// The ACL and PKI endpoints live in aclendpoint and pkiendpoint; this file
// wires them to the server's state, Raft and leader. The Server hands them
// out as ACL() and PKI() (endpoints.go) to the HTTP API and the agent.

// Names the agent and the RPC callers know these types by.
type (
	// PKIConfig is a server's part of the cluster PKI (nil: none).
	PKIConfig          = pkiendpoint.Config
	ACLResolveReply    = aclendpoint.ResolveReply
	ACLSecretArgs      = aclendpoint.SecretArgs
	JoinChallengeReply = pkiendpoint.JoinChallengeReply
	RenewArgs          = pkiendpoint.RenewArgs
	// IndexReply carries the Raft index of a write.
	IndexReply struct{ Index uint64 }
)

// oneTimeTokenGCInterval is how often expired one-time tokens go without
// a GC plugin (Config.OneTimeTokenGCInterval: 0).
const oneTimeTokenGCInterval = aclendpoint.DefaultOneTimeTokenGCInterval

// leaderLink is the server as its endpoints' way to the leader and to its
// peers (rpc.go, cluster.go).
type leaderLink struct{ s *Server }

func newACLEndpoint(s *Server) *aclendpoint.ACL {
	return aclendpoint.New(aclendpoint.Config{
		Enabled: s.cfg.ACLEnabled,
		State:   s.State,
		Apply:   s.raftApply,
		Leader:  leaderLink{s},
		Settled: s.waitEstablished,
		Now:     s.cfg.Now,
		DataDir: s.cfg.DataDir,
		Logger:  s.logger,
	})
}

// waitEstablished waits until this server, if it leads, has finished its
// step-up (the barrier that applies every entry of earlier terms passed),
// for at most 10 s. A server that loses the lead meanwhile answers
// ErrNoLeader: nothing was done, the caller may retry.
func (s *Server) waitEstablished(ctx context.Context) error {
	if s.leaderReady() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !s.established.Load() {
		if !s.IsLeader() {
			return structs.NewError(structs.ErrNoLeader, "No cluster leader: leadership lost while taking over")
		}
		select {
		case <-ctx.Done():
			return structs.NewError(structs.ErrNoLeader, "No cluster leader: leadership is not established yet")
		case <-t.C:
		}
	}
	return nil
}

func newPKIEndpoint(s *Server) *pkiendpoint.PKI {
	return pkiendpoint.New(s.cfg.PKI, pkiendpoint.Deps{
		State:     s.State,
		Apply:     s.raftApply,
		Leader:    leaderLink{s},
		CatchUp:   leaderLink{s}.catchUp,
		HasLeader: func() bool { return s.raft.Leader() != "" },
		Logger:    s.logger,
	})
}

// registerACLPKIRPC exposes both endpoints and decides every call by the
// caller's certificate (rpcAccess).
func (s *Server) registerACLPKIRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	aclendpoint.Register(rs, s.acl, mark)
	pkiendpoint.Register(rs, s.pki, mark)
	var trust *pki.Trust
	if s.cfg.PKI != nil {
		trust = s.cfg.PKI.Trust
	}
	rs.SetAuthorizer(pkiendpoint.Authorizer(trust, rpcAccess))
	rs.SetPreAuthorizer(pkiendpoint.PreAuthorizer(trust, rpcAccess))
}

// startPKI starts storing the local CA into Raft, when this server has one.
func (s *Server) startPKI() {
	if !s.pki.HoldsLocalCA() {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		pkiendpoint.StoreLocalCA(s.shutdownCtx, s.pki)
	}()
}

// expireOneTimeTokens is the leader's loop removing expired one-time
// tokens until leadership ends (without a GC plugin).
func (s *Server) expireOneTimeTokens(ctx context.Context) {
	aclendpoint.RunExpiry(ctx, s.acl, s.cfg.OneTimeTokenGCInterval)
}

// catchUp waits until this follower applied the leader's last log
// index. Without a leader (a cluster still forming) it does not wait.
func (l leaderLink) catchUp(ctx context.Context) error {
	s := l.s
	if s.rpcPool == nil || s.IsLeader() {
		return nil
	}
	addr, _ := s.raft.LeaderWithID()
	if addr == "" {
		return nil
	}
	info, err := l.peerInfo(ctx, string(addr))
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

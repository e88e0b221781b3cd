package server

import (
	"context"
	"slices"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// ACLResolveReply is a token as a client agent needs it to authorize the
// requests of its own HTTP API (logs, agent info): the token without its
// secret, and the policies it names as the servers hold them now. Enabled
// false says the servers run without ACLs.
type ACLResolveReply struct {
	Enabled  bool
	Token    *structs.ACLToken
	Policies []*structs.ACLPolicy
}

func (s *Server) registerACLResolveRPC(rs *rpc.Server) {
	rpc.Handle(rs, "ACL.ResolveToken", func(_ context.Context, a *ACLSecretArgs) (*ACLResolveReply, error) {
		return s.resolveForClient(a.SecretID)
	})
}

// resolveForClient looks a secret up for a client agent. An unknown or
// expired secret is the same permission-denied error a server's own
// resolution gives, so the client answers as a server would.
func (s *Server) resolveForClient(secretID string) (*ACLResolveReply, error) {
	if !s.cfg.ACLEnabled {
		return &ACLResolveReply{}, nil
	}
	tok, _, err := s.ResolveToken(secretID)
	if err != nil {
		return nil, err
	}
	snap, err := s.State().Snapshot()
	if err != nil {
		return nil, err
	}
	reply := &ACLResolveReply{Enabled: true, Token: tok.Redacted()}
	names := slices.Clone(tok.Policies)
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		p, err := snap.ACLPolicyByName(nil, name)
		if err != nil {
			return nil, err
		}
		if p != nil {
			reply.Policies = append(reply.Policies, p)
		}
	}
	return reply, nil
}

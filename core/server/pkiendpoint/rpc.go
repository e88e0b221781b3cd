package pkiendpoint

import (
	"context"
	"fmt"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// PKI RPC arguments and replies.
type (
	// Empty is an RPC without arguments or reply.
	Empty struct{}
	// JoinChallengeReply is a join challenge.
	JoinChallengeReply struct{ Challenge pki.Challenge }
	// RenewArgs carries a CSR (DER) for a fresh key of the caller.
	RenewArgs struct{ CSR []byte }
	// InitArgs forwards the creating server's PKI to the leader.
	InitArgs struct{ PKI structs.ClusterPKI }
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
func (a InitArgs) Format(f fmt.State, _ rune) {
	_, _ = f.Write([]byte("PKIInitArgs{" + a.PKI.String() + "}"))
}

// Register exposes the PKI endpoints of p on rs. mark tags the context of
// a request that arrived over RPC, so that a follower does not forward it
// again (see leaderrpc). The join exchange is public; PKI.Renew is for
// any certified caller; the rest are server-only (the server's access
// table says so).
func Register(rs *rpc.Server, p *PKI, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "PKI.JoinChallenge", func(ctx context.Context, _ *Empty) (*JoinChallengeReply, error) {
		return p.JoinChallenge(rpc.PeerHost(ctx))
	})
	rpc.Handle(rs, "PKI.Join", func(ctx context.Context, a *pki.JoinRequest) (*pki.JoinResponse, error) {
		return p.Join(ctx, a)
	})
	rpc.Handle(rs, "PKI.Renew", func(ctx context.Context, a *RenewArgs) (*pki.JoinResponse, error) {
		id, err := PeerIdentity(ctx, p.trust())
		if err != nil {
			return nil, err
		}
		return p.Renew(id, a.CSR)
	})
	rpc.Handle(rs, "PKI.Init", func(ctx context.Context, a *InitArgs) (*Empty, error) {
		return &Empty{}, p.init(mark(ctx), a)
	})
	rpc.Handle(rs, "PKI.RotateToken", func(ctx context.Context, a *JoinTokenArgs) (*JoinTokenReply, error) {
		tok, err := p.RotateJoinToken(mark(ctx), a.Role)
		if err != nil {
			return nil, err
		}
		return &JoinTokenReply{Token: tok}, nil
	})
}

// trust is the CA this server checks certificates against (nil: none).
func (p *PKI) trust() *pki.Trust {
	if p.cfg == nil {
		return nil
	}
	return p.cfg.Trust
}

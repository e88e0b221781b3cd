package aclendpoint

import (
	"context"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// RPC arguments and replies of the ACL endpoints.
type (
	BootstrapArgs struct {
		BootstrapSecret string
		ResetIndex      uint64
	}
	SecretArgs struct {
		// SecretID is the caller's token secret, or the one-time secret
		// of an exchange.
		SecretID string
	}
	// ExchangeArgs names a one-time token exchange: the secret and the
	// exchange's ID, made by the server the caller reached.
	ExchangeArgs struct {
		SecretID   string
		ExchangeID string
	}
	TokenReply struct {
		Token *structs.ACLToken
		Index uint64
	}
	OneTimeTokenReply struct {
		OneTimeToken *structs.OneTimeToken
		Index        uint64
	}
	// IndexReply carries the Raft index of a write.
	IndexReply       struct{ Index uint64 }
	PolicyUpsertArgs struct {
		SecretID string
		Policies []*structs.ACLPolicy
	}
	PolicyDeleteArgs struct {
		SecretID string
		Names    []string
	}
	TokenUpsertArgs struct {
		SecretID string
		Tokens   []*structs.ACLToken
	}
	TokenDeleteArgs struct {
		SecretID    string
		AccessorIDs []string
	}
	TokensReply struct {
		Tokens []*structs.ACLToken
		Index  uint64
	}
)

// Register exposes the ACL endpoints of a on rs. mark tags the context of
// a request that arrived over RPC, so that a follower does not forward it
// again (see leaderrpc). ACL.ResolveToken serves client agents; the
// others are server-only (the server's access table says so).
func Register(rs *rpc.Server, a *ACL, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "ACL.ResolveToken", func(_ context.Context, args *SecretArgs) (*ResolveReply, error) {
		return a.resolveForClient(args.SecretID)
	})
	rpc.Handle(rs, "ACL.Bootstrap", func(ctx context.Context, args *BootstrapArgs) (*TokenReply, error) {
		tok, idx, err := a.bootstrap(mark(ctx), args)
		return &TokenReply{Token: tok, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.UpsertOneTimeToken", func(ctx context.Context, args *SecretArgs) (*OneTimeTokenReply, error) {
		ott, idx, err := a.UpsertOneTimeToken(mark(ctx), args.SecretID)
		return &OneTimeTokenReply{OneTimeToken: ott, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.ExchangeOneTimeToken", func(ctx context.Context, args *ExchangeArgs) (*TokenReply, error) {
		// One attempt: the server that made the exchange ID recovers an
		// unknown outcome (see ExchangeOneTimeToken).
		id := args.ExchangeID
		switch {
		case id == "":
			id = uuid.NewString() // a caller of an older version
		case !structs.IsUUID(id):
			// It goes into the Raft entry: only a server-made UUID does.
			return nil, structs.NewError(structs.ErrInvalid, "one-time token exchange: ExchangeID must be a UUID")
		}
		tok, idx, err := a.exchangeOnce(mark(ctx), args.SecretID, id)
		return &TokenReply{Token: tok, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.ExpireOneTimeTokens", func(ctx context.Context, args *SecretArgs) (*IndexReply, error) {
		idx, err := a.ExpireOneTimeTokens(mark(ctx), args.SecretID)
		return &IndexReply{Index: idx}, err
	})
	rpc.Handle(rs, "ACL.UpsertPolicies", func(ctx context.Context, args *PolicyUpsertArgs) (*IndexReply, error) {
		idx, err := a.UpsertACLPolicies(mark(ctx), args.SecretID, args.Policies)
		return &IndexReply{Index: idx}, err
	})
	rpc.Handle(rs, "ACL.DeletePolicies", func(ctx context.Context, args *PolicyDeleteArgs) (*IndexReply, error) {
		idx, err := a.DeleteACLPolicies(mark(ctx), args.SecretID, args.Names)
		return &IndexReply{Index: idx}, err
	})
	rpc.Handle(rs, "ACL.UpsertTokens", func(ctx context.Context, args *TokenUpsertArgs) (*TokensReply, error) {
		toks, idx, err := a.UpsertACLTokens(mark(ctx), args.SecretID, args.Tokens)
		return &TokensReply{Tokens: toks, Index: idx}, err
	})
	registerRoles(rs, a, mark)
	registerAuth(rs, a, mark)
	rpc.Handle(rs, "ACL.DeleteTokens", func(ctx context.Context, args *TokenDeleteArgs) (*IndexReply, error) {
		idx, err := a.DeleteACLTokens(mark(ctx), args.SecretID, args.AccessorIDs)
		return &IndexReply{Index: idx}, err
	})
}

package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// ACL bootstrap and one-time tokens (NOMAD-BEHAVIOR §6). Each method
// authorizes its caller itself from the secret it is given; writes go to
// the leader.

const (
	// OneTimeTokenTTL is how long a one-time token can be exchanged.
	OneTimeTokenTTL = 10 * time.Minute
	// oneTimeTokenGCInterval is how often the leader removes expired
	// one-time tokens (until the GC plugin does it).
	oneTimeTokenGCInterval = 10 * time.Minute
	// aclBootstrapResetFile in the data dir holds the bootstrap index an
	// operator allows a second bootstrap at, as Nomad's does.
	aclBootstrapResetFile = "acl-bootstrap-reset"
)

var errACLDisabled = structs.NewError(structs.ErrInvalid, "ACL support disabled")

// RPC arguments and replies of the ACL endpoints.
type (
	ACLBootstrapArgs struct {
		BootstrapSecret string
		ResetIndex      uint64
	}
	ACLSecretArgs struct {
		// SecretID is the caller's token secret, or the one-time secret
		// of an exchange.
		SecretID string
	}
	ACLTokenReply struct {
		Token *structs.ACLToken
		Index uint64
	}
	OneTimeTokenReply struct {
		OneTimeToken *structs.OneTimeToken
		Index        uint64
	}
	// IndexReply carries the Raft index of a write.
	IndexReply struct{ Index uint64 }
)

func (s *Server) registerACLRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "ACL.Bootstrap", func(ctx context.Context, a *ACLBootstrapArgs) (*ACLTokenReply, error) {
		tok, idx, err := s.bootstrapACL(mark(ctx), a)
		return &ACLTokenReply{Token: tok, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.UpsertOneTimeToken", func(ctx context.Context, a *ACLSecretArgs) (*OneTimeTokenReply, error) {
		ott, idx, err := s.UpsertOneTimeToken(mark(ctx), a.SecretID)
		return &OneTimeTokenReply{OneTimeToken: ott, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.ExchangeOneTimeToken", func(ctx context.Context, a *ACLSecretArgs) (*ACLTokenReply, error) {
		tok, idx, err := s.ExchangeOneTimeToken(mark(ctx), a.SecretID)
		return &ACLTokenReply{Token: tok, Index: idx}, err
	})
	rpc.Handle(rs, "ACL.ExpireOneTimeTokens", func(ctx context.Context, a *ACLSecretArgs) (*IndexReply, error) {
		idx, err := s.ExpireOneTimeTokens(mark(ctx), a.SecretID)
		return &IndexReply{Index: idx}, err
	})
}

// BootstrapACL creates the first management token, once: with the given
// secret (a UUID) or a random one. A second bootstrap is refused unless
// <data_dir>/acl-bootstrap-reset holds the index of the first.
func (s *Server) BootstrapACL(ctx context.Context, bootstrapSecret string) (*structs.ACLToken, uint64, error) {
	return s.bootstrapACL(ctx, &ACLBootstrapArgs{BootstrapSecret: bootstrapSecret})
}

func (s *Server) bootstrapACL(ctx context.Context, a *ACLBootstrapArgs) (*structs.ACLToken, uint64, error) {
	if r, ok, err := forward[ACLBootstrapArgs, ACLTokenReply](ctx, s, "ACL.Bootstrap", a); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Token, r.Index, nil
	}
	if !s.cfg.ACLEnabled {
		return nil, 0, errACLDisabled
	}
	secret := strings.TrimSpace(a.BootstrapSecret)
	if secret == "" {
		secret = uuid.NewString()
	} else if !structs.IsUUID(secret) {
		return nil, 0, structs.NewError(structs.ErrInvalid, "invalid acl token: BootstrapSecret must be a UUID")
	}
	reset := a.ResetIndex
	if reset == 0 {
		var err error
		if reset, err = s.aclBootstrapResetIndex(); err != nil {
			return nil, 0, err
		}
	}
	if done := s.State().ACLBootstrapIndex(); done != 0 && done != reset {
		return nil, 0, structs.NewError(structs.ErrInvalid, "ACL bootstrap already done (reset index: %d)", done)
	}
	tok := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: secret, Name: "Bootstrap Token",
		Type: structs.ACLManagementToken, Global: true}
	tok.Canonicalize(s.cfg.Now())
	tok.SetHash()
	idx, err := s.raftApply(structs.ACLTokenBootstrapRequestType, &structs.ACLTokenBootstrapRequest{Token: tok, ResetIndex: reset})
	if err != nil {
		return nil, 0, err
	}
	stored, err := s.State().ACLTokenByAccessorID(nil, tok.AccessorID)
	if err != nil {
		return nil, 0, err
	}
	if stored == nil {
		return nil, 0, structs.NewError(structs.ErrUnavailable, "bootstrap token %s not found after its write", tok.AccessorID)
	}
	s.logger.Info("ACL bootstrap done", "accessor_id", tok.AccessorID, "index", idx)
	return stored.Copy(), idx, nil
}

// aclBootstrapResetIndex reads the reset file of the data dir: 0 when
// there is none.
func (s *Server) aclBootstrapResetIndex() (uint64, error) {
	if s.cfg.DataDir == "" {
		return 0, nil
	}
	raw, err := os.ReadFile(filepath.Join(s.cfg.DataDir, aclBootstrapResetFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, structs.NewError(structs.ErrInvalid, "reading %s: %v", aclBootstrapResetFile, err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return 0, structs.NewError(structs.ErrInvalid, "%s must hold the reset index, a number: %v", aclBootstrapResetFile, err)
	}
	return n, nil
}

// UpsertOneTimeToken creates a one-time token for the caller's ACL token,
// replacing the caller's previous one; it can be exchanged for ten
// minutes.
func (s *Server) UpsertOneTimeToken(ctx context.Context, callerSecret string) (*structs.OneTimeToken, uint64, error) {
	if r, ok, err := forward[ACLSecretArgs, OneTimeTokenReply](ctx, s, "ACL.UpsertOneTimeToken", &ACLSecretArgs{SecretID: callerSecret}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.OneTimeToken, r.Index, nil
	}
	if !s.cfg.ACLEnabled {
		return nil, 0, errACLDisabled
	}
	if callerSecret == "" {
		return nil, 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied: a one-time token needs the caller's ACL token")
	}
	tok, _, err := s.ResolveToken(callerSecret)
	if err != nil {
		return nil, 0, err
	}
	ott := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: tok.AccessorID,
		ExpiresAt: s.cfg.Now().Add(OneTimeTokenTTL).UTC()}
	idx, err := s.raftApply(structs.OneTimeTokenUpsertRequestType, &structs.OneTimeTokenUpsertRequest{OneTimeToken: ott})
	if err != nil {
		return nil, 0, err
	}
	return ott, idx, nil
}

// ExchangeOneTimeToken returns the ACL token a one-time token stands for
// and deletes the one-time token, so that of any number of exchanges,
// concurrent or not, exactly one succeeds. An unknown, spent or expired
// one-time token, or one whose ACL token is gone, is permission denied.
func (s *Server) ExchangeOneTimeToken(ctx context.Context, ottSecret string) (*structs.ACLToken, uint64, error) {
	if r, ok, err := forward[ACLSecretArgs, ACLTokenReply](ctx, s, "ACL.ExchangeOneTimeToken", &ACLSecretArgs{SecretID: ottSecret}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Token, r.Index, nil
	}
	if !s.cfg.ACLEnabled {
		return nil, 0, errACLDisabled
	}
	denied := structs.NewError(structs.ErrPermissionDenied, "Permission denied")
	if !structs.IsUUID(ottSecret) {
		return nil, 0, denied
	}
	st := s.State()
	ott, err := st.OneTimeTokenBySecret(nil, ottSecret)
	if err != nil {
		return nil, 0, err
	}
	if ott == nil || ott.IsExpired(s.cfg.Now()) {
		return nil, 0, denied
	}
	tok, err := st.ACLTokenByAccessorID(nil, ott.AccessorID)
	if err != nil {
		return nil, 0, err
	}
	if tok == nil {
		return nil, 0, denied
	}
	// The FSM deletes the one-time token only if it is still there and
	// unexpired at the leader's time: a second exchange is refused there.
	idx, err := s.raftApply(structs.OneTimeTokenDeleteRequestType, &structs.OneTimeTokenDeleteRequest{
		AccessorIDs: []string{ott.AccessorID}, OneTimeSecretID: ottSecret})
	if err != nil {
		return nil, 0, err
	}
	return tok.Copy(), idx, nil
}

// ExpireOneTimeTokens removes every expired one-time token; with ACLs on
// it needs a management token.
func (s *Server) ExpireOneTimeTokens(ctx context.Context, callerSecret string) (uint64, error) {
	if r, ok, err := forward[ACLSecretArgs, IndexReply](ctx, s, "ACL.ExpireOneTimeTokens", &ACLSecretArgs{SecretID: callerSecret}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if s.cfg.ACLEnabled {
		_, a, err := s.ResolveToken(callerSecret)
		if err != nil {
			return 0, err
		}
		if !a.IsManagement() {
			return 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied: expiring one-time tokens needs a management token")
		}
	}
	return s.raftApply(structs.OneTimeTokenExpireRequestType, &structs.OneTimeTokenExpireRequest{})
}

// expireOneTimeTokens is the leader's loop removing expired one-time
// tokens until leadership ends.
func (s *Server) expireOneTimeTokens(ctx context.Context) {
	interval := s.cfg.OneTimeTokenGCInterval
	if interval <= 0 {
		interval = oneTimeTokenGCInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.anyOneTimeTokenExpired() {
			continue
		}
		if _, err := s.raftApply(structs.OneTimeTokenExpireRequestType, &structs.OneTimeTokenExpireRequest{}); err != nil {
			s.logger.Warn("expiring one-time tokens failed", "error", err)
		}
	}
}

// anyOneTimeTokenExpired reports whether a one-time token has expired, so
// that the loop writes to Raft only when there is something to remove.
func (s *Server) anyOneTimeTokenExpired() bool {
	otts, err := s.State().OneTimeTokens(nil)
	if err != nil {
		return true // let the FSM look
	}
	now := s.cfg.Now()
	for _, o := range otts {
		if o.IsExpired(now) {
			return true
		}
	}
	return false
}

package aclendpoint

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/leaderrpc"
	"github.com/drover-org/drover/core/structs"
)

// UpsertOneTimeToken creates a one-time token for the caller's ACL token,
// replacing the caller's previous one; it can be exchanged for ten
// minutes.
func (a *ACL) UpsertOneTimeToken(ctx context.Context, callerSecret string) (*structs.OneTimeToken, uint64, error) {
	if r, ok, err := leaderrpc.Forward[SecretArgs, OneTimeTokenReply](ctx, a.cfg.Leader, "ACL.UpsertOneTimeToken", &SecretArgs{SecretID: callerSecret}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.OneTimeToken, r.Index, nil
	}
	if !a.cfg.Enabled {
		return nil, 0, errDisabled
	}
	if callerSecret == "" {
		return nil, 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied: a one-time token needs the caller's ACL token")
	}
	tok, _, err := a.ResolveToken(callerSecret)
	if err != nil {
		return nil, 0, err
	}
	ott := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: tok.AccessorID,
		ExpiresAt: a.cfg.Now().Add(OneTimeTokenTTL).UTC()}
	idx, err := a.apply(structs.OneTimeTokenUpsertRequestType, &structs.OneTimeTokenUpsertRequest{OneTimeToken: ott})
	if err != nil {
		return nil, 0, err
	}
	return ott, idx, nil
}

// ExchangeOneTimeToken returns the ACL token a one-time token stands for
// and deletes the one-time token, so that of any number of exchanges,
// concurrent or not, exactly one succeeds. An unknown, spent or expired
// one-time token, or one whose ACL token is gone, is permission denied.
func (a *ACL) ExchangeOneTimeToken(ctx context.Context, ottSecret string) (*structs.ACLToken, uint64, error) {
	if r, ok, err := leaderrpc.Forward[SecretArgs, TokenReply](ctx, a.cfg.Leader, "ACL.ExchangeOneTimeToken", &SecretArgs{SecretID: ottSecret}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Token, r.Index, nil
	}
	if !a.cfg.Enabled {
		return nil, 0, errDisabled
	}
	if !structs.IsUUID(ottSecret) {
		return nil, 0, errExchangeDenied()
	}
	st := a.cfg.State()
	ott, err := st.OneTimeTokenBySecret(nil, ottSecret)
	if err != nil {
		return nil, 0, err
	}
	if err := checkExchange(ott, a.cfg.Now()); err != nil {
		return nil, 0, err
	}
	tok, err := st.ACLTokenByAccessorID(nil, ott.AccessorID)
	if err != nil {
		return nil, 0, err
	}
	if tok == nil {
		return nil, 0, errExchangeDenied()
	}
	// The FSM deletes the one-time token only if it is still there and
	// unexpired at the leader's time: a second exchange is refused there.
	idx, err := a.apply(structs.OneTimeTokenDeleteRequestType, &structs.OneTimeTokenDeleteRequest{
		AccessorIDs: []string{ott.AccessorID}, OneTimeSecretID: ottSecret})
	if err != nil {
		return nil, 0, err
	}
	return tok.Copy(), idx, nil
}

// ExpireOneTimeTokens removes every expired one-time token; with ACLs on
// it needs a management token.
func (a *ACL) ExpireOneTimeTokens(ctx context.Context, callerSecret string) (uint64, error) {
	if r, ok, err := leaderrpc.Forward[SecretArgs, IndexReply](ctx, a.cfg.Leader, "ACL.ExpireOneTimeTokens", &SecretArgs{SecretID: callerSecret}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if a.cfg.Enabled {
		_, c, err := a.ResolveToken(callerSecret)
		if err != nil {
			return 0, err
		}
		if err := requireManagement(c, "expiring one-time tokens"); err != nil {
			return 0, err
		}
	}
	return a.apply(structs.OneTimeTokenExpireRequestType, &structs.OneTimeTokenExpireRequest{})
}

// RunExpiry is the leader's loop removing the expired one-time tokens of
// a every interval (0: DefaultOneTimeTokenGCInterval) until ctx ends. It
// writes to Raft only when a token has expired.
func RunExpiry(ctx context.Context, a *ACL, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultOneTimeTokenGCInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !a.anyOneTimeTokenExpired() {
			continue
		}
		if _, err := a.apply(structs.OneTimeTokenExpireRequestType, &structs.OneTimeTokenExpireRequest{}); err != nil {
			a.logger.Warn("expiring one-time tokens failed", "error", err)
		}
	}
}

func (a *ACL) anyOneTimeTokenExpired() bool {
	otts, err := a.cfg.State().OneTimeTokens(nil)
	if err != nil {
		return true // let the FSM look
	}
	return anyExpired(otts, a.cfg.Now())
}

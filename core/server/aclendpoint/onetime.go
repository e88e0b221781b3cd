package aclendpoint

import (
	"context"
	"errors"
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

// exchangeRecoveryTimeout bounds how long an exchange whose Raft outcome
// is unknown keeps asking the cluster whether it won.
const exchangeRecoveryTimeout = 10 * time.Second

// ExchangeOneTimeToken returns the ACL token a one-time token stands for
// and spends the one-time token, so that of any number of exchanges,
// concurrent or not, exactly one succeeds. An unknown, spent or expired
// one-time token, or one whose ACL token is gone, is permission denied.
//
// Each exchange has an ID, made here before any forwarding and carried in
// the Raft entry; the FSM records it on the token it spends. When the
// write fails in a way that may hide a commit (leadership lost after the
// entry was appended, a forward whose connection broke or whose deadline
// passed after sending), the exchange applies the same entry again,
// through whichever server leads, for up to exchangeRecoveryTimeout: the
// FSM accepts an entry whose exchange already spent the token, so the
// answer is the token if this exchange won and permission denied if
// another did. If no leader answers in time, the first error comes back.
func (a *ACL) ExchangeOneTimeToken(ctx context.Context, ottSecret string) (*structs.ACLToken, uint64, error) {
	return a.exchangeOneTimeToken(ctx, ottSecret, uuid.NewString())
}

func (a *ACL) exchangeOneTimeToken(ctx context.Context, ottSecret, exchangeID string) (*structs.ACLToken, uint64, error) {
	tok, idx, err := a.exchangeOnce(ctx, ottSecret, exchangeID)
	if err == nil || !outcomeUnknown(err) {
		return tok, idx, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.exchangeRecovery)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		t := time.NewTimer(wait)
		select {
		case <-rctx.Done():
			t.Stop()
			return nil, 0, err
		case <-t.C:
		}
		tok, idx, rerr := a.exchangeOnce(rctx, ottSecret, exchangeID)
		if rerr == nil || !outcomeUnknown(rerr) {
			a.logger.Debug("one-time token exchange with an unknown outcome resolved", "exchange_id", exchangeID, "error", rerr)
			return tok, idx, rerr
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// outcomeUnknown reports whether a failed write may still have committed:
// the leader lost leadership with the entry in flight (ErrNoLeader), the
// way to the leader broke after sending (ErrUnavailable), or the deadline
// passed while waiting for the answer.
func outcomeUnknown(err error) bool {
	return errors.Is(err, structs.ErrNoLeader) || errors.Is(err, structs.ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded)
}

// exchangeOnce is one attempt of exchange exchangeID, on the leader or
// forwarded to it.
func (a *ACL) exchangeOnce(ctx context.Context, ottSecret, exchangeID string) (*structs.ACLToken, uint64, error) {
	if r, ok, err := leaderrpc.Forward[ExchangeArgs, TokenReply](ctx, a.cfg.Leader, "ACL.ExchangeOneTimeToken", &ExchangeArgs{SecretID: ottSecret, ExchangeID: exchangeID}); ok {
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
	// A one-time token issued by the previous leader is in this one's log
	// but maybe not yet in its state: refusing it as unknown would spend
	// nothing yet deny the caller its token.
	if a.cfg.Settled != nil {
		if err := a.cfg.Settled(ctx); err != nil {
			return nil, 0, err
		}
	}
	st := a.cfg.State()
	ott, err := st.OneTimeTokenBySecretAny(nil, ottSecret)
	if err != nil {
		return nil, 0, err
	}
	if ott != nil && ott.IsSpent() && ott.ExchangeID != exchangeID {
		return nil, 0, errExchangeDenied()
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
	// The FSM spends the one-time token only if it is still there, unspent
	// and unexpired at the leader's time: a second exchange is refused
	// there, and this exchange applied again is accepted.
	idx, err := a.apply(structs.OneTimeTokenDeleteRequestType, &structs.OneTimeTokenDeleteRequest{
		AccessorIDs: []string{ott.AccessorID}, OneTimeSecretID: ottSecret, ExchangeID: exchangeID})
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

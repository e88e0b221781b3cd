package aclendpoint

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// lostLeadership is the error the server's Apply gives when leadership
// was lost with the entry in flight: it may still commit.
func lostLeadership() error {
	return structs.NewError(structs.ErrNoLeader, "No cluster leader: leadership lost while committing command")
}

// exchangeFaults wraps a test ACL's Apply: fault, when set, sees every
// one-time token exchange entry and the real apply, and answers for it.
func exchangeServer(t *testing.T, fault func(n int64, req *structs.OneTimeTokenDeleteRequest, apply func() (uint64, error)) (uint64, error)) (*testACL, *structs.ACLToken, *structs.OneTimeToken) {
	t.Helper()
	var n atomic.Int64
	s := aclServer(t, nil, func(c *Config) {
		inner := c.Apply
		c.Apply = func(typ structs.MessageType, msg any) (uint64, error) {
			req, ok := msg.(*structs.OneTimeTokenDeleteRequest)
			if !ok || req.OneTimeSecretID == "" {
				return inner(typ, msg)
			}
			return fault(n.Add(1), req, func() (uint64, error) { return inner(typ, msg) })
		}
	})
	s.exchangeRecovery = 2 * time.Second
	ctx := context.Background()
	mgmt, _, err := s.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ott, _, err := s.UpsertOneTimeToken(ctx, mgmt.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	return s, mgmt, ott
}

// The entry commits but the apply reports lost leadership (Raft's outcome
// is unknown to the caller): the exchange learns it won and returns the
// token; a later exchange of the same secret is refused.
func TestExchangeOneTimeToken_CommittedDespiteLostLeadership(t *testing.T) {
	s, mgmt, ott := exchangeServer(t, func(n int64, _ *structs.OneTimeTokenDeleteRequest, apply func() (uint64, error)) (uint64, error) {
		if n == 1 {
			if _, err := apply(); err != nil {
				t.Errorf("first apply: %v", err)
			}
			return 0, lostLeadership()
		}
		return apply()
	})
	ctx := context.Background()
	tok, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID)
	if err != nil {
		t.Fatalf("exchange whose entry committed: %v, want the token", err)
	}
	if tok.SecretID != mgmt.SecretID {
		t.Fatalf("exchange gave %+v, want the management token", tok)
	}
	if _, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("second exchange: %v, want ErrPermissionDenied", err)
	}
	if o, _ := s.State().OneTimeTokenBySecretAny(nil, ott.OneTimeSecretID); o == nil || !o.IsSpent() {
		t.Fatalf("one-time token after the exchange: %+v, want spent", o)
	}
}

// The entry is lost with the leadership (never committed). While the
// cluster has no leader the exchange answers ErrNoLeader (503, retryable)
// once its recovery bound passes, and the token is still unspent, so a
// retry succeeds. If a leader answers within the bound, the exchange
// applies its entry again and wins; if another exchange spent the token
// meanwhile, it is permission denied.
func TestExchangeOneTimeToken_LostEntry(t *testing.T) {
	ctx := context.Background()

	t.Run("no leader within the bound", func(t *testing.T) {
		var down atomic.Bool
		down.Store(true)
		s, mgmt, ott := exchangeServer(t, func(_ int64, _ *structs.OneTimeTokenDeleteRequest, apply func() (uint64, error)) (uint64, error) {
			if down.Load() {
				return 0, lostLeadership()
			}
			return apply()
		})
		s.exchangeRecovery = 100 * time.Millisecond
		if _, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID); !errors.Is(err, structs.ErrNoLeader) {
			t.Fatalf("exchange without a leader: %v, want ErrNoLeader", err)
		}
		if o, _ := s.State().OneTimeTokenBySecret(nil, ott.OneTimeSecretID); o == nil {
			t.Fatal("a lost exchange spent the one-time token")
		}
		down.Store(false)
		tok, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID)
		if err != nil || tok.SecretID != mgmt.SecretID {
			t.Fatalf("retry after the leader is back: %+v, %v; want the management token", tok, err)
		}
	})

	t.Run("leader back within the bound", func(t *testing.T) {
		s, mgmt, ott := exchangeServer(t, func(n int64, _ *structs.OneTimeTokenDeleteRequest, apply func() (uint64, error)) (uint64, error) {
			if n == 1 {
				return 0, lostLeadership()
			}
			return apply()
		})
		tok, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID)
		if err != nil || tok.SecretID != mgmt.SecretID {
			t.Fatalf("exchange: %+v, %v; want the management token", tok, err)
		}
	})

	t.Run("another exchange won meanwhile", func(t *testing.T) {
		other := uuid.NewString()
		s, _, ott := exchangeServer(t, func(n int64, req *structs.OneTimeTokenDeleteRequest, apply func() (uint64, error)) (uint64, error) {
			if n == 1 {
				// The lost entry's place is taken by another exchange.
				mine := req.ExchangeID
				req.ExchangeID = other
				if _, err := apply(); err != nil {
					t.Errorf("the other exchange: %v", err)
				}
				req.ExchangeID = mine
				return 0, lostLeadership()
			}
			return apply()
		})
		if _, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID); !errors.Is(err, structs.ErrPermissionDenied) {
			t.Fatalf("exchange that lost to another: %v, want ErrPermissionDenied", err)
		}
		if o, _ := s.State().OneTimeTokenBySecretAny(nil, ott.OneTimeSecretID); o == nil || o.ExchangeID != other {
			t.Fatalf("one-time token %+v, want spent by the other exchange", o)
		}
	})
}

// A refusal whose outcome is known is not retried: the FSM's permission
// denied comes back at once, with one apply.
func TestExchangeOneTimeToken_DeniedNotRetried(t *testing.T) {
	var applies atomic.Int64
	s, _, ott := exchangeServer(t, func(_ int64, _ *structs.OneTimeTokenDeleteRequest, _ func() (uint64, error)) (uint64, error) {
		applies.Add(1)
		return 0, structs.NewError(structs.ErrPermissionDenied, "Permission denied")
	})
	if _, _, err := s.ExchangeOneTimeToken(context.Background(), ott.OneTimeSecretID); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("exchange: %v, want ErrPermissionDenied", err)
	}
	if applies.Load() != 1 {
		t.Fatalf("%d applies of a refused exchange, want 1", applies.Load())
	}
}

func TestOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{lostLeadership(), true},
		{structs.NewError(structs.ErrUnavailable, "rpc to leader: connection reset"), true},
		{context.DeadlineExceeded, true},
		{structs.NewError(structs.ErrPermissionDenied, "Permission denied"), false},
		{structs.NewError(structs.ErrInvalid, "bad"), false},
		{errors.New("boom"), false},
	} {
		if got := outcomeUnknown(tc.err); got != tc.want {
			t.Errorf("outcomeUnknown(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

package aclendpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

func TestBootstrapACL(t *testing.T) {
	ctx := context.Background()
	if _, _, err := newTestACL(t, nil).BootstrapACL(ctx, ""); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "ACL support disabled") {
		t.Fatalf("bootstrap with ACLs off: %v", err)
	}

	dataDir := t.TempDir()
	s := aclServer(t, nil, func(c *Config) { c.DataDir = dataDir })
	if _, _, err := s.BootstrapACL(ctx, "not-a-uuid"); !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "invalid acl token") {
		t.Fatalf("bootstrap with a bad secret: %v", err)
	}
	if s.State().ACLBootstrapIndex() != 0 {
		t.Fatal("a refused bootstrap was stored")
	}
	secret := uuid.NewString()
	tok, idx, err := s.BootstrapACL(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if tok.SecretID != secret || !tok.IsManagement() || tok.Name != "Bootstrap Token" || !tok.Global || idx == 0 {
		t.Fatalf("bootstrap token = %+v at %d", tok, idx)
	}
	if _, a, err := s.ResolveToken(secret); err != nil || !a.IsManagement() {
		t.Fatalf("the bootstrap secret resolves to %v, %v", a, err)
	}
	_, _, err = s.BootstrapACL(ctx, "")
	want := "ACL bootstrap already done (reset index: " + strconv.FormatUint(idx, 10) + ")"
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("second bootstrap: %v, want %q", err, want)
	}
	// The operator allows one more bootstrap by writing the reset index.
	if err := os.WriteFile(filepath.Join(dataDir, BootstrapResetFile), []byte(strconv.FormatUint(idx, 10)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok2, idx2, err := s.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatalf("bootstrap after reset: %v", err)
	}
	if tok2.AccessorID == tok.AccessorID || idx2 <= idx {
		t.Fatalf("reset bootstrap gave %+v at %d", tok2, idx2)
	}
	if _, _, err := s.BootstrapACL(ctx, ""); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("a stale reset file allowed a third bootstrap: %v", err)
	}
}

func TestOneTimeTokens(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := aclServer(t, clock, nil)
	mgmt, _, err := s.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.State().UpsertACLPolicies(5000, []*structs.ACLPolicy{{Name: "reader", Rules: `namespace "default" { policy = "read" }`}}); err != nil {
		t.Fatal(err)
	}
	client := &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: "c", Type: structs.ACLClientToken, Policies: []string{"reader"}}
	if err := s.State().UpsertACLTokens(5001, []*structs.ACLToken{client}); err != nil {
		t.Fatal(err)
	}

	if _, _, err := s.UpsertOneTimeToken(ctx, ""); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("anonymous one-time token: %v", err)
	}
	if _, _, err := s.UpsertOneTimeToken(ctx, uuid.NewString()); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("one-time token for an unknown secret: %v", err)
	}

	ott, _, err := s.UpsertOneTimeToken(ctx, client.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	if ott.AccessorID != client.AccessorID || !ott.ExpiresAt.Equal(clock.Now().Add(OneTimeTokenTTL).UTC()) {
		t.Fatalf("one-time token = %+v", ott)
	}
	got, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AccessorID != client.AccessorID || got.SecretID != client.SecretID {
		t.Fatalf("exchange gave %+v, want the caller's token", got)
	}
	if _, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("second exchange: %v", err)
	}
	if _, _, err := s.ExchangeOneTimeToken(ctx, "garbage"); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("exchange of garbage: %v", err)
	}

	// Expired: refused, and left for the GC.
	old, _, err := s.UpsertOneTimeToken(ctx, mgmt.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(OneTimeTokenTTL + time.Second)
	if _, _, err := s.ExchangeOneTimeToken(ctx, old.OneTimeSecretID); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("exchange of an expired one-time token: %v", err)
	}
	if o, _ := s.State().OneTimeTokenBySecret(nil, old.OneTimeSecretID); o == nil {
		t.Fatal("a refused exchange deleted the one-time token")
	}
	if _, err := s.ExpireOneTimeTokens(ctx, client.SecretID); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("expire with a client token: %v", err)
	}
	if o, _ := s.State().OneTimeTokenBySecret(nil, old.OneTimeSecretID); o == nil {
		t.Fatal("a refused expire deleted the one-time token")
	}
	if _, err := s.ExpireOneTimeTokens(ctx, mgmt.SecretID); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.State().OneTimeTokenBySecret(nil, old.OneTimeSecretID); o != nil {
		t.Fatal("expire kept an expired one-time token")
	}
}

// Of many concurrent exchanges of one secret exactly one returns the
// token.
func TestOneTimeTokenExchangedOnceUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	s := aclServer(t, nil, nil)
	mgmt, _, err := s.BootstrapACL(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		ott, _, err := s.UpsertOneTimeToken(ctx, mgmt.SecretID)
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		var wg sync.WaitGroup
		var wins, denials atomic.Int32
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tok, _, err := s.ExchangeOneTimeToken(ctx, ott.OneTimeSecretID)
				switch {
				case err == nil && tok.SecretID == mgmt.SecretID:
					wins.Add(1)
				case errors.Is(err, structs.ErrPermissionDenied):
					denials.Add(1)
				default:
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("unexpected exchange answer: %v", err)
		}
		if wins.Load() != 1 || denials.Load() != n-1 {
			t.Fatalf("round %d: %d exchanges won and %d were denied, want 1 and %d", round, wins.Load(), denials.Load(), n-1)
		}
	}
}

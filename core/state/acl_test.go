package state

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

func mockToken(policies ...string) *structs.ACLToken {
	typ := structs.ACLManagementToken
	if len(policies) > 0 {
		typ = structs.ACLClientToken
	}
	return &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Name: "t", Type: typ, Policies: policies}
}

func TestStateStore_ACLPolicies(t *testing.T) {
	s := testStore(t)
	must(t, s.UpsertACLPolicies(5, []*structs.ACLPolicy{{Name: "a", Rules: `node { policy = "read" }`}, {Name: "ab"}}))
	must(t, s.UpsertACLPolicies(6, []*structs.ACLPolicy{{Name: "a", Description: "changed"}}))
	p, err := s.ACLPolicyByName(nil, "a")
	if err != nil || p == nil || p.CreateIndex != 5 || p.ModifyIndex != 6 || p.Description != "changed" || len(p.Hash) == 0 {
		t.Fatalf("policy a = %+v, %v; want created 5 modified 6 with a hash", p, err)
	}
	if ps, _ := s.ACLPolicies(nil, "a"); len(ps) != 2 {
		t.Errorf("prefix a lists %d policies, want 2", len(ps))
	}
	if s.Index(TableACLPolicies) != 6 {
		t.Errorf("policies index %d, want 6", s.Index(TableACLPolicies))
	}
	if err := s.UpsertACLPolicies(7, []*structs.ACLPolicy{{Name: "ok"}, {Name: "bad name"}}); structs.KindName(err) != "invalid" {
		t.Errorf("bad policy name: err %v, want ErrInvalid", err)
	}
	if p, _ := s.ACLPolicyByName(nil, "ok"); p != nil {
		t.Error("a refused upsert wrote a policy")
	}
	if err := s.DeleteACLPolicies(8, []string{"ab", "missing"}); !errors.Is(err, structs.ErrNotFound) {
		t.Errorf("delete of a missing policy: err %v, want ErrNotFound", err)
	}
	must(t, s.DeleteACLPolicies(9, []string{"ab"}))
	if ps, _ := s.ACLPolicies(nil, ""); len(ps) != 1 {
		t.Errorf("after delete %d policies, want 1", len(ps))
	}
}

func TestStateStore_ACLTokens(t *testing.T) {
	s := testStore(t)
	a, b := mockToken(), mockToken("p")
	must(t, s.UpsertACLTokens(3, []*structs.ACLToken{a, b}))
	got, _ := s.ACLTokenBySecretID(nil, b.SecretID)
	if got == nil || got.AccessorID != b.AccessorID || got.CreateIndex != 3 {
		t.Fatalf("by secret = %+v, want b at 3", got)
	}
	if got, _ := s.ACLTokenBySecretID(nil, ""); got != nil {
		t.Error("empty secret found a token")
	}
	// The secret index is unique: another accessor cannot take b's secret.
	dup := mockToken()
	dup.SecretID = b.SecretID
	if err := s.UpsertACLTokens(4, []*structs.ACLToken{dup}); !errors.Is(err, structs.ErrConflict) {
		t.Errorf("duplicate secret: err %v, want ErrConflict", err)
	}
	if got, _ := s.ACLTokenByAccessorID(nil, dup.AccessorID); got != nil {
		t.Error("refused token stored")
	}
	upd := b.Copy()
	upd.Name, upd.Hash = "renamed", nil
	must(t, s.UpsertACLTokens(5, []*structs.ACLToken{upd}))
	got, _ = s.ACLTokenByAccessorID(nil, b.AccessorID)
	if got.CreateIndex != 3 || got.ModifyIndex != 5 || got.Name != "renamed" {
		t.Errorf("updated token %+v, want create 3 modify 5", got)
	}
	// Deleting a token deletes its one-time token.
	must(t, s.UpsertOneTimeToken(6, &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: b.AccessorID, ExpiresAt: time.Unix(100, 0)}))
	must(t, s.DeleteACLTokens(7, []string{b.AccessorID}))
	if ott, _ := s.OneTimeTokens(nil); len(ott) != 0 {
		t.Errorf("%d one-time tokens left after their token was deleted", len(ott))
	}
	if err := s.DeleteACLTokens(8, []string{b.AccessorID}); !errors.Is(err, structs.ErrNotFound) {
		t.Errorf("delete missing: err %v, want ErrNotFound", err)
	}
}

func TestStateStore_BootstrapACL(t *testing.T) {
	s := testStore(t)
	must(t, s.BootstrapACLTokens(10, 0, mockToken()))
	if s.ACLBootstrapIndex() != 10 {
		t.Fatalf("bootstrap index %d, want 10", s.ACLBootstrapIndex())
	}
	err := s.BootstrapACLTokens(11, 0, mockToken())
	if !errors.Is(err, structs.ErrInvalid) || err.Error() != "ACL bootstrap already done (reset index: 10)" {
		t.Errorf("second bootstrap: %v", err)
	}
	must(t, s.BootstrapACLTokens(12, 10, mockToken()))
	if s.ACLBootstrapIndex() != 12 {
		t.Errorf("after reset bootstrap index %d, want 12", s.ACLBootstrapIndex())
	}
	if toks, _ := s.ACLTokens(nil, ""); len(toks) != 2 {
		t.Errorf("%d tokens, want 2", len(toks))
	}
}

func TestStateStore_OneTimeTokens(t *testing.T) {
	s := testStore(t)
	base := time.Unix(1000, 0).UTC()
	tok := mockToken()
	must(t, s.UpsertACLTokens(1, []*structs.ACLToken{tok}))
	if err := s.UpsertOneTimeToken(2, &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: tok.AccessorID}); structs.KindName(err) != "invalid" {
		t.Errorf("zero ExpiresAt: err %v, want ErrInvalid", err)
	}
	first := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: tok.AccessorID, ExpiresAt: base}
	must(t, s.UpsertOneTimeToken(3, first))
	// A second OTT of the same token replaces the first.
	second := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: tok.AccessorID, ExpiresAt: base.Add(time.Minute)}
	must(t, s.UpsertOneTimeToken(4, second))
	if o, _ := s.OneTimeTokenBySecret(nil, first.OneTimeSecretID); o != nil {
		t.Error("replaced OTT still found by its secret")
	}
	if o, _ := s.OneTimeTokenBySecret(nil, second.OneTimeSecretID); o == nil || o.CreateIndex != 4 {
		t.Fatalf("OTT by secret = %+v, want the second at 4", o)
	}

	// Expired at the exchange's time: refused, and it stays.
	err := s.At(base.Add(2*time.Minute)).ExchangeOneTimeToken(5, tok.AccessorID, second.OneTimeSecretID, "")
	if !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("expired exchange: err %v, want ErrPermissionDenied", err)
	}
	if o, _ := s.OneTimeTokenBySecret(nil, second.OneTimeSecretID); o == nil {
		t.Error("an expired exchange deleted the OTT")
	}
	// An entry without an exchange ID (an older version's) deletes it.
	must(t, s.At(base).ExchangeOneTimeToken(6, tok.AccessorID, second.OneTimeSecretID, ""))
	if o, _ := s.OneTimeTokenBySecretAny(nil, second.OneTimeSecretID); o != nil {
		t.Errorf("exchange without an exchange ID left %+v, want it deleted", o)
	}
	if err := s.At(base).ExchangeOneTimeToken(7, tok.AccessorID, second.OneTimeSecretID, ""); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("second exchange: err %v, want ErrPermissionDenied", err)
	}

	// Expire removes exactly those before the time.
	other := mockToken()
	must(t, s.UpsertACLTokens(8, []*structs.ACLToken{other}))
	must(t, s.UpsertOneTimeToken(9, &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: tok.AccessorID, ExpiresAt: base}))
	must(t, s.UpsertOneTimeToken(10, &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: other.AccessorID, ExpiresAt: base.Add(time.Hour)}))
	must(t, s.At(base.Add(time.Minute)).ExpireOneTimeTokens(11))
	left, _ := s.OneTimeTokens(nil)
	if len(left) != 1 || left[0].AccessorID != other.AccessorID {
		t.Errorf("after expire %+v, want only other's", left)
	}
	must(t, s.DeleteOneTimeTokens(12, []string{other.AccessorID, "missing"}))
	if left, _ := s.OneTimeTokens(nil); len(left) != 0 {
		t.Errorf("%d OTTs after delete", len(left))
	}
}

// An exchange with an ID marks the one-time token spent by it: no lookup
// that grants anything finds it, another exchange is refused, the same
// exchange applied again succeeds without a write, and expiry removes it.
func TestStateStore_OneTimeTokenSpentByExchange(t *testing.T) {
	s := testStore(t)
	base := time.Unix(1000, 0).UTC()
	tok := mockToken()
	must(t, s.UpsertACLTokens(1, []*structs.ACLToken{tok}))
	ott := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: tok.AccessorID, ExpiresAt: base.Add(time.Minute)}
	must(t, s.UpsertOneTimeToken(2, ott))

	winner, loser := uuid.NewString(), uuid.NewString()
	must(t, s.At(base).ExchangeOneTimeToken(3, tok.AccessorID, ott.OneTimeSecretID, winner))
	if o, _ := s.OneTimeTokenBySecret(nil, ott.OneTimeSecretID); o != nil {
		t.Errorf("spent OTT found by OneTimeTokenBySecret: %+v", o)
	}
	o, _ := s.OneTimeTokenBySecretAny(nil, ott.OneTimeSecretID)
	if o == nil || o.ExchangeID != winner || !o.IsSpent() || o.ModifyIndex != 3 || o.CreateIndex != 2 {
		t.Fatalf("spent OTT = %+v, want spent by %s at 3", o, winner)
	}
	if ott.IsSpent() {
		t.Error("the exchange modified the caller's OTT in place")
	}
	if err := s.At(base).ExchangeOneTimeToken(4, tok.AccessorID, ott.OneTimeSecretID, loser); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("second exchange: err %v, want ErrPermissionDenied", err)
	}
	if err := s.At(base).ExchangeOneTimeToken(5, tok.AccessorID, ott.OneTimeSecretID, ""); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("exchange without an ID of a spent OTT: err %v, want ErrPermissionDenied", err)
	}
	must(t, s.At(base).ExchangeOneTimeToken(6, tok.AccessorID, ott.OneTimeSecretID, winner))
	if o, _ := s.OneTimeTokenBySecretAny(nil, ott.OneTimeSecretID); o == nil || o.ExchangeID != winner || o.ModifyIndex != 3 {
		t.Errorf("after the winner again: %+v, want unchanged", o)
	}

	must(t, s.At(base.Add(30*time.Second)).ExpireOneTimeTokens(7))
	if left, _ := s.OneTimeTokens(nil); len(left) != 1 {
		t.Fatalf("%d OTTs before the spent one expires, want 1", len(left))
	}
	must(t, s.At(base.Add(2*time.Minute)).ExpireOneTimeTokens(8))
	if left, _ := s.OneTimeTokens(nil); len(left) != 0 {
		t.Errorf("spent OTT survived its expiry: %+v", left)
	}
}

func TestStateStore_ACLSnapshot(t *testing.T) {
	s := testStore(t)
	tok := mockToken()
	exp := time.Unix(5000, 0).UTC()
	tok.ExpirationTime, tok.ExpirationTTL = &exp, time.Hour
	must(t, s.UpsertACLPolicies(1, []*structs.ACLPolicy{{Name: "p", Rules: `node { policy = "read" }`}}))
	must(t, s.BootstrapACLTokens(2, 0, tok))
	ott := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: tok.AccessorID, ExpiresAt: exp}
	must(t, s.UpsertOneTimeToken(3, ott))
	other := mockToken()
	must(t, s.UpsertACLTokens(4, []*structs.ACLToken{other}))
	spent := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: other.AccessorID, ExpiresAt: exp}
	must(t, s.UpsertOneTimeToken(5, spent))
	exchange := uuid.NewString()
	must(t, s.ExchangeOneTimeToken(6, other.AccessorID, spent.OneTimeSecretID, exchange))

	snap, err := s.Snapshot()
	must(t, err)
	var buf bytes.Buffer
	must(t, snap.Persist(&buf))
	r := testStore(t)
	must(t, r.Restore(&buf))
	if p, _ := r.ACLPolicyByName(nil, "p"); p == nil || p.Rules == "" {
		t.Errorf("policy after restore = %+v", p)
	}
	got, _ := r.ACLTokenBySecretID(nil, tok.SecretID)
	if got == nil || got.ExpirationTTL != time.Hour || !got.ExpirationTime.Equal(exp) {
		t.Errorf("token after restore = %+v", got)
	}
	if o, _ := r.OneTimeTokenBySecret(nil, ott.OneTimeSecretID); o == nil || !o.ExpiresAt.Equal(exp) {
		t.Errorf("OTT after restore = %+v", o)
	}
	if o, _ := r.OneTimeTokenBySecretAny(nil, spent.OneTimeSecretID); o == nil || o.ExchangeID != exchange || o.ModifyIndex != 6 {
		t.Errorf("spent OTT after restore = %+v, want spent by %s", o, exchange)
	}
	if o, _ := r.OneTimeTokenBySecret(nil, spent.OneTimeSecretID); o != nil {
		t.Errorf("spent OTT found by secret after restore: %+v", o)
	}
	if r.ACLBootstrapIndex() != 2 {
		t.Errorf("bootstrap index after restore %d, want 2", r.ACLBootstrapIndex())
	}
}

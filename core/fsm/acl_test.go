package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

func aclToken(policies ...string) *structs.ACLToken {
	typ := structs.ACLManagementToken
	if len(policies) > 0 {
		typ = structs.ACLClientToken
	}
	return &structs.ACLToken{AccessorID: uuid.NewString(), SecretID: uuid.NewString(), Type: typ, Policies: policies}
}

// Every ACL entry type applies, and a refused one (a second bootstrap, a
// spent one-time token) answers with an error of the right kind and
// writes nothing.
func TestFSM_ACLEntries(t *testing.T) {
	f, _ := testFSM(t)
	base := time.Unix(10_000, 0).UTC()
	boot := aclToken()
	client := aclToken("readonly")
	ott := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: client.AccessorID, ExpiresAt: base.Add(time.Minute)}

	steps := []struct {
		name    string
		typ     structs.MessageType
		msg     any
		wantErr error
		check   func(t *testing.T)
	}{
		{"bootstrap", structs.ACLTokenBootstrapRequestType, &structs.ACLTokenBootstrapRequest{Token: boot}, nil, func(t *testing.T) {
			if f.State().ACLBootstrapIndex() != 1 {
				t.Errorf("bootstrap index %d, want 1", f.State().ACLBootstrapIndex())
			}
		}},
		{"bootstrap twice", structs.ACLTokenBootstrapRequestType, &structs.ACLTokenBootstrapRequest{Token: aclToken()}, structs.ErrInvalid, func(t *testing.T) {
			if toks, _ := f.State().ACLTokens(nil, ""); len(toks) != 1 {
				t.Errorf("%d tokens after a refused bootstrap, want 1", len(toks))
			}
		}},
		{"policy upsert", structs.ACLPolicyUpsertRequestType, &structs.ACLPolicyUpsertRequest{Policies: []*structs.ACLPolicy{{Name: "readonly", Rules: `node { policy = "read" }`}, {Name: "gone"}}}, nil, nil},
		{"policy delete", structs.ACLPolicyDeleteRequestType, &structs.ACLPolicyDeleteRequest{Names: []string{"gone"}}, nil, func(t *testing.T) {
			if ps, _ := f.State().ACLPolicies(nil, ""); len(ps) != 1 || ps[0].Name != "readonly" {
				t.Errorf("policies %+v, want readonly alone", ps)
			}
		}},
		{"token upsert", structs.ACLTokenUpsertRequestType, &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{client}}, nil, nil},
		{"ott upsert", structs.OneTimeTokenUpsertRequestType, &structs.OneTimeTokenUpsertRequest{OneTimeToken: ott}, nil, nil},
		{"exchange after expiry", structs.OneTimeTokenDeleteRequestType, &structs.OneTimeTokenDeleteRequest{AccessorIDs: []string{client.AccessorID}, OneTimeSecretID: ott.OneTimeSecretID, Now: base.Add(time.Hour).UnixNano()}, structs.ErrPermissionDenied, func(t *testing.T) {
			if o, _ := f.State().OneTimeTokenBySecret(nil, ott.OneTimeSecretID); o == nil {
				t.Error("expired exchange deleted the OTT")
			}
		}},
		// An exchange entry without an exchange ID, as an older version
		// wrote it, still deletes the one-time token.
		{"exchange", structs.OneTimeTokenDeleteRequestType, &structs.OneTimeTokenDeleteRequest{AccessorIDs: []string{client.AccessorID}, OneTimeSecretID: ott.OneTimeSecretID, Now: base.UnixNano()}, nil, func(t *testing.T) {
			if o, _ := f.State().OneTimeTokenBySecretAny(nil, ott.OneTimeSecretID); o != nil {
				t.Errorf("old-format exchange left %+v, want it deleted", o)
			}
		}},
		{"exchange again", structs.OneTimeTokenDeleteRequestType, &structs.OneTimeTokenDeleteRequest{AccessorIDs: []string{client.AccessorID}, OneTimeSecretID: ott.OneTimeSecretID, Now: base.UnixNano()}, structs.ErrPermissionDenied, nil},
		{"ott upsert 2", structs.OneTimeTokenUpsertRequestType, &structs.OneTimeTokenUpsertRequest{OneTimeToken: &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: boot.AccessorID, ExpiresAt: base}}, nil, nil},
		{"expire", structs.OneTimeTokenExpireRequestType, &structs.OneTimeTokenExpireRequest{Now: base.Add(time.Second).UnixNano()}, nil, func(t *testing.T) {
			if o, _ := f.State().OneTimeTokens(nil); len(o) != 0 {
				t.Errorf("%d OTTs after expire, want 0", len(o))
			}
		}},
		{"ott upsert 3", structs.OneTimeTokenUpsertRequestType, &structs.OneTimeTokenUpsertRequest{OneTimeToken: &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: client.AccessorID, ExpiresAt: base}}, nil, nil},
		{"ott delete", structs.OneTimeTokenDeleteRequestType, &structs.OneTimeTokenDeleteRequest{AccessorIDs: []string{client.AccessorID}}, nil, func(t *testing.T) {
			if o, _ := f.State().OneTimeTokens(nil); len(o) != 0 {
				t.Errorf("%d OTTs after delete, want 0", len(o))
			}
		}},
		{"token delete", structs.ACLTokenDeleteRequestType, &structs.ACLTokenDeleteRequest{AccessorIDs: []string{client.AccessorID}}, nil, func(t *testing.T) {
			if tok, _ := f.State().ACLTokenByAccessorID(nil, client.AccessorID); tok != nil {
				t.Error("deleted token still stored")
			}
		}},
	}
	for i, st := range steps {
		resp := apply(t, f, uint64(i+1), st.typ, st.msg)
		switch {
		case st.wantErr == nil && resp != nil:
			t.Fatalf("%s: %v", st.name, resp)
		case st.wantErr != nil:
			err, _ := resp.(error)
			if structs.HTTPStatus(err) != structs.HTTPStatus(st.wantErr) || err == nil {
				t.Fatalf("%s: response %v, want an error of kind %v", st.name, resp, st.wantErr)
			}
		}
		if f.Failed() != nil {
			t.Fatalf("%s: FSM stopped: %v", st.name, f.Failed())
		}
		if st.check != nil {
			st.check(t)
		}
	}
}

// An exchange entry with an exchange ID marks the one-time token spent by
// that exchange: lookups do not find it, another exchange is refused, the
// same exchange applied again (a caller learning its outcome) succeeds,
// and expiry removes the token at its TTL.
func TestFSM_OneTimeTokenExchangeID(t *testing.T) {
	f, _ := testFSM(t)
	base := time.Unix(10_000, 0).UTC()
	client := aclToken()
	ott := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: client.AccessorID, ExpiresAt: base.Add(time.Minute)}
	mustApply(t, f, 1, structs.ACLTokenUpsertRequestType, &structs.ACLTokenUpsertRequest{Tokens: []*structs.ACLToken{client}})
	mustApply(t, f, 2, structs.OneTimeTokenUpsertRequestType, &structs.OneTimeTokenUpsertRequest{OneTimeToken: ott})
	exchange := func(id string) *structs.OneTimeTokenDeleteRequest {
		return &structs.OneTimeTokenDeleteRequest{AccessorIDs: []string{client.AccessorID}, OneTimeSecretID: ott.OneTimeSecretID, ExchangeID: id, Now: base.UnixNano()}
	}
	winner := uuid.NewString()
	mustApply(t, f, 3, structs.OneTimeTokenDeleteRequestType, exchange(winner))
	if o, _ := f.State().OneTimeTokenBySecret(nil, ott.OneTimeSecretID); o != nil {
		t.Errorf("spent OTT visible by secret: %+v", o)
	}
	if o, _ := f.State().OneTimeTokenBySecretAny(nil, ott.OneTimeSecretID); o == nil || o.ExchangeID != winner {
		t.Fatalf("OTT after exchange %+v, want spent by %s", o, winner)
	}
	resp := apply(t, f, 4, structs.OneTimeTokenDeleteRequestType, exchange(uuid.NewString()))
	if err, _ := resp.(error); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("another exchange: %v, want ErrPermissionDenied", resp)
	}
	mustApply(t, f, 5, structs.OneTimeTokenDeleteRequestType, exchange(winner))
	mustApply(t, f, 6, structs.OneTimeTokenExpireRequestType, &structs.OneTimeTokenExpireRequest{Now: base.Add(2 * time.Minute).UnixNano()})
	if o, _ := f.State().OneTimeTokens(nil); len(o) != 0 {
		t.Errorf("spent OTT survived expiry: %+v", o)
	}
	if f.Failed() != nil {
		t.Fatalf("FSM stopped: %v", f.Failed())
	}
}

func TestFSM_ACLSnapshotRoundTrip(t *testing.T) {
	f, _ := testFSM(t)
	boot := aclToken()
	mustApply(t, f, 1, structs.ACLTokenBootstrapRequestType, &structs.ACLTokenBootstrapRequest{Token: boot})
	mustApply(t, f, 2, structs.ACLPolicyUpsertRequestType, &structs.ACLPolicyUpsertRequest{Policies: []*structs.ACLPolicy{{Name: "p", Rules: `node { policy = "read" }`}}})
	ott := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: boot.AccessorID, ExpiresAt: time.Unix(99, 0).UTC()}
	mustApply(t, f, 3, structs.OneTimeTokenUpsertRequestType, &structs.OneTimeTokenUpsertRequest{OneTimeToken: ott})

	data := snapshotBytes(t, f)
	dst, _ := testFSM(t)
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	st := dst.State()
	if tok, _ := st.ACLTokenBySecretID(nil, boot.SecretID); tok == nil || tok.CreateIndex != 1 {
		t.Errorf("token after restore %+v", tok)
	}
	if p, _ := st.ACLPolicyByName(nil, "p"); p == nil || p.ModifyIndex != 2 {
		t.Errorf("policy after restore %+v", p)
	}
	if o, _ := st.OneTimeTokenBySecret(nil, ott.OneTimeSecretID); o == nil || o.AccessorID != boot.AccessorID {
		t.Errorf("OTT after restore %+v", o)
	}
	// The bootstrap index survives, so a restored server still refuses a
	// second bootstrap.
	resp := apply(t, dst, 4, structs.ACLTokenBootstrapRequestType, &structs.ACLTokenBootstrapRequest{Token: aclToken()})
	if err, _ := resp.(error); err == nil || !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("bootstrap after restore: %v, want refused", resp)
	}
}

func TestFSM_ACLRolesAndSnapshot(t *testing.T) {
	f, _ := testFSM(t)
	role := &structs.ACLRole{ID: uuid.NewString(), Name: "ops", Policies: []*structs.ACLRolePolicyLink{{Name: "p"}, {Name: "absent"}}}
	gone := &structs.ACLRole{ID: uuid.NewString(), Name: "gone", Policies: []*structs.ACLRolePolicyLink{{Name: "p"}}}
	mustApply(t, f, 1, structs.ACLRoleUpsertRequestType, &structs.ACLRoleUpsertRequest{Roles: []*structs.ACLRole{role, gone}})
	mustApply(t, f, 2, structs.ACLRoleDeleteRequestType, &structs.ACLRoleDeleteRequest{IDs: []string{gone.ID}})
	// A bad entry is refused by the state store, and the FSM keeps going.
	resp := apply(t, f, 3, structs.ACLRoleUpsertRequestType, &structs.ACLRoleUpsertRequest{Roles: []*structs.ACLRole{{ID: uuid.NewString(), Name: "bad name"}}})
	if err, _ := resp.(error); structs.KindName(err) != "invalid" {
		t.Errorf("bad role: %v, want ErrInvalid", resp)
	}
	if f.Failed() != nil {
		t.Fatalf("FSM stopped: %v", f.Failed())
	}

	data := snapshotBytes(t, f)
	dst, _ := testFSM(t)
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	st := dst.State()
	r, _ := st.ACLRoleByName(nil, "ops")
	if r == nil || r.ID != role.ID || r.CreateIndex != 1 || len(r.Policies) != 2 || r.Policies[1].Name != "absent" {
		t.Errorf("role after restore %+v", r)
	}
	if r, _ := st.ACLRoleByID(nil, gone.ID); r != nil {
		t.Errorf("deleted role restored: %+v", r)
	}
	if st.Index(state.TableACLRoles) != 2 {
		t.Errorf("roles index after restore %d, want 2", st.Index(state.TableACLRoles))
	}
}

package aclendpoint

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// Table tests of the rules in decide.go, without a state store.

func TestCallerRules(t *testing.T) {
	mgmt, client := acl.ManagementACL, acl.Compile(nil)
	holder := &structs.ACLToken{AccessorID: "a-1", Policies: []string{"ro"}}
	tests := []struct {
		name                           string
		tok                            *structs.ACLToken
		c                              *acl.ACL
		readsRO, readsOther, readsSelf bool
		readsAnotherToken, management  bool
	}{
		{name: "management", tok: &structs.ACLToken{AccessorID: "m"}, c: mgmt,
			readsRO: true, readsOther: true, readsSelf: true, readsAnotherToken: true, management: true},
		{name: "client holding ro", tok: holder, c: client, readsRO: true, readsSelf: true},
		{name: "anonymous (no token)", tok: nil, c: client},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mayReadPolicy(tt.tok, tt.c, "ro"); got != tt.readsRO {
				t.Errorf("reads policy ro = %v, want %v", got, tt.readsRO)
			}
			if got := mayReadPolicy(tt.tok, tt.c, "other"); got != tt.readsOther {
				t.Errorf("reads policy other = %v, want %v", got, tt.readsOther)
			}
			if got := mayReadToken(tt.tok, tt.c, "a-1"); got != tt.readsSelf {
				t.Errorf("reads token a-1 = %v, want %v", got, tt.readsSelf)
			}
			if got := mayReadToken(tt.tok, tt.c, "a-2"); got != tt.readsAnotherToken {
				t.Errorf("reads token a-2 = %v, want %v", got, tt.readsAnotherToken)
			}
			err := requireManagement(tt.c, "doing it")
			if tt.management != (err == nil) {
				t.Fatalf("requireManagement = %v, want allowed %v", err, tt.management)
			}
			if err != nil && (!errors.Is(err, structs.ErrPermissionDenied) || !strings.Contains(err.Error(), "doing it needs a management token")) {
				t.Errorf("refusal %v: want permission denied naming the operation", err)
			}
		})
	}
}

func TestBootstrapRules(t *testing.T) {
	const secret = "0b6b4a05-6c1c-4d2a-9d36-2f0f8d7c6a11"
	secrets := []struct {
		in, want string
		invalid  bool
	}{
		{in: "", want: ""},
		{in: "  ", want: ""},
		{in: " " + secret + "\n", want: secret},
		{in: "not-a-uuid", invalid: true},
	}
	for _, tt := range secrets {
		got, err := bootstrapSecret(tt.in)
		if tt.invalid {
			// Nomad's TestACLTokens_BootstrapInvalidToken: its exact words.
			if !errors.Is(err, structs.ErrInvalid) || err.Error() != "invalid acl token" {
				t.Errorf("bootstrapSecret(%q) = %q, %v; want invalid acl token", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("bootstrapSecret(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}

	for _, tt := range []struct {
		done, reset uint64
		allowed     bool
	}{
		{done: 0, reset: 0, allowed: true},
		{done: 0, reset: 7, allowed: true},
		{done: 7, reset: 7, allowed: true},
		{done: 7, reset: 0},
		{done: 7, reset: 6},
	} {
		err := checkBootstrap(tt.done, tt.reset)
		if tt.allowed != (err == nil) {
			t.Errorf("checkBootstrap(done %d, reset %d) = %v, want allowed %v", tt.done, tt.reset, err, tt.allowed)
		}
		if err != nil && (!errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("(reset index: %d)", tt.done))) {
			t.Errorf("refusal %v: want invalid naming the reset index", err)
		}
	}

	for _, tt := range []struct {
		raw  string
		want uint64
		bad  bool
	}{
		{raw: "12\n", want: 12},
		{raw: " 3 ", want: 3},
		{raw: "", bad: true},
		{raw: "twelve", bad: true},
		{raw: "-1", bad: true},
	} {
		got, err := parseResetIndex([]byte(tt.raw))
		if tt.bad != (err != nil) || got != tt.want {
			t.Errorf("parseResetIndex(%q) = %d, %v; want %d (error %v)", tt.raw, got, err, tt.want, tt.bad)
		}
		if err != nil && !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("parseResetIndex(%q): %v, want invalid", tt.raw, err)
		}
	}
}

func TestOneTimeTokenRules(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	live := &structs.OneTimeToken{ExpiresAt: now.Add(time.Second)}
	atNow := &structs.OneTimeToken{ExpiresAt: now}
	expired := &structs.OneTimeToken{ExpiresAt: now.Add(-time.Second)}
	for _, tt := range []struct {
		name    string
		ott     *structs.OneTimeToken
		allowed bool
	}{
		{name: "live", ott: live, allowed: true},
		{name: "expiring this instant", ott: atNow, allowed: true},
		{name: "expired", ott: expired},
		{name: "unknown or spent", ott: nil},
	} {
		err := checkExchange(tt.ott, now)
		if tt.allowed != (err == nil) {
			t.Errorf("%s: checkExchange = %v, want allowed %v", tt.name, err, tt.allowed)
		}
		if err != nil && (!errors.Is(err, structs.ErrPermissionDenied) || err.Error() != errExchangeDenied().Error()) {
			t.Errorf("%s: refusal %v; want the one permission-denied answer", tt.name, err)
		}
	}

	for _, tt := range []struct {
		name string
		otts []*structs.OneTimeToken
		want bool
	}{
		{name: "none"},
		{name: "live only", otts: []*structs.OneTimeToken{live, atNow}},
		{name: "one expired", otts: []*structs.OneTimeToken{live, expired}, want: true},
	} {
		if got := anyExpired(tt.otts, now); got != tt.want {
			t.Errorf("%s: anyExpired = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRequestCount(t *testing.T) {
	for _, tt := range []struct {
		n  int
		ok bool
	}{{0, false}, {1, true}, {MaxObjectsPerRequest, true}, {MaxObjectsPerRequest + 1, false}} {
		err := checkRequestCount("Things", tt.n)
		if tt.ok != (err == nil) {
			t.Errorf("%d: %v, want ok %v", tt.n, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, structs.ErrInvalid) || !strings.HasPrefix(err.Error(), "Things: ")) {
			t.Errorf("%d: %v, want invalid naming the field", tt.n, err)
		}
	}
}

func TestPreparePolicies(t *testing.T) {
	ro := &structs.ACLPolicy{Name: "ro", Description: "read", Rules: `namespace "default" { policy = "read" }`,
		CreateIndex: 5, ModifyIndex: 9}
	tests := []struct {
		name    string
		in      []*structs.ACLPolicy
		wantErr string
	}{
		{name: "one", in: []*structs.ACLPolicy{ro}},
		{name: "none", in: nil, wantErr: "Policies: at least one is required"},
		{name: "bad name", in: []*structs.ACLPolicy{{Name: "bad name"}}, wantErr: "name"},
		{name: "bad rules", in: []*structs.ACLPolicy{{Name: "p", Rules: `namespace "default" { policy = "nope" }`}}, wantErr: `policy "p": rules:`},
		{name: "named twice", in: []*structs.ACLPolicy{ro, ro}, wantErr: `policy "ro": named twice in one request`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := preparePolicies(tt.in)
			if tt.wantErr != "" {
				if !isInvalid(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want invalid with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0] == ro {
				t.Fatalf("out = %+v; want one copy", out)
			}
			c := out[0]
			if c.Name != ro.Name || c.Description != ro.Description || c.Rules != ro.Rules || c.CreateIndex != 0 || c.ModifyIndex != 0 || len(c.Hash) == 0 {
				t.Errorf("copy %+v: want name, description and rules, a hash, and no indexes", c)
			}
		})
	}
}

// fakeReader is a tokenReader over maps.
type fakeReader struct {
	tokens   map[string]*structs.ACLToken
	policies map[string]bool
	roles    []*structs.ACLRole
}

func (f fakeReader) ACLRoleByID(_ memdb.WatchSet, id string) (*structs.ACLRole, error) {
	for _, r := range f.roles {
		if r.ID == id {
			return r, nil
		}
	}
	return nil, nil
}

func (f fakeReader) ACLRoleByName(_ memdb.WatchSet, name string) (*structs.ACLRole, error) {
	for _, r := range f.roles {
		if r.Name == name {
			return r, nil
		}
	}
	return nil, nil
}

func (f fakeReader) ACLTokenByAccessorID(_ memdb.WatchSet, id string) (*structs.ACLToken, error) {
	return f.tokens[id], nil
}

func (f fakeReader) ACLPolicyByName(_ memdb.WatchSet, name string) (*structs.ACLPolicy, error) {
	if !f.policies[name] {
		return nil, nil
	}
	return &structs.ACLPolicy{Name: name}, nil
}

func TestPrepareTokens(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const (
		newAccessor = "11111111-1111-4111-8111-111111111111"
		newSecret   = "22222222-2222-4222-8222-222222222222"
		oldAccessor = "33333333-3333-4333-8333-333333333333"
		oldSecret   = "44444444-4444-4444-8444-444444444444"
	)
	created := now.Add(-time.Hour)
	expires := now.Add(time.Hour)
	existing := &structs.ACLToken{AccessorID: oldAccessor, SecretID: oldSecret, Name: "old", Type: structs.ACLClientToken,
		Policies: []string{"ro"}, CreateTime: created, ExpirationTime: &expires, ExpirationTTL: 2 * time.Hour}
	const roleID = "55555555-5555-4555-8555-555555555555"
	st := fakeReader{tokens: map[string]*structs.ACLToken{oldAccessor: existing}, policies: map[string]bool{"ro": true, "rw": true},
		roles: []*structs.ACLRole{{ID: roleID, Name: "ops", Policies: []*structs.ACLRolePolicyLink{{Name: "rw"}}}}}
	ids := func() (string, string) { return newAccessor, newSecret }

	tests := []struct {
		name    string
		in      []*structs.ACLToken
		kind    error
		wantErr string
		check   func(t *testing.T, got *structs.ACLToken)
	}{
		{name: "create", in: []*structs.ACLToken{{Name: "c", Type: structs.ACLClientToken, Policies: []string{"ro"}, ExpirationTTL: time.Hour}},
			check: func(t *testing.T, got *structs.ACLToken) {
				if got.AccessorID != newAccessor || got.SecretID != newSecret || !got.CreateTime.Equal(now) {
					t.Errorf("created %+v: want the new IDs and CreateTime now", got)
				}
				if got.ExpirationTime == nil || !got.ExpirationTime.Equal(now.Add(time.Hour)) {
					t.Errorf("ExpirationTime %v: want now + TTL", got.ExpirationTime)
				}
				if len(got.Hash) == 0 {
					t.Error("no hash")
				}
			}},
		{name: "update keeps secret, create time and expiration", in: []*structs.ACLToken{{AccessorID: oldAccessor, Name: "renamed",
			Type: structs.ACLClientToken, Policies: []string{"rw"}}},
			check: func(t *testing.T, got *structs.ACLToken) {
				if got.SecretID != oldSecret || !got.CreateTime.Equal(created) || got.ExpirationTTL != existing.ExpirationTTL ||
					got.ExpirationTime == nil || !got.ExpirationTime.Equal(expires) {
					t.Errorf("updated %+v: want the stored secret, create time and expiration", got)
				}
				if got.Name != "renamed" || len(got.Policies) != 1 || got.Policies[0] != "rw" {
					t.Errorf("updated %+v: want the new name and policies", got)
				}
			}},
		{name: "none", in: nil, kind: structs.ErrInvalid, wantErr: "Tokens: at least one is required"},
		{name: "nil token", in: []*structs.ACLToken{nil}, kind: structs.ErrInvalid, wantErr: "token: missing"},
		{name: "accessor not a UUID", in: []*structs.ACLToken{{AccessorID: "x", Type: structs.ACLManagementToken}},
			kind: structs.ErrInvalid, wantErr: "must be a UUID"},
		{name: "unknown accessor", in: []*structs.ACLToken{{AccessorID: newAccessor, Type: structs.ACLManagementToken}},
			kind: structs.ErrNotFound, wantErr: "ACL token not found"},
		{name: "secret changed", in: []*structs.ACLToken{{AccessorID: oldAccessor, SecretID: newSecret, Type: structs.ACLClientToken, Policies: []string{"ro"}}},
			kind: structs.ErrInvalid, wantErr: "SecretID: cannot be changed"},
		{name: "TTL changed", in: []*structs.ACLToken{{AccessorID: oldAccessor, Type: structs.ACLClientToken, Policies: []string{"ro"}, ExpirationTTL: time.Hour}},
			kind: structs.ErrInvalid, wantErr: "cannot be changed on an existing token"},
		{name: "TTL changed with the same expiration", in: []*structs.ACLToken{{AccessorID: oldAccessor, Type: structs.ACLClientToken,
			Policies: []string{"ro"}, ExpirationTime: &expires, ExpirationTTL: time.Hour}},
			kind: structs.ErrInvalid, wantErr: "token expiration TTL: cannot be changed on an existing token"},
		{name: "unknown policy accepted", in: []*structs.ACLToken{{Type: structs.ACLClientToken, Policies: []string{"ro", "nope"}}},
			check: func(t *testing.T, got *structs.ACLToken) {
				if len(got.Policies) != 2 || got.Policies[0] != "ro" || got.Policies[1] != "nope" {
					t.Errorf("got %+v: want the token with both policies, the absent one kept", got.Policies)
				}
			}},
		{name: "roles by name and ID, kept once", in: []*structs.ACLToken{{Type: structs.ACLClientToken,
			Roles: []*structs.ACLTokenRoleLink{{Name: "ops"}, {ID: roleID}}}},
			check: func(t *testing.T, got *structs.ACLToken) {
				if len(got.Roles) != 1 || got.Roles[0].ID != roleID || got.Roles[0].Name != "ops" || len(got.Policies) != 0 {
					t.Errorf("roles %+v: want the one role, by ID and name", got.Roles)
				}
			}},
		{name: "unknown role", in: []*structs.ACLToken{{Type: structs.ACLClientToken, Roles: []*structs.ACLTokenRoleLink{{Name: "nope"}}}},
			kind: structs.ErrInvalid, wantErr: `token roles[0] nope: no such ACL role`},
		{name: "role ID not a UUID", in: []*structs.ACLToken{{Type: structs.ACLClientToken, Roles: []*structs.ACLTokenRoleLink{{ID: "x"}}}},
			kind: structs.ErrInvalid, wantErr: `token roles[0] ID "x": must be a UUID`},
		{name: "management with roles", in: []*structs.ACLToken{{Type: structs.ACLManagementToken, Roles: []*structs.ACLTokenRoleLink{{Name: "ops"}}}},
			kind: structs.ErrInvalid, wantErr: "a management token must name no roles"},
		{name: "client without policies", in: []*structs.ACLToken{{Type: structs.ACLClientToken}},
			kind: structs.ErrInvalid, wantErr: "at least one policy"},
		{name: "named twice", in: []*structs.ACLToken{{AccessorID: oldAccessor, Type: structs.ACLClientToken, Policies: []string{"ro"}},
			{AccessorID: oldAccessor, Type: structs.ACLClientToken, Policies: []string{"ro"}}},
			kind: structs.ErrInvalid, wantErr: "named twice in one request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := prepareTokens(st, tt.in, now, ids)
			if tt.kind != nil {
				if !isKind(err, tt.kind) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %v with %q", err, tt.kind, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0] == tt.in[0] {
				t.Fatalf("out = %+v; want one copy", out)
			}
			tt.check(t, out[0])
		})
	}
}

// isInvalid: a refusal the API answers with 400, an error of kind
// structs.ErrInvalid or a *structs.ValidationError.
func isInvalid(err error) bool { return structs.HTTPStatus(err) == 400 }

func isKind(err, kind error) bool {
	if kind == structs.ErrInvalid {
		return isInvalid(err)
	}
	return errors.Is(err, kind)
}

func TestBounded(t *testing.T) {
	long := strings.Repeat("x", 100)
	if got := bounded(long); got != strings.Repeat("x", 64)+"…" {
		t.Errorf("bounded(100 x) = %q", got)
	}
	if got := bounded("short"); got != "short" {
		t.Errorf("bounded(short) = %q", got)
	}
}

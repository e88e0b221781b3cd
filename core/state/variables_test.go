package state

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func sealedVar(ns, path, data string) *structs.VariableEncrypted {
	return &structs.VariableEncrypted{Namespace: ns, Path: path, KeyID: "k1", Data: []byte(data)}
}

func u64(v uint64) *uint64 { return &v }

func TestStateStore_VariablesCASAndLocks(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	s := testStore(t)
	at := func(d time.Duration) *StateStore { return s.At(base.Add(d)) }

	v, err := at(0).ApplyVariable(10, &structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "a/b", "x1"), CAS: u64(0)})
	if err != nil || v.CreateIndex != 10 || v.ModifyIndex != 10 || v.CreateTime != base.UnixNano() {
		t.Fatalf("create: %+v, %v", v, err)
	}
	steps := []struct {
		name  string
		index uint64
		after time.Duration
		req   structs.VariableApplyRequest
		kind  string // "" for success
	}{
		{"create again with cas 0", 11, 0, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "a/b", "x"), CAS: u64(0)}, "conflict"},
		{"stale cas", 11, 0, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "a/b", "x"), CAS: u64(9)}, "conflict"},
		{"cas on a missing var", 11, 0, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "zz", "x"), CAS: u64(3)}, "conflict"},
		{"matching cas", 11, 0, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "a/b", "x2"), CAS: u64(10)}, ""},
		{"bad path", 12, 0, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "a b", "x")}, "invalid"},
		{"reserved path", 12, 0, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "nomad/other", "x")}, "invalid"},
		{"no items", 12, 0, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: &structs.VariableEncrypted{Namespace: "default", Path: "q"}}, "invalid"},
		{"unknown op", 12, 0, structs.VariableApplyRequest{Op: "nope", Var: sealedVar("default", "q", "x")}, "invalid"},
		{"acquire", 12, 0, structs.VariableApplyRequest{Op: structs.VarOpLockAcquire, Var: &structs.VariableEncrypted{Namespace: "default", Path: "a/b", LockID: "L1", LockTTL: 15 * time.Second, LockDelay: 20 * time.Second}}, ""},
		{"acquire while held", 13, time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockAcquire, Var: &structs.VariableEncrypted{Namespace: "default", Path: "a/b", LockID: "L2", LockTTL: 15 * time.Second}}, "conflict"},
		{"write without the lock", 13, time.Second, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "a/b", "x3")}, "conflict"},
		{"delete without the lock", 13, time.Second, structs.VariableApplyRequest{Op: structs.VarOpDelete, Var: sealedVar("default", "a/b", "")}, "conflict"},
		{"write with the lock", 13, time.Second, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "a/b", "x3"), LockID: "L1"}, ""},
		{"renew by another", 14, 10 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockRenew, Var: sealedVar("default", "a/b", ""), LockID: "L2"}, "conflict"},
		{"renew", 14, 10 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockRenew, Var: sealedVar("default", "a/b", ""), LockID: "L1"}, ""},
		// The renewal at 10s holds it until 25s; lapsed, the delay (20s) blocks until 45s.
		{"held after the first TTL", 15, 20 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar("default", "a/b", "x"), LockID: "L2"}, "conflict"},
		{"renew a lapsed lock", 15, 30 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockRenew, Var: sealedVar("default", "a/b", ""), LockID: "L1"}, "conflict"},
		{"acquire within the delay", 15, 40 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockAcquire, Var: &structs.VariableEncrypted{Namespace: "default", Path: "a/b", LockID: "L2", LockTTL: 15 * time.Second}}, "conflict"},
		{"acquire after the delay", 15, 46 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockAcquire, Var: &structs.VariableEncrypted{Namespace: "default", Path: "a/b", LockID: "L2", LockTTL: 15 * time.Second}}, ""},
		{"release by the old holder", 16, 47 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockRelease, Var: sealedVar("default", "a/b", ""), LockID: "L1"}, "conflict"},
		{"release", 16, 47 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockRelease, Var: sealedVar("default", "a/b", ""), LockID: "L2"}, ""},
		{"acquire right after a release", 17, 48 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockAcquire, Var: &structs.VariableEncrypted{Namespace: "default", Path: "a/b", LockID: "L3", LockTTL: 15 * time.Second}}, ""},
		{"release L3", 18, 49 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockRelease, Var: sealedVar("default", "a/b", ""), LockID: "L3"}, ""},
		{"acquire a missing var without items", 19, 50 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpLockAcquire, Var: &structs.VariableEncrypted{Namespace: "default", Path: "new", LockID: "L4", LockTTL: 15 * time.Second}}, "invalid"},
		{"delete with a stale cas", 19, 50 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpDelete, Var: sealedVar("default", "a/b", ""), CAS: u64(3)}, "conflict"},
		{"delete", 19, 50 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpDelete, Var: sealedVar("default", "a/b", "")}, ""},
		{"delete a missing var", 20, 50 * time.Second, structs.VariableApplyRequest{Op: structs.VarOpDelete, Var: sealedVar("default", "a/b", "")}, ""},
	}
	for _, st := range steps {
		before := s.Index(TableVariables)
		_, err := at(st.after).ApplyVariable(st.index, &st.req)
		if got := structs.KindName(err); got != st.kind {
			t.Fatalf("%s: %v (kind %q), want kind %q", st.name, err, got, st.kind)
		}
		if err != nil && s.Index(TableVariables) != before {
			t.Fatalf("%s: a refused write moved the table index", st.name)
		}
	}
	if v, _ := s.VariableByPath(nil, "default", "a/b"); v != nil {
		t.Fatalf("deleted variable still there: %+v", v)
	}
}

func TestStateStore_VariablesListAndRekey(t *testing.T) {
	s := testStore(t).At(time.Unix(1_700_000_000, 0))
	for i, p := range []struct{ ns, path string }{{"default", "app/a"}, {"default", "app/b"}, {"default", "db"}, {"prod", "app/a"}} {
		must(t, func() error {
			_, err := s.ApplyVariable(uint64(10+i), &structs.VariableApplyRequest{Op: structs.VarOpSet, Var: sealedVar(p.ns, p.path, "x")})
			return err
		}())
	}
	cases := []struct {
		ns, prefix string
		want       int
	}{{"default", "", 3}, {"default", "app/", 2}, {"prod", "", 1}, {AllNamespaces, "app", 3}, {"none", "", 0}}
	for _, c := range cases {
		if vs, _ := s.Variables(nil, c.ns, c.prefix); len(vs) != c.want {
			t.Errorf("Variables(%q, %q) = %d, want %d", c.ns, c.prefix, len(vs), c.want)
		}
	}
	// Rekey: a variable changed since it was read is skipped.
	a, _ := s.VariableByPath(nil, "default", "app/a")
	b, _ := s.VariableByPath(nil, "default", "app/b")
	ra, rb := a.Copy(), b.Copy()
	ra.KeyID, ra.Data, rb.KeyID, rb.Data = "k2", []byte("y"), "k2", []byte("y")
	rb.ModifyIndex = 1
	must(t, s.RekeyVariables(20, []*structs.VariableEncrypted{ra, rb}))
	if got, _ := s.VariableByPath(nil, "default", "app/a"); got.KeyID != "k2" || got.ModifyIndex != a.ModifyIndex {
		t.Errorf("rekeyed var %+v", got)
	}
	if got, _ := s.VariableByPath(nil, "default", "app/b"); got.KeyID != "k1" {
		t.Errorf("stale rekey applied: %+v", got)
	}
	if vs, _ := s.VariablesByKeyID(nil, "k1"); len(vs) != 3 {
		t.Errorf("%d vars under k1, want 3", len(vs))
	}
}

func TestStateStore_RootKeys(t *testing.T) {
	s := testStore(t)
	k := func(id string) *structs.RootKey {
		return &structs.RootKey{Meta: &structs.RootKeyMeta{KeyID: id}, WrapProvider: "aead", WrappedKey: []byte{1}}
	}
	must(t, s.UpsertRootKey(5, k("a"), true))
	must(t, s.UpsertRootKey(6, k("b"), true))
	if act, _ := s.ActiveRootKey(nil); act == nil || act.Meta.KeyID != "b" {
		t.Fatalf("active key %+v, want b", act)
	}
	if a, _ := s.RootKeyByID(nil, "a"); a.Meta.State != structs.RootKeyStateInactive || a.Meta.CreateIndex != 5 {
		t.Errorf("old key %+v, want inactive, created at 5", a.Meta)
	}
	must(t, s.SetRootKeysState(7, []string{"a"}, structs.RootKeyStateRekeying))
	if a, _ := s.RootKeyByID(nil, "a"); a.Meta.State != structs.RootKeyStateRekeying {
		t.Errorf("key a %+v, want rekeying", a.Meta)
	}
	if err := s.SetRootKeysState(8, []string{"zz"}, structs.RootKeyStateInactive); structs.KindName(err) != "not_found" {
		t.Errorf("unknown key: %v", err)
	}
	if err := s.SetRootKeysState(8, []string{"a"}, structs.RootKeyStateActive); structs.KindName(err) != "invalid" {
		t.Errorf("set active: %v", err)
	}
	if err := s.UpsertRootKey(8, &structs.RootKey{Meta: &structs.RootKeyMeta{KeyID: "c"}}, false); structs.KindName(err) != "invalid" {
		t.Errorf("key without material: %v", err)
	}
	if ks, _ := s.RootKeys(nil); len(ks) != 2 || ks[0].Meta.KeyID != "b" {
		t.Errorf("keys %d, first %s", len(ks), ks[0].Meta.KeyID)
	}
}

package httpapi

import (
	"errors"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
)

// The official client writes, reads, lists and deletes variables, with
// check-and-set and its 409 carrying the current variable.
func TestVariablesWithNomadClient(t *testing.T) {
	c := aclTestServer(t, false)
	vars := c.Variables()

	v, _, err := vars.Create(&nomadapi.Variable{Path: "app/db", Items: nomadapi.VariableItems{"user": "u", "pass": "p1"}}, nil)
	if err != nil || v.Namespace != "default" || v.Path != "app/db" || v.CreateIndex == 0 || v.ModifyIndex != v.CreateIndex || v.CreateTime == 0 || v.Items["pass"] != "p1" {
		t.Fatalf("create: %+v, %v", v, err)
	}
	got, qm, err := vars.Read("app/db", nil)
	if err != nil || got.Items["user"] != "u" || got.ModifyIndex != v.ModifyIndex || qm.LastIndex != v.ModifyIndex {
		t.Fatalf("read: %+v, %+v, %v", got, qm, err)
	}
	if _, _, err := vars.Read("app/none", nil); !errors.Is(err, nomadapi.ErrVariablePathNotFound) {
		t.Errorf("read of a missing var: %v", err)
	}

	// CheckedCreate on an existing path and CheckedUpdate at a stale index
	// conflict, and the conflict holds the current variable.
	_, _, err = vars.CheckedCreate(&nomadapi.Variable{Path: "app/db", Items: nomadapi.VariableItems{"x": "y"}}, nil)
	var cas nomadapi.ErrCASConflict
	if !errors.As(err, &cas) || cas.Conflict.ModifyIndex != v.ModifyIndex || cas.Conflict.Items["pass"] != "p1" {
		t.Fatalf("checked create over an existing var: %v", err)
	}
	stale := v.Copy()
	stale.ModifyIndex = v.ModifyIndex - 1
	stale.Items["pass"] = "p2"
	if _, _, err := vars.CheckedUpdate(stale, nil); !errors.As(err, &cas) || cas.Conflict.Items["pass"] != "p1" {
		t.Fatalf("stale checked update: %v", err)
	}
	upd := v.Copy()
	upd.Items["pass"] = "p2"
	v2, _, err := vars.CheckedUpdate(upd, nil)
	if err != nil || v2.ModifyIndex <= v.ModifyIndex || v2.CreateIndex != v.CreateIndex || v2.Items["pass"] != "p2" {
		t.Fatalf("checked update: %+v, %v", v2, err)
	}

	// Lists: prefix, every namespace, pages.
	if _, err := c.Namespaces().Register(&nomadapi.Namespace{Name: "prod"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"app/web", "other"} {
		if _, _, err := vars.Create(&nomadapi.Variable{Path: p, Items: nomadapi.VariableItems{"k": "v"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := vars.Create(&nomadapi.Variable{Path: "app/db", Namespace: "prod", Items: nomadapi.VariableItems{"k": "v"}}, &nomadapi.WriteOptions{Namespace: "prod"}); err != nil {
		t.Fatal(err)
	}
	lists := []struct {
		name string
		q    *nomadapi.QueryOptions
		want []string
	}{
		{"default", nil, []string{"default/app/db", "default/app/web", "default/other"}},
		{"prefix", &nomadapi.QueryOptions{Prefix: "app/"}, []string{"default/app/db", "default/app/web"}},
		{"all namespaces", &nomadapi.QueryOptions{Namespace: "*", Prefix: "app/db"}, []string{"default/app/db", "prod/app/db"}},
		{"prod", &nomadapi.QueryOptions{Namespace: "prod"}, []string{"prod/app/db"}},
		{"page 1", &nomadapi.QueryOptions{PerPage: 2}, []string{"default/app/db", "default/app/web"}},
		{"page 2", &nomadapi.QueryOptions{PerPage: 2, NextToken: "default.other"}, []string{"default/other"}},
	}
	for _, l := range lists {
		list, qm, err := vars.List(l.q)
		if err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
		var names []string
		for _, m := range list {
			names = append(names, m.Namespace+"/"+m.Path)
		}
		if strings.Join(names, ",") != strings.Join(l.want, ",") {
			t.Errorf("%s: %v, want %v", l.name, names, l.want)
		}
		if l.name == "page 1" && qm.NextToken != "default.other" {
			t.Errorf("page 1 next token %q", qm.NextToken)
		}
	}

	// Delete: a stale CAS conflicts, then the delete goes through.
	if _, err := vars.CheckedDelete("app/db", v.ModifyIndex, nil); !errors.As(err, &cas) || cas.Conflict.ModifyIndex != v2.ModifyIndex {
		t.Fatalf("stale checked delete: %v", err)
	}
	if _, err := vars.CheckedDelete("app/db", v2.ModifyIndex, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := vars.Read("app/db", nil); !errors.Is(err, nomadapi.ErrVariablePathNotFound) {
		t.Errorf("read after delete: %v", err)
	}
	if _, err := vars.Delete("app/db", nil); err != nil {
		t.Errorf("delete of a missing var: %v", err)
	}
}

// Bad input is refused before Raft with a 400 (413 for size) naming the
// field, and nothing is written.
func TestVariablesBadInput(t *testing.T) {
	c := aclTestServer(t, false)
	big := strings.Repeat("x", 70<<10)
	cases := []struct {
		name string
		v    *nomadapi.Variable
		want string
	}{
		{"bad charset", &nomadapi.Variable{Path: "a b", Items: nomadapi.VariableItems{"k": "v"}}, "400"},
		{"too long", &nomadapi.Variable{Path: strings.Repeat("a", 129), Items: nomadapi.VariableItems{"k": "v"}}, "400"},
		{"reserved", &nomadapi.Variable{Path: "nomad/other", Items: nomadapi.VariableItems{"k": "v"}}, "400"},
		{"empty segment", &nomadapi.Variable{Path: "a//b", Items: nomadapi.VariableItems{"k": "v"}}, "400"},
		{"no items", &nomadapi.Variable{Path: "a"}, "Items"},
		{"empty key", &nomadapi.Variable{Path: "a", Items: nomadapi.VariableItems{"": "v"}}, "Items"},
		{"too large", &nomadapi.Variable{Path: "a", Items: nomadapi.VariableItems{"k": big}}, "413"},
		{"unknown namespace", &nomadapi.Variable{Path: "a", Namespace: "nope", Items: nomadapi.VariableItems{"k": "v"}}, "Namespace"},
	}
	for _, tc := range cases {
		if _, _, err := c.Variables().Create(tc.v, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if list, _, err := c.Variables().List(&nomadapi.QueryOptions{Namespace: "*"}); err != nil || len(list) != 0 {
		t.Errorf("refused writes stored %d vars (%v)", len(list), err)
	}
	if _, _, err := c.Variables().Create(&nomadapi.Variable{Path: "nomad/jobs/web", Items: nomadapi.VariableItems{"k": "v"}}, nil); err != nil {
		t.Errorf("nomad/jobs/...: %v", err)
	}
}

// Locks as Nomad 1.7's api uses them: acquire answers the lock ID, a
// second acquire conflicts, a write needs the ID, renew and release.
func TestVariablesLocksWithNomadClient(t *testing.T) {
	c := aclTestServer(t, false)
	vars := c.Variables()
	held, _, err := vars.AcquireLock(&nomadapi.Variable{Path: "lock/a", Items: nomadapi.VariableItems{"k": "v"},
		Lock: &nomadapi.VariableLock{TTL: "15s", LockDelay: "10s"}}, nil)
	if err != nil || held.Lock == nil || held.Lock.ID == "" || held.Lock.TTL != "15s" || held.Lock.LockDelay != "10s" || held.Items["k"] != "v" {
		t.Fatalf("acquire: %+v, %v", held, err)
	}
	if _, _, err := vars.AcquireLock(&nomadapi.Variable{Path: "lock/a", Lock: &nomadapi.VariableLock{TTL: "15s"}}, nil); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("second acquire: %v, want 409", err)
	}
	if _, _, err := vars.Update(&nomadapi.Variable{Path: "lock/a", Items: nomadapi.VariableItems{"k": "w"}}, nil); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("write without the lock: %v, want 409", err)
	}
	if _, err := vars.Delete("lock/a", nil); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("delete without the lock: %v, want 409", err)
	}
	w := held.Copy()
	w.Items["k"] = "w"
	if _, _, err := vars.Update(w, nil); err != nil {
		t.Errorf("write with the lock: %v", err)
	}
	if got, _, _ := vars.Read("lock/a", nil); got == nil || got.Lock == nil || got.Lock.ID != "" || got.Items["k"] != "w" {
		t.Errorf("read of a locked var: %+v (the lock shows, its ID does not)", got)
	}
	meta, _, err := vars.RenewLock(held, nil)
	if err != nil || meta.Lock == nil || meta.Lock.ID != held.Lock.ID {
		t.Errorf("renew: %+v, %v", meta, err)
	}
	other := held.Copy()
	other.Lock = &nomadapi.VariableLock{ID: "not-the-holder"}
	if _, _, err := vars.ReleaseLock(other, nil); err == nil || !strings.Contains(err.Error(), "409") {
		t.Errorf("release by another: %v, want 409", err)
	}
	rel, _, err := vars.ReleaseLock(held, nil)
	if err != nil || rel.Lock != nil {
		t.Fatalf("release: %+v, %v", rel, err)
	}
	if _, _, err := vars.AcquireLock(&nomadapi.Variable{Path: "lock/a", Lock: &nomadapi.VariableLock{TTL: "15s"}}, nil); err != nil {
		t.Errorf("acquire after release: %v", err)
	}
	for _, bad := range []string{"1s", "48h", "x"} {
		if _, _, err := vars.AcquireLock(&nomadapi.Variable{Path: "lock/b", Items: nomadapi.VariableItems{"k": "v"}, Lock: &nomadapi.VariableLock{TTL: bad}}, nil); err == nil || !strings.Contains(err.Error(), "Lock.TTL") {
			t.Errorf("TTL %s: %v", bad, err)
		}
	}
}

// ACL: path rules inside namespace rules decide each endpoint; lists are
// filtered row by row; the keyring is management only.
func TestVariablesACL(t *testing.T) {
	c := aclTestServer(t, true)
	mgmt, _, err := c.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetSecretID(mgmt.SecretID)
	rules := "namespace \"default\" {\n  variables {\n    path \"app/*\" { capabilities = [\"read\", \"list\"] }\n    path \"app/rw\" { capabilities = [\"read\", \"write\", \"destroy\"] }\n  }\n}\n"
	if _, err := c.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "vars", Rules: rules}, nil); err != nil {
		t.Fatal(err)
	}
	tok, _, err := c.ACLTokens().Create(&nomadapi.ACLToken{Type: "client", Policies: []string{"vars"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"app/a", "app/rw", "secret"} {
		if _, _, err := c.Variables().Create(&nomadapi.Variable{Path: p, Items: nomadapi.VariableItems{"k": "v"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	tc := aclClientLike(t, c, tok.SecretID)
	anon := aclClientLike(t, c, "")
	type op func(c *nomadapi.Client) error
	read := func(p string) op {
		return func(c *nomadapi.Client) error { _, _, err := c.Variables().Read(p, nil); return err }
	}
	write := func(p string) op {
		return func(c *nomadapi.Client) error {
			_, _, err := c.Variables().Update(&nomadapi.Variable{Path: p, Items: nomadapi.VariableItems{"k": "w"}}, nil)
			return err
		}
	}
	del := func(p string) op {
		return func(c *nomadapi.Client) error { _, err := c.Variables().Delete(p, nil); return err }
	}
	keys := func(c *nomadapi.Client) error { _, _, err := c.Keyring().List(nil); return err }
	rotate := func(c *nomadapi.Client) error { _, _, err := c.Keyring().Rotate(nil, nil); return err }
	matrix := []struct {
		name   string
		client *nomadapi.Client
		op     op
		ok     bool
	}{
		{"token reads app/a", tc, read("app/a"), true},
		{"token reads secret", tc, read("secret"), false},
		{"token writes app/a", tc, write("app/a"), false},
		{"token writes app/rw", tc, write("app/rw"), true},
		{"token writes in another namespace", tc, func(c *nomadapi.Client) error {
			_, _, err := c.Variables().Create(&nomadapi.Variable{Path: "app/rw", Namespace: "prod", Items: nomadapi.VariableItems{"k": "v"}}, nil)
			return err
		}, false},
		{"token deletes app/a", tc, del("app/a"), false},
		{"token lists keys", tc, keys, false},
		{"token rotates", tc, rotate, false},
		{"anonymous reads app/a", anon, read("app/a"), false},
		{"anonymous writes", anon, write("app/rw"), false},
		{"anonymous lists keys", anon, keys, false},
		{"management lists keys", c, keys, true},
		{"management rotates", c, rotate, true},
		{"token deletes app/rw", tc, del("app/rw"), true},
	}
	for _, m := range matrix {
		err := m.op(m.client)
		if m.ok && err != nil {
			t.Errorf("%s: %v", m.name, err)
		}
		if !m.ok && (err == nil || !strings.Contains(err.Error(), "403")) {
			t.Errorf("%s: %v, want 403", m.name, err)
		}
	}
	if v, _, err := tc.Variables().Peek("secret", nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("peek of a denied var: %+v, %v; want 403", v, err)
	}
	// A writer without read gets the conflict's metadata, not its items.
	wo := "namespace \"default\" {\n  variables {\n    path \"wo\" { capabilities = [\"write\"] }\n  }\n}\n"
	if _, err := c.ACLPolicies().Upsert(&nomadapi.ACLPolicy{Name: "write-only", Rules: wo}, nil); err != nil {
		t.Fatal(err)
	}
	wtok, _, err := c.ACLTokens().Create(&nomadapi.ACLToken{Type: "client", Policies: []string{"write-only"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Variables().Create(&nomadapi.Variable{Path: "wo", Items: nomadapi.VariableItems{"secret": "s"}}, nil); err != nil {
		t.Fatal(err)
	}
	var cas nomadapi.ErrCASConflict
	_, _, err = aclClientLike(t, c, wtok.SecretID).Variables().CheckedCreate(&nomadapi.Variable{Path: "wo", Items: nomadapi.VariableItems{"k": "v"}}, nil)
	if !errors.As(err, &cas) || cas.Conflict.ModifyIndex == 0 || cas.Conflict.Items != nil {
		t.Errorf("conflict to a writer without read: %v (items %v)", err, cas.Conflict)
	}
	list, _, err := tc.Variables().List(&nomadapi.QueryOptions{Namespace: "*"})
	if err != nil || len(list) != 1 || list[0].Path != "app/a" {
		t.Errorf("filtered list: %+v, %v", list, err)
	}
	if _, _, err := anon.Variables().List(nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("anonymous list: %v, want 403", err)
	}
}

// Rotation keeps every variable readable; a full rotation re-seals them
// under the new key and leaves the old ones inactive.
func TestKeyringRotateWithNomadClient(t *testing.T) {
	c := aclTestServer(t, false)
	if _, _, err := c.Variables().Create(&nomadapi.Variable{Path: "a", Items: nomadapi.VariableItems{"k": "1"}}, nil); err != nil {
		t.Fatal(err)
	}
	keys, _, err := c.Keyring().List(nil)
	if err != nil || len(keys) != 1 || keys[0].State != nomadapi.RootKeyStateActive || keys[0].Algorithm != nomadapi.EncryptionAlgorithmAES256GCM {
		t.Fatalf("keys after the first write: %+v, %v", keys, err)
	}
	k2, _, err := c.Keyring().Rotate(nil, nil)
	if err != nil || k2.KeyID == keys[0].KeyID || k2.State != nomadapi.RootKeyStateActive {
		t.Fatalf("rotate: %+v, %v", k2, err)
	}
	if _, _, err := c.Variables().Create(&nomadapi.Variable{Path: "b", Items: nomadapi.VariableItems{"k": "2"}}, nil); err != nil {
		t.Fatal(err)
	}
	k3, _, err := c.Keyring().Rotate(&nomadapi.KeyringRotateOptions{Full: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, _, _ = c.Keyring().List(nil)
	active := 0
	for _, k := range keys {
		if k.State == nomadapi.RootKeyStateActive {
			active++
			if k.KeyID != k3.KeyID {
				t.Errorf("active key %s, want %s", k.KeyID, k3.KeyID)
			}
		} else if k.State != nomadapi.RootKeyStateInactive {
			t.Errorf("key %s left %s", k.KeyID, k.State)
		}
	}
	if len(keys) != 3 || active != 1 {
		t.Errorf("%d keys, %d active", len(keys), active)
	}
	for p, want := range map[string]string{"a": "1", "b": "2"} {
		if v, _, err := c.Variables().Read(p, nil); err != nil || v.Items["k"] != want {
			t.Errorf("read %s after rotations: %+v, %v", p, v, err)
		}
	}
	if _, _, err := c.Keyring().Rotate(&nomadapi.KeyringRotateOptions{Algorithm: "rsa"}, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("unknown algorithm: %v", err)
	}

	// Delete: the active key and unknown keys are refused; an inactive
	// key that seals nothing goes.
	deletes := []struct {
		name, id string
		force    bool
		want     string
	}{
		{"active", k3.KeyID, false, "400"},
		{"unknown", "00000000-0000-0000-0000-000000000000", false, "404"},
		{"not a UUID", "nope", false, "400"},
		{"inactive", k2.KeyID, false, ""},
	}
	for _, d := range deletes {
		_, err := c.Keyring().Delete(&nomadapi.KeyringDeleteOptions{KeyID: d.id, Force: d.force}, nil)
		if (d.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), d.want)) {
			t.Errorf("delete %s: %v, want %q", d.name, err, d.want)
		}
	}
	if keys, _, _ := c.Keyring().List(nil); len(keys) != 2 {
		t.Errorf("%d keys after a delete, want 2", len(keys))
	}
	for p, want := range map[string]string{"a": "1", "b": "2"} {
		if v, _, err := c.Variables().Read(p, nil); err != nil || v.Items["k"] != want {
			t.Errorf("read %s after a key delete: %+v, %v", p, v, err)
		}
	}
}

// A key that still seals variables goes only with force.
func TestKeyringDeleteInUse(t *testing.T) {
	c := aclTestServer(t, false)
	// The keyring is never seen empty: its first key is made on demand.
	keys, _, err := c.Keyring().List(nil)
	if err != nil || len(keys) != 1 || keys[0].State != nomadapi.RootKeyStateActive {
		t.Fatalf("first list: %+v, %v", keys, err)
	}
	if _, _, err := c.Variables().Create(&nomadapi.Variable{Path: "a", Items: nomadapi.VariableItems{"k": "1"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Keyring().Rotate(nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Keyring().Delete(&nomadapi.KeyringDeleteOptions{KeyID: keys[0].KeyID}, nil); err == nil || !strings.Contains(err.Error(), "still seals 1 variables") {
		t.Errorf("delete of a key in use: %v", err)
	}
	if _, err := c.Keyring().Delete(&nomadapi.KeyringDeleteOptions{KeyID: keys[0].KeyID, Force: true}, nil); err != nil {
		t.Fatalf("forced delete: %v", err)
	}
	if _, _, err := c.Variables().Read("a", nil); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("read of a variable whose key is gone: %v, want 503", err)
	}
}

package state

import (
	"sort"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// Tables of variables and root keys (see schema).
const (
	TableVariables = schema.TableVariables
	TableRootKeys  = schema.TableRootKeys
)

// ApplyVariable applies one variable write (structs.VariableApplyRequest)
// at the store's time (At): check-and-set and locks are decided here, in
// the FSM, so that two writers racing through Raft cannot both win. A
// lost CAS or lock is structs.ErrConflict and writes nothing. It returns
// the variable as stored (nil after a delete).
func (s *StateStore) ApplyVariable(index uint64, req *structs.VariableApplyRequest) (*structs.VariableEncrypted, error) {
	var out *structs.VariableEncrypted
	err := s.write(index, func(t *writeTxn) error {
		v, err := t.applyVariable(req)
		out = v
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *writeTxn) applyVariable(req *structs.VariableApplyRequest) (*structs.VariableEncrypted, error) {
	in := req.Var
	if in == nil {
		return nil, structs.NewError(structs.ErrInvalid, "variable write: missing variable")
	}
	if err := structs.ValidateVariablePath(in.Path); err != nil {
		return nil, err
	}
	if in.Namespace == "" {
		return nil, structs.NewError(structs.ErrInvalid, "variable write: missing namespace")
	}
	raw, err := t.first(TableVariables, "id", in.Namespace, in.Path)
	if err != nil {
		return nil, err
	}
	var old *structs.VariableEncrypted
	if raw != nil {
		old = raw.(*structs.VariableEncrypted)
	}
	now := t.now
	if req.CAS != nil {
		switch {
		case *req.CAS == 0 && old != nil:
			return nil, structs.NewError(structs.ErrConflict, "cas conflict: variable %s exists at index %d", in.Path, old.ModifyIndex)
		case *req.CAS != 0 && (old == nil || old.ModifyIndex != *req.CAS):
			found := uint64(0)
			if old != nil {
				found = old.ModifyIndex
			}
			return nil, structs.NewError(structs.ErrConflict, "cas conflict: expected ModifyIndex %d; found %d", *req.CAS, found)
		}
	}
	// A held lock admits only its holder's writes.
	locked := old != nil && !now.IsZero() && old.LockHeld(now)
	holder := locked && req.LockID != "" && req.LockID == old.LockID
	next := func() *structs.VariableEncrypted {
		c := old.Copy()
		if c == nil {
			c = &structs.VariableEncrypted{Namespace: in.Namespace, Path: in.Path, CreateIndex: t.index, CreateTime: t.nanos()}
		}
		c.ModifyIndex, c.ModifyTime = t.index, t.stampNanos(c.ModifyTime)
		return c
	}
	switch req.Op {
	case structs.VarOpSet:
		if locked && !holder {
			return nil, structs.NewError(structs.ErrConflict, "variable %s is locked", in.Path)
		}
		if len(in.Data) == 0 || in.KeyID == "" {
			return nil, structs.NewError(structs.ErrInvalid, "variable write: missing sealed items")
		}
		v := next()
		v.KeyID, v.Data = in.KeyID, append([]byte(nil), in.Data...)
		return v, t.insert(TableVariables, v)
	case structs.VarOpDelete:
		if old == nil {
			return nil, nil
		}
		if locked && !holder {
			return nil, structs.NewError(structs.ErrConflict, "variable %s is locked", in.Path)
		}
		return nil, t.delete(TableVariables, old)
	case structs.VarOpLockAcquire:
		if old != nil && old.LockBlocked(now) {
			return nil, structs.NewError(structs.ErrConflict, "variable %s: lock already held, or its lock delay has not run out", in.Path)
		}
		if in.LockID == "" || in.LockTTL <= 0 || now.IsZero() {
			return nil, structs.NewError(structs.ErrInvalid, "lock acquire: missing lock ID, TTL or time")
		}
		v := next()
		if len(in.Data) > 0 {
			v.KeyID, v.Data = in.KeyID, append([]byte(nil), in.Data...)
		}
		if len(v.Data) == 0 {
			return nil, structs.NewError(structs.ErrInvalid, "lock acquire: the variable does not exist and the request has no items")
		}
		v.LockID, v.LockTTL, v.LockDelay = in.LockID, in.LockTTL, in.LockDelay
		v.LockExpires = now.Add(in.LockTTL).UnixNano()
		return v, t.insert(TableVariables, v)
	case structs.VarOpLockRenew, structs.VarOpLockRelease:
		if old == nil {
			return nil, structs.NewError(structs.ErrNotFound, "variable %s not found", in.Path)
		}
		if !holder {
			return nil, structs.NewError(structs.ErrConflict, "variable %s: the lock is not held by this lock ID", in.Path)
		}
		v := old.Copy()
		if req.Op == structs.VarOpLockRenew {
			v.LockExpires = now.Add(v.LockTTL).UnixNano()
		} else {
			v.ModifyIndex, v.ModifyTime = t.index, t.stampNanos(v.ModifyTime)
			v.LockID, v.LockTTL, v.LockDelay, v.LockExpires = "", 0, 0, 0
		}
		return v, t.insert(TableVariables, v)
	}
	return nil, structs.NewError(structs.ErrInvalid, "variable write: unknown operation %q", req.Op)
}

// RekeyVariables stores variables re-sealed under another key. A variable
// changed or deleted since it was read (another ModifyIndex) is skipped:
// its new write was sealed under the active key already.
func (s *StateStore) RekeyVariables(index uint64, vars []*structs.VariableEncrypted) error {
	return s.write(index, func(t *writeTxn) error {
		for _, in := range vars {
			raw, err := t.first(TableVariables, "id", in.Namespace, in.Path)
			if err != nil {
				return err
			}
			if raw == nil || raw.(*structs.VariableEncrypted).ModifyIndex != in.ModifyIndex {
				continue
			}
			v := raw.(*structs.VariableEncrypted).Copy()
			v.KeyID, v.Data = in.KeyID, append([]byte(nil), in.Data...)
			if err := t.insert(TableVariables, v); err != nil {
				return err
			}
		}
		t.tables[TableVariables] = struct{}{}
		return nil
	})
}

// VariableByPath returns a variable, or nil.
func (s *StateStore) VariableByPath(ws memdb.WatchSet, ns, path string) (*structs.VariableEncrypted, error) {
	return first[*structs.VariableEncrypted](s, ws, TableVariables, "id", ns, path)
}

// Variables returns the variables of ns (AllNamespaces: every namespace)
// whose path starts with prefix, by namespace and path.
func (s *StateStore) Variables(ws memdb.WatchSet, ns, prefix string) ([]*structs.VariableEncrypted, error) {
	if ns == AllNamespaces || ns == "" {
		return list(s, ws, func(v *structs.VariableEncrypted) bool { return strings.HasPrefix(v.Path, prefix) }, TableVariables, "id")
	}
	return list[*structs.VariableEncrypted](s, ws, nil, TableVariables, "id_prefix", ns, prefix)
}

// VariablesByKeyID returns the variables sealed under a root key.
func (s *StateStore) VariablesByKeyID(ws memdb.WatchSet, keyID string) ([]*structs.VariableEncrypted, error) {
	return list[*structs.VariableEncrypted](s, ws, nil, TableVariables, "key_id", keyID)
}

// UpsertRootKey stores a root key (its material is never changed: an
// existing key keeps its own). With activate it becomes the active key
// and every other active key inactive.
func (s *StateStore) UpsertRootKey(index uint64, key *structs.RootKey, activate bool) error {
	return s.write(index, func(t *writeTxn) error {
		if key == nil || key.Meta == nil || key.Meta.KeyID == "" || len(key.WrappedKey) == 0 {
			return structs.NewError(structs.ErrInvalid, "root key: missing ID or material")
		}
		raw, err := t.first(TableRootKeys, "id", key.Meta.KeyID)
		if err != nil {
			return err
		}
		k := key.Copy()
		k.Meta.CreateIndex = index
		if raw != nil {
			old := raw.(*structs.RootKey)
			k = old.Copy()
			k.Meta.State = key.Meta.State
		}
		k.Meta.ModifyIndex = index
		if activate {
			k.Meta.State = structs.RootKeyStateActive
			if err := t.setRootKeyStates(func(o *structs.RootKey) bool {
				return o.Meta.State == structs.RootKeyStateActive && o.Meta.KeyID != k.Meta.KeyID
			}, structs.RootKeyStateInactive); err != nil {
				return err
			}
		}
		if k.Meta.State == "" {
			k.Meta.State = structs.RootKeyStateInactive
		}
		return t.insert(TableRootKeys, k)
	})
}

// SetRootKeysState sets the state of existing keys (not to active: use
// UpsertRootKey); unknown IDs are structs.ErrNotFound.
func (s *StateStore) SetRootKeysState(index uint64, ids []string, state string) error {
	return s.write(index, func(t *writeTxn) error {
		if state != structs.RootKeyStateInactive && state != structs.RootKeyStateRekeying {
			return structs.NewError(structs.ErrInvalid, "root key state %q: must be inactive or rekeying", state)
		}
		want := map[string]bool{}
		for _, id := range ids {
			raw, err := t.first(TableRootKeys, "id", id)
			if err != nil {
				return err
			}
			if raw == nil {
				return structs.NewError(structs.ErrNotFound, "root key %s not found", id)
			}
			want[id] = true
		}
		return t.setRootKeyStates(func(o *structs.RootKey) bool { return want[o.Meta.KeyID] }, state)
	})
}

func (t *writeTxn) setRootKeyStates(match func(*structs.RootKey) bool, state string) error {
	iter, err := t.txn.Get(TableRootKeys, "id")
	if err != nil {
		return err
	}
	var change []*structs.RootKey
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		if k := raw.(*structs.RootKey); match(k) && k.Meta.State != state {
			change = append(change, k)
		}
	}
	for _, k := range change {
		c := k.Copy()
		c.Meta.State, c.Meta.ModifyIndex = state, t.index
		if err := t.insert(TableRootKeys, c); err != nil {
			return err
		}
	}
	t.tables[TableRootKeys] = struct{}{}
	return nil
}

// DeleteRootKey removes an inactive root key; the active one is
// structs.ErrInvalid, an unknown one structs.ErrNotFound.
func (s *StateStore) DeleteRootKey(index uint64, id string) error {
	return s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TableRootKeys, "id", id)
		if err != nil {
			return err
		}
		if raw == nil {
			return structs.NewError(structs.ErrNotFound, "root key %s not found", id)
		}
		if raw.(*structs.RootKey).Meta.State == structs.RootKeyStateActive {
			return structs.NewError(structs.ErrInvalid, "root key %s is the active key", id)
		}
		return t.delete(TableRootKeys, raw)
	})
}

// RootKeys returns every root key, newest first.
func (s *StateStore) RootKeys(ws memdb.WatchSet) ([]*structs.RootKey, error) {
	keys, err := list[*structs.RootKey](s, ws, nil, TableRootKeys, "id")
	sort.SliceStable(keys, func(i, j int) bool { return keys[i].Meta.CreateIndex > keys[j].Meta.CreateIndex })
	return keys, err
}

// RootKeyByID returns a root key, or nil.
func (s *StateStore) RootKeyByID(ws memdb.WatchSet, id string) (*structs.RootKey, error) {
	return first[*structs.RootKey](s, ws, TableRootKeys, "id", id)
}

// ActiveRootKey returns the active root key, or nil before the first.
func (s *StateStore) ActiveRootKey(ws memdb.WatchSet) (*structs.RootKey, error) {
	keys, err := s.RootKeys(ws)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.Meta.State == structs.RootKeyStateActive {
			return k, nil
		}
	}
	return nil, nil
}

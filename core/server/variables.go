package server

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/keyring"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Variables is the Nomad Variables and keyring endpoint. Items arrive in
// the clear (from the HTTP API, or forwarded over the servers' mutual
// TLS), are sealed on the leader under the active root key and only then
// go into a Raft entry: the log, the state store and snapshots hold
// sealed items alone. Any server opens them for a read with the root key
// the state holds. The caller (the HTTP API) has authorized the request.
type Variables struct{ srv *Server }

// Variables returns the variables endpoint.
func (s *Server) Variables() Variables { return Variables{s} }

// varKeys caches unwrapped root keys; their material never changes.
var varKeys keyring.Cache

// rekeyBatch bounds the variables one rekey entry re-seals.
const rekeyBatch = 64

// RPC arguments and replies.
type (
	VarWriteArgs struct {
		Op     string
		Var    *structs.Variable
		CAS    *uint64
		LockID string
	}
	// VarWriteReply is a write's outcome: the variable as stored (nil
	// after a delete), or Conflict, the current one, when a CAS or lock
	// check lost (then the error is of kind structs.ErrConflict).
	VarWriteReply struct {
		Var      *structs.Variable
		Conflict *structs.Variable
		// ConflictMsg is the conflict's message, over RPC.
		ConflictMsg string
		Index       uint64
	}
	KeyringRotateArgs struct{ Full bool }
	KeyringDeleteArgs struct {
		KeyID string
		Force bool
	}
	KeyringRotateReply struct {
		Key   *structs.RootKeyMeta
		Index uint64
	}
)

func (ep Variables) register(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "Variables.Apply", func(ctx context.Context, a *VarWriteArgs) (*VarWriteReply, error) {
		r, err := ep.Apply(mark(ctx), a.Op, a.Var, a.CAS, a.LockID)
		if err != nil && r != nil && r.Conflict != nil {
			// A lost check travels as a reply, so that the current
			// variable reaches the follower with it.
			r.ConflictMsg = err.Error()
			return r, nil
		}
		return r, err
	})
	rpc.Handle(rs, "Variables.TaskRead", func(ctx context.Context, a *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error) {
		return ep.TaskRead(mark(ctx), a)
	})
	rpc.Handle(rs, "Keyring.Delete", func(ctx context.Context, a *KeyringDeleteArgs) (*IndexReply, error) {
		idx, err := ep.DeleteKey(mark(ctx), a.KeyID, a.Force)
		return &IndexReply{Index: idx}, err
	})
	rpc.Handle(rs, "Keyring.Rotate", func(ctx context.Context, a *KeyringRotateArgs) (*KeyringRotateReply, error) {
		k, idx, err := ep.Rotate(mark(ctx), a.Full)
		return &KeyringRotateReply{Key: k, Index: idx}, err
	})
}

// Apply runs one variable write: structs.VarOpSet (with cas, and the lock
// ID to write a locked variable), VarOpDelete, or a lock operation. The
// variable's Namespace must be set. A lost check is structs.ErrConflict
// with the reply's Conflict set to the current variable. A follower
// forwards to the leader.
func (ep Variables) Apply(ctx context.Context, op string, v *structs.Variable, cas *uint64, lockID string) (*VarWriteReply, error) {
	s := ep.srv
	if r, ok, err := forward[VarWriteArgs, VarWriteReply](ctx, s, "Variables.Apply", &VarWriteArgs{Op: op, Var: v, CAS: cas, LockID: lockID}); ok {
		if err == nil && r != nil && r.Conflict != nil {
			err = structs.NewError(structs.ErrConflict, "%s", r.ConflictMsg)
		}
		return r, err
	}
	if v == nil {
		return nil, structs.NewError(structs.ErrInvalid, "variable: missing body")
	}
	if v.Namespace == "" {
		v.Namespace = structs.DefaultNamespace
	}
	if err := structs.ValidateVariablePath(v.Path); err != nil {
		return nil, err
	}
	if len(lockID) > 64 {
		// It goes into the Raft entry: a lock ID is a server-made UUID.
		return nil, structs.NewError(structs.ErrInvalid, "Lock.ID: longer than 64 bytes")
	}
	if ns, err := s.State().NamespaceByName(nil, v.Namespace); err != nil {
		return nil, err
	} else if ns == nil && v.Namespace != structs.DefaultNamespace {
		return nil, structs.NewError(structs.ErrInvalid, "Namespace: %q does not exist", v.Namespace)
	}
	enc := &structs.VariableEncrypted{Namespace: v.Namespace, Path: v.Path}
	req := &structs.VariableApplyRequest{Op: op, Var: enc, CAS: cas, LockID: lockID}
	sealItems := func(required bool) error {
		if !required && len(v.Items) == 0 {
			// A lock on a variable that does not exist yet creates it
			// without items, as Nomad's does.
			cur, err := s.State().VariableByPath(nil, v.Namespace, v.Path)
			if err != nil || cur != nil {
				return err
			}
		} else if err := structs.ValidateVariableItems(v.Items); err != nil {
			return err
		}
		key, material, err := ep.activeKey(ctx)
		if err != nil {
			return err
		}
		enc.KeyID = key.Meta.KeyID
		enc.Data, err = keyring.SealItems(material, enc.KeyID, v.Namespace, v.Path, v.Items)
		return err
	}
	switch op {
	case structs.VarOpSet:
		if err := sealItems(true); err != nil {
			return nil, err
		}
	case structs.VarOpDelete:
	case structs.VarOpLockAcquire:
		ttl, delay, err := structs.ParseVariableLock(v.Lock)
		if err != nil {
			return nil, err
		}
		if err := sealItems(false); err != nil {
			return nil, err
		}
		enc.LockID, enc.LockTTL, enc.LockDelay = uuid.NewString(), ttl, delay
	case structs.VarOpLockRenew, structs.VarOpLockRelease:
		if lockID == "" {
			return nil, structs.NewError(structs.ErrInvalid, "Lock.ID: required to %s", op)
		}
	default:
		return nil, structs.NewError(structs.ErrInvalid, "variable: unknown operation %q", op)
	}
	idx, resp, err := s.raftApplyResponse(structs.VariableApplyRequestType, req)
	if err != nil {
		if errors.Is(err, structs.ErrConflict) {
			cur, rerr := s.State().VariableByPath(nil, v.Namespace, v.Path)
			if rerr != nil {
				return nil, rerr
			}
			var conflict *structs.Variable
			if cur != nil {
				if conflict, rerr = ep.Open(cur, false); rerr != nil {
					return nil, rerr
				}
			}
			if conflict == nil {
				conflict = &structs.Variable{Namespace: v.Namespace, Path: v.Path}
			}
			return &VarWriteReply{Conflict: conflict}, err
		}
		return nil, err
	}
	s.logger.Info("variable written", "op", op, "namespace", v.Namespace, "path", v.Path, "index", idx)
	out := &VarWriteReply{Index: idx}
	if stored, _ := resp.(*structs.VariableEncrypted); stored != nil {
		out.Var, err = ep.Open(stored, op == structs.VarOpLockAcquire || op == structs.VarOpLockRenew)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Open returns v with its items in the clear, and its lock as held now
// (withLockID: with the holder's ID, for the holder's own answers).
func (ep Variables) Open(v *structs.VariableEncrypted, withLockID bool) (*structs.Variable, error) {
	st := ep.srv.State()
	key, err := st.RootKeyByID(nil, v.KeyID)
	if err != nil {
		return nil, err
	}
	if key == nil {
		return nil, structs.NewError(structs.ErrUnavailable, "variable %s: its root key %s is not in this server's keyring", v.Path, v.KeyID)
	}
	material, err := varKeys.Material(key)
	if err != nil {
		return nil, err
	}
	items, err := keyring.OpenItems(material, v.KeyID, v.Namespace, v.Path, v.Data)
	if err != nil {
		return nil, err
	}
	return &structs.Variable{Namespace: v.Namespace, Path: v.Path, CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex,
		CreateTime: v.CreateTime, ModifyTime: v.ModifyTime, Items: items, Lock: v.APILock(ep.srv.cfg.Now(), withLockID)}, nil
}

// Now is the clock variables' locks are read with.
func (ep Variables) Now() time.Time { return ep.srv.cfg.Now() }

// activeKey returns the active root key, making the first one on a
// cluster that has none.
func (ep Variables) activeKey(ctx context.Context) (*structs.RootKey, []byte, error) {
	s := ep.srv
	key, err := s.State().ActiveRootKey(nil)
	if err != nil {
		return nil, nil, err
	}
	if key == nil {
		if _, _, err := ep.Rotate(ctx, false); err != nil {
			return nil, nil, err
		}
		if key, err = s.State().ActiveRootKey(nil); err != nil {
			return nil, nil, err
		}
		if key == nil {
			return nil, nil, structs.NewError(structs.ErrUnavailable, "keyring: no active root key")
		}
	}
	material, err := varKeys.Material(key)
	return key, material, err
}

// Keys lists the keyring's keys, newest first. A cluster without a key
// gets its first one here (or at its first variable write), so that the
// keyring is never seen empty, as Nomad's is not.
func (ep Variables) Keys(ctx context.Context) ([]*structs.RootKeyMeta, uint64, error) {
	if _, _, err := ep.activeKey(ctx); err != nil {
		return nil, 0, err
	}
	st := ep.srv.State()
	keys, err := st.RootKeys(nil)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*structs.RootKeyMeta, 0, len(keys))
	for _, k := range keys {
		m := *k.Meta
		out = append(out, &m)
	}
	return out, st.Index(state.TableRootKeys), nil
}

// Rotate makes a new root key the active one. New writes are sealed under
// it; older variables stay sealed under their key, which stays in the
// keyring. With full, every variable is re-sealed under the new key
// before Rotate returns (the old keys are rekeying meanwhile, inactive
// after). A follower forwards to the leader.
func (ep Variables) Rotate(ctx context.Context, full bool) (*structs.RootKeyMeta, uint64, error) {
	s := ep.srv
	if r, ok, err := forward[KeyringRotateArgs, KeyringRotateReply](ctx, s, "Keyring.Rotate", &KeyringRotateArgs{Full: full}); ok {
		if err != nil {
			return nil, 0, err
		}
		return r.Key, r.Index, nil
	}
	key, err := keyring.NewRootKey(s.cfg.Now().UnixNano())
	if err != nil {
		return nil, 0, err
	}
	old, err := s.State().RootKeys(nil)
	if err != nil {
		return nil, 0, err
	}
	idx, err := s.raftApply(structs.RootKeyUpsertRequestType, &structs.RootKeyUpsertRequest{Key: key, Activate: true})
	if err != nil {
		return nil, 0, err
	}
	s.logger.Info("keyring rotated", "key_id", key.Meta.KeyID, "full", full, "index", idx)
	if full {
		ridx, err := ep.rekey(ctx, key, old)
		if err != nil {
			return nil, 0, err
		}
		idx = max(idx, ridx)
	}
	stored, err := s.State().RootKeyByID(nil, key.Meta.KeyID)
	if err != nil || stored == nil {
		return nil, 0, errors.Join(err, structs.NewError(structs.ErrUnavailable, "keyring: the new key was not stored"))
	}
	m := *stored.Meta
	return &m, idx, nil
}

// rekey re-seals every variable sealed under one of old under key, in
// batches of rekeyBatch, then marks old inactive.
func (ep Variables) rekey(ctx context.Context, key *structs.RootKey, old []*structs.RootKey) (uint64, error) {
	s := ep.srv
	material, err := varKeys.Material(key)
	if err != nil {
		return 0, err
	}
	var ids []string
	for _, k := range old {
		ids = append(ids, k.Meta.KeyID)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err = s.raftApply(structs.RootKeyStateRequestType, &structs.RootKeyStateRequest{KeyIDs: ids, State: structs.RootKeyStateRekeying}); err != nil {
		return 0, err
	}
	count := 0
	for _, id := range ids {
		vars, err := s.State().VariablesByKeyID(nil, id)
		if err != nil {
			return 0, err
		}
		for start := 0; start < len(vars); start += rekeyBatch {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			batch := vars[start:min(start+rekeyBatch, len(vars))]
			out := make([]*structs.VariableEncrypted, 0, len(batch))
			for _, v := range batch {
				plain, err := ep.Open(v, false)
				if err != nil {
					return 0, err
				}
				c := v.Copy()
				c.KeyID = key.Meta.KeyID
				if c.Data, err = keyring.SealItems(material, c.KeyID, v.Namespace, v.Path, plain.Items); err != nil {
					return 0, err
				}
				out = append(out, c)
			}
			if _, err = s.raftApply(structs.VariablesRekeyRequestType, &structs.VariablesRekeyRequest{Vars: out}); err != nil {
				return 0, err
			}
			count += len(out)
		}
	}
	idx, err := s.raftApply(structs.RootKeyStateRequestType, &structs.RootKeyStateRequest{KeyIDs: ids, State: structs.RootKeyStateInactive})
	if err != nil {
		return 0, err
	}
	s.logger.Info("keyring full rotation done", "key_id", key.Meta.KeyID, "variables", count, "index", idx)
	return idx, nil
}

// Write is Apply in the HTTP API's terms: the variable as stored, or the
// current one as conflict with an error of kind structs.ErrConflict.
func (ep Variables) Write(ctx context.Context, op string, v *structs.Variable, cas *uint64, lockID string) (*structs.Variable, *structs.Variable, uint64, error) {
	r, err := ep.Apply(ctx, op, v, cas, lockID)
	if r == nil {
		return nil, nil, 0, err
	}
	return r.Var, r.Conflict, r.Index, err
}

// DeleteKey removes an inactive root key. The active key is refused, and
// so is a key that still seals variables unless force (they can then
// never be read again). A follower forwards to the leader.
func (ep Variables) DeleteKey(ctx context.Context, keyID string, force bool) (uint64, error) {
	s := ep.srv
	if r, ok, err := forward[KeyringDeleteArgs, IndexReply](ctx, s, "Keyring.Delete", &KeyringDeleteArgs{KeyID: keyID, Force: force}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	if !structs.IsUUID(keyID) {
		return 0, structs.NewError(structs.ErrInvalid, "KeyID: %q is not a UUID", keyID)
	}
	st := s.State()
	key, err := st.RootKeyByID(nil, keyID)
	if err != nil {
		return 0, err
	}
	if key == nil {
		return 0, structs.NewError(structs.ErrNotFound, "root key %s not found", keyID)
	}
	if key.Meta.State == structs.RootKeyStateActive {
		return 0, structs.NewError(structs.ErrInvalid, "root key %s is the active key; rotate first", keyID)
	}
	if !force {
		vars, err := st.VariablesByKeyID(nil, keyID)
		if err != nil {
			return 0, err
		}
		if len(vars) > 0 {
			return 0, structs.NewError(structs.ErrInvalid, "root key %s still seals %d variables; rotate with full first, or force (they would be lost)", keyID, len(vars))
		}
	}
	idx, err := s.raftApply(structs.RootKeyDeleteRequestType, &structs.RootKeyDeleteRequest{KeyID: keyID})
	if err != nil {
		return 0, err
	}
	s.logger.Info("root key deleted", "key_id", keyID, "force", force, "index", idx)
	return idx, nil
}

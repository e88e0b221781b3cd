package state

import (
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// ACL tables (§6). Tokens are keyed by AccessorID, with a unique index on
// SecretID for the resolver; one-time tokens are keyed by the AccessorID of
// the token they stand for (one live OTT per token), with a unique index on
// their secret.
const (
	TableACLPolicies   = schema.TableACLPolicies
	TableACLTokens     = schema.TableACLTokens
	TableOneTimeTokens = schema.TableOneTimeTokens

	// IndexACLBootstrap is the index-table key holding the Raft index at
	// which ACLs were bootstrapped, 0 (absent) before.
	IndexACLBootstrap = "acl_token_bootstrap"
)

// UpsertACLPolicies writes policies; an existing policy keeps its
// CreateIndex. Every policy is validated; one bad policy writes none.
func (s *StateStore) UpsertACLPolicies(index uint64, policies []*structs.ACLPolicy) error {
	return s.write(index, func(t *writeTxn) error {
		for _, p := range policies {
			if err := p.Validate(); err != nil {
				return err
			}
			raw, err := t.first(TableACLPolicies, "id", p.Name)
			if err != nil {
				return err
			}
			p.CreateIndex = index
			if raw != nil {
				p.CreateIndex = raw.(*structs.ACLPolicy).CreateIndex
			}
			p.ModifyIndex = index
			if len(p.Hash) == 0 {
				p.SetHash()
			}
			if err := t.insert(TableACLPolicies, p); err != nil {
				return err
			}
		}
		t.tables[TableACLPolicies] = struct{}{}
		return nil
	})
}

// DeleteACLPolicies deletes policies by name; a name that does not exist
// is structs.ErrNotFound and deletes nothing.
func (s *StateStore) DeleteACLPolicies(index uint64, names []string) error {
	return s.write(index, func(t *writeTxn) error {
		for _, n := range names {
			raw, err := t.first(TableACLPolicies, "id", n)
			if err != nil {
				return err
			}
			if raw == nil {
				return structs.NewError(structs.ErrNotFound, "ACL policy %q not found", n)
			}
			if err := t.delete(TableACLPolicies, raw); err != nil {
				return err
			}
		}
		t.tables[TableACLPolicies] = struct{}{}
		return nil
	})
}

// ACLPolicyByName returns a policy, or nil.
func (s *StateStore) ACLPolicyByName(ws memdb.WatchSet, name string) (*structs.ACLPolicy, error) {
	return first[*structs.ACLPolicy](s, ws, TableACLPolicies, "id", name)
}

// ACLPolicies returns the policies whose name starts with prefix, by name.
func (s *StateStore) ACLPolicies(ws memdb.WatchSet, prefix string) ([]*structs.ACLPolicy, error) {
	return list[*structs.ACLPolicy](s, ws, nil, TableACLPolicies, "id_prefix", prefix)
}

// UpsertACLTokens writes tokens; an existing token keeps its CreateIndex.
// A token's SecretID must not be another token's (structs.ErrConflict),
// and its AccessorID and SecretID must be set.
func (s *StateStore) UpsertACLTokens(index uint64, tokens []*structs.ACLToken) error {
	return s.write(index, func(t *writeTxn) error { return t.upsertACLTokens(tokens) })
}

func (t *writeTxn) upsertACLTokens(tokens []*structs.ACLToken) error {
	for _, tok := range tokens {
		if tok == nil || tok.AccessorID == "" || tok.SecretID == "" {
			return structs.NewError(structs.ErrInvalid, "ACL token: missing AccessorID or SecretID")
		}
		raw, err := t.first(TableACLTokens, "secret", tok.SecretID)
		if err != nil {
			return err
		}
		if raw != nil && raw.(*structs.ACLToken).AccessorID != tok.AccessorID {
			return structs.NewError(structs.ErrConflict, "ACL token %s: SecretID is already another token's", tok.AccessorID)
		}
		raw, err = t.first(TableACLTokens, "id", tok.AccessorID)
		if err != nil {
			return err
		}
		tok.CreateIndex = t.index
		if raw != nil {
			tok.CreateIndex = raw.(*structs.ACLToken).CreateIndex
		}
		tok.ModifyIndex = t.index
		if len(tok.Hash) == 0 {
			tok.SetHash()
		}
		if err := t.insert(TableACLTokens, tok); err != nil {
			return err
		}
	}
	t.tables[TableACLTokens] = struct{}{}
	return nil
}

// DeleteACLTokens deletes tokens by accessor, and their one-time tokens.
// An accessor that does not exist is structs.ErrNotFound and deletes
// nothing.
func (s *StateStore) DeleteACLTokens(index uint64, accessors []string) error {
	return s.write(index, func(t *writeTxn) error {
		for _, a := range accessors {
			raw, err := t.first(TableACLTokens, "id", a)
			if err != nil {
				return err
			}
			if raw == nil {
				return structs.NewError(structs.ErrNotFound, "ACL token %q not found", a)
			}
			if err := t.delete(TableACLTokens, raw); err != nil {
				return err
			}
			if err := t.deleteOTT(a); err != nil {
				return err
			}
		}
		t.tables[TableACLTokens] = struct{}{}
		return nil
	})
}

// BootstrapACLTokens writes the bootstrap token and records index as the
// bootstrap index. It refuses (structs.ErrInvalid) when ACLs were
// bootstrapped already, unless at resetIndex.
func (s *StateStore) BootstrapACLTokens(index, resetIndex uint64, tok *structs.ACLToken) error {
	return s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TableIndex, "id", IndexACLBootstrap)
		if err != nil {
			return err
		}
		if raw != nil {
			if done := raw.(*IndexEntry).Value; done != resetIndex {
				return structs.NewError(structs.ErrInvalid, "ACL bootstrap already done (reset index: %d)", done)
			}
		}
		if err := t.upsertACLTokens([]*structs.ACLToken{tok}); err != nil {
			return err
		}
		return t.insert(TableIndex, &IndexEntry{Key: IndexACLBootstrap, Value: index})
	})
}

// ACLBootstrapIndex is the Raft index of the ACL bootstrap, 0 before it.
func (s *StateStore) ACLBootstrapIndex() uint64 { return s.Index(IndexACLBootstrap) }

// ACLTokenByAccessorID returns a token, or nil.
func (s *StateStore) ACLTokenByAccessorID(ws memdb.WatchSet, accessor string) (*structs.ACLToken, error) {
	return first[*structs.ACLToken](s, ws, TableACLTokens, "id", accessor)
}

// ACLTokenBySecretID returns the token holding secret, or nil.
func (s *StateStore) ACLTokenBySecretID(ws memdb.WatchSet, secret string) (*structs.ACLToken, error) {
	if secret == "" {
		return nil, nil
	}
	return first[*structs.ACLToken](s, ws, TableACLTokens, "secret", secret)
}

// ACLTokens returns the tokens whose accessor starts with prefix.
func (s *StateStore) ACLTokens(ws memdb.WatchSet, prefix string) ([]*structs.ACLToken, error) {
	return list[*structs.ACLToken](s, ws, nil, TableACLTokens, "id_prefix", prefix)
}

// UpsertOneTimeToken writes a one-time token, replacing the token's
// previous one. A zero ExpiresAt or a secret already in use by another
// accessor is refused.
func (s *StateStore) UpsertOneTimeToken(index uint64, ott *structs.OneTimeToken) error {
	return s.write(index, func(t *writeTxn) error {
		if err := ott.Validate(); err != nil {
			return err
		}
		raw, err := t.first(TableOneTimeTokens, "secret", ott.OneTimeSecretID)
		if err != nil {
			return err
		}
		if raw != nil && raw.(*structs.OneTimeToken).AccessorID != ott.AccessorID {
			return structs.NewError(structs.ErrConflict, "one-time token secret already in use")
		}
		ott.CreateIndex, ott.ModifyIndex = index, index
		if err := t.insert(TableOneTimeTokens, ott); err != nil {
			return err
		}
		return nil
	})
}

// DeleteOneTimeTokens deletes the one-time tokens of accessors; missing
// ones are skipped (an exchange retried after success is harmless).
func (s *StateStore) DeleteOneTimeTokens(index uint64, accessors []string) error {
	return s.write(index, func(t *writeTxn) error {
		for _, a := range accessors {
			if err := t.deleteOTT(a); err != nil {
				return err
			}
		}
		t.tables[TableOneTimeTokens] = struct{}{}
		return nil
	})
}

// ExchangeOneTimeToken spends the one-time token with secret, provided
// it is accessor's, has not expired by now and is unspent; otherwise it
// refuses with structs.ErrPermissionDenied and writes nothing. Only the
// first of several exchanges of one secret thus succeeds. With an
// exchangeID the token is marked spent by it (and left for expiry to
// remove), and the same exchangeID spending it again succeeds without a
// write; without one (an entry of an older version) the token is deleted.
func (s *StateStore) ExchangeOneTimeToken(index uint64, accessor, secret, exchangeID string) error {
	return s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TableOneTimeTokens, "secret", secret)
		if err != nil {
			return err
		}
		if raw == nil || raw.(*structs.OneTimeToken).AccessorID != accessor {
			return structs.NewError(structs.ErrPermissionDenied, "Permission denied")
		}
		o := raw.(*structs.OneTimeToken)
		if exchangeID != "" && o.ExchangeID == exchangeID {
			return nil // this exchange already won
		}
		if o.IsSpent() {
			return structs.NewError(structs.ErrPermissionDenied, "Permission denied")
		}
		if !t.now.IsZero() && o.IsExpired(t.now) {
			return structs.NewError(structs.ErrPermissionDenied, "Permission denied")
		}
		if exchangeID == "" {
			return t.delete(TableOneTimeTokens, raw)
		}
		spent := *o
		spent.ExchangeID, spent.ModifyIndex = exchangeID, index
		return t.insert(TableOneTimeTokens, &spent)
	})
}

// ExpireOneTimeTokens deletes every one-time token whose ExpiresAt is
// before the handle's time (see At); without one it deletes nothing.
func (s *StateStore) ExpireOneTimeTokens(index uint64) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableOneTimeTokens] = struct{}{}
		if t.now.IsZero() {
			return nil
		}
		iter, err := t.txn.Get(TableOneTimeTokens, "id")
		if err != nil {
			return err
		}
		var expired []*structs.OneTimeToken
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			if o := raw.(*structs.OneTimeToken); o.IsExpired(t.now) {
				expired = append(expired, o)
			}
		}
		for _, o := range expired {
			if err := t.delete(TableOneTimeTokens, o); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *writeTxn) deleteOTT(accessor string) error {
	raw, err := t.first(TableOneTimeTokens, "id", accessor)
	if err != nil || raw == nil {
		return err
	}
	return t.delete(TableOneTimeTokens, raw)
}

// OneTimeTokenBySecret returns the unspent one-time token with secret,
// or nil: a spent token grants nothing and is not returned.
func (s *StateStore) OneTimeTokenBySecret(ws memdb.WatchSet, secret string) (*structs.OneTimeToken, error) {
	o, err := s.OneTimeTokenBySecretAny(ws, secret)
	if err != nil || o == nil || o.IsSpent() {
		return nil, err
	}
	return o, nil
}

// OneTimeTokenBySecretAny returns the one-time token with secret, spent
// or not, or nil; only for learning which exchange spent it.
func (s *StateStore) OneTimeTokenBySecretAny(ws memdb.WatchSet, secret string) (*structs.OneTimeToken, error) {
	if secret == "" {
		return nil, nil
	}
	return first[*structs.OneTimeToken](s, ws, TableOneTimeTokens, "secret", secret)
}

// OneTimeTokens returns every one-time token, by accessor.
func (s *StateStore) OneTimeTokens(ws memdb.WatchSet) ([]*structs.OneTimeToken, error) {
	out, err := list[*structs.OneTimeToken](s, ws, nil, TableOneTimeTokens, "id")
	return slices.Clip(out), err
}

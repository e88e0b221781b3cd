package state

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// TablePKI holds the cluster PKI: one row, or none before the first
// server stored its CA.
const TablePKI = schema.TablePKI

// PKIInit stores p when the state holds no PKI yet, and reports whether it
// did. With a PKI already stored it changes nothing: the CA is set once.
func (s *StateStore) PKIInit(index uint64, p *structs.ClusterPKI) (bool, error) {
	if p == nil || len(p.CA) == 0 || len(p.Tokens) == 0 || p.CAFingerprint == "" {
		return false, structs.NewError(structs.ErrInvalid, "cluster PKI: CA, Tokens and CAFingerprint are required")
	}
	stored := false
	err := s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TablePKI, "id")
		if err != nil || raw != nil {
			return err
		}
		cp := *p
		cp.CreateIndex, cp.ModifyIndex = t.index, t.index
		stored = true
		return t.insert(TablePKI, &cp)
	})
	return stored && err == nil, err
}

// PKISetTokens replaces the join tokens of the stored PKI.
func (s *StateStore) PKISetTokens(index uint64, fingerprint string, tokens []byte) error {
	if len(tokens) == 0 {
		return structs.NewError(structs.ErrInvalid, "join tokens: Tokens is required")
	}
	return s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TablePKI, "id")
		if err != nil {
			return err
		}
		if raw == nil {
			return structs.NewError(structs.ErrNotFound, "join tokens: the cluster has no PKI yet")
		}
		cur := raw.(*structs.ClusterPKI)
		if cur.CAFingerprint != fingerprint {
			return structs.NewError(structs.ErrInvalid, "join tokens: CAFingerprint %q is not the cluster CA's %q", fingerprint, cur.CAFingerprint)
		}
		cp := *cur
		cp.Tokens = append([]byte(nil), tokens...)
		cp.ModifyIndex = t.index
		return t.insert(TablePKI, &cp)
	})
}

// PKI is the stored cluster PKI, or nil. Do not modify it.
func (s *StateStore) PKI(ws memdb.WatchSet) (*structs.ClusterPKI, error) {
	return first[*structs.ClusterPKI](s, ws, TablePKI, "id")
}

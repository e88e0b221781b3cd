package state

import (
	"io"

	"github.com/drover-org/drover/core/state/persist"
)

// ErrBadSnapshot is returned for a stream that is not a drover state
// snapshot, is of an unknown format version, or is cut short.
var ErrBadSnapshot = persist.ErrBadSnapshot

// Persist writes the snapshot's whole state to w in the format of
// core/state/persist.
func (s *StateSnapshot) Persist(w io.Writer) error {
	return persist.Write(w, s.db.Txn(false))
}

// Restore loads a stream written by Persist into the store in one
// transaction: either all of it shows or, on error, none. It is meant for a
// fresh store (the FSM restores into a new one and swaps it in); rows of a
// non-empty store that the snapshot lacks are kept.
func (s *StateStore) Restore(r io.Reader) error {
	txn := s.db.Txn(true)
	defer txn.Abort()
	if err := persist.Read(r, txn.Insert); err != nil {
		return err
	}
	txn.Commit()
	return nil
}

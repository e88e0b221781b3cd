package state

import (
	"github.com/drover-org/drover/core/structs"
)

// Txn is one write transaction at one Raft index, for an entry that writes
// several things (a job, its launch record and its eval). Either all of it
// commits or none of it: a reader, blocking on the index or not, never sees
// a job without the eval that came with it, and an entry the store refuses
// half-way leaves nothing behind.
//
// Reads through a Txn see its own writes. The deferred work of every write
// (job statuses, summaries, table indexes) runs once, at commit, over the
// whole transaction. A Txn is valid only inside the function given to WriteTxn.
type Txn struct{ t *writeTxn }

// WriteTxn runs fn in one write transaction at index, stamped with the
// handle's time (see At), and commits it when fn and the deferred work
// succeed. On error nothing is written.
func (s *StateStore) WriteTxn(index uint64, fn func(tx *Txn) error) error {
	return s.write(index, func(t *writeTxn) error { return fn(&Txn{t: t}) })
}

// UpsertJob is StateStore.UpsertJob inside the transaction.
func (tx *Txn) UpsertJob(job *structs.Job) error { return tx.t.upsertJob(job) }

// DeleteJob is StateStore.DeleteJob inside the transaction.
func (tx *Txn) DeleteJob(ns, id string) error { return tx.t.deleteJob(ns, id) }

// UpsertEvals is StateStore.UpsertEvals inside the transaction. An empty
// list still moves the evals table's index.
func (tx *Txn) UpsertEvals(evals []*structs.Evaluation) error { return tx.t.upsertEvals(evals) }

// UpsertPeriodicLaunch is StateStore.UpsertPeriodicLaunch inside the
// transaction.
func (tx *Txn) UpsertPeriodicLaunch(l *structs.PeriodicLaunch) error {
	return tx.t.upsertPeriodicLaunch(l)
}

// UpdateAllocsFromClient is StateStore.UpdateAllocsFromClient inside the
// transaction.
func (tx *Txn) UpdateAllocsFromClient(allocs []*structs.Allocation) error {
	return tx.t.updateAllocsFromClient(allocs)
}

// JobByID reads a job as the transaction has it so far, or nil. Its status
// is derived at commit, so a job written in this transaction may not carry
// its final status yet.
func (tx *Txn) JobByID(ns, id string) (*structs.Job, error) { return tx.t.job(ns, id) }

// JobsByParent reads the children of a parent job as the transaction has
// them so far.
func (tx *Txn) JobsByParent(ns, parentID string) ([]*structs.Job, error) {
	return appendList[*structs.Job](tx.t.txn, nil, nil, nil, TableJobs, "parent", ns, parentID)
}

// PeriodicLaunchByID reads a launch record as the transaction has it so
// far, or nil.
func (tx *Txn) PeriodicLaunchByID(ns, id string) (*structs.PeriodicLaunch, error) {
	raw, err := tx.t.first(TablePeriodicLaunch, "id", ns, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.PeriodicLaunch), nil
}

// NamespaceExists reports whether a namespace exists as the transaction
// has it so far; the default namespace always does.
func (tx *Txn) NamespaceExists(name string) (bool, error) {
	if name == structs.DefaultNamespace {
		return true, nil
	}
	raw, err := tx.t.first(TableNamespaces, "id", name)
	return raw != nil, err
}

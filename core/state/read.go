package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// This file holds the generic read helpers and the readers of allocs, evals,
// nodes and the rest; job readers are in read_jobs.go. Every reader runs in
// its own read transaction, so a single call is consistent; use a
// StateSnapshot when several reads must agree with each other.

// first returns the single object an index lookup finds, watching it.
func first[T any](s *StateStore, ws memdb.WatchSet, table, index string, args ...any) (T, error) {
	var zero T
	ch, raw, err := s.db.Txn(false).FirstWatch(table, index, args...)
	if err != nil {
		return zero, fmt.Errorf("state: read %s: %w", table, err)
	}
	ws.Add(ch)
	if raw == nil {
		return zero, nil
	}
	return raw.(T), nil
}

// list returns every object an index lookup finds, keeping those keep
// accepts (nil keeps all), and watches the whole range.
func list[T any](s *StateStore, ws memdb.WatchSet, keep func(T) bool, table, index string, args ...any) ([]T, error) {
	return appendList(s.db.Txn(false), nil, ws, keep, table, index, args...)
}

// appendList is list in a given transaction, appending to out.
func appendList[T any](txn *memdb.Txn, out []T, ws memdb.WatchSet, keep func(T) bool, table, index string, args ...any) ([]T, error) {
	iter, err := txn.Get(table, index, args...)
	if err != nil {
		return nil, fmt.Errorf("state: read %s: %w", table, err)
	}
	ws.Add(iter.WatchCh())
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		v := raw.(T)
		if keep == nil || keep(v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// inNamespace keeps objects of ns; AllNamespaces and "" keep everything.
func inNamespace[T any](ns string, nsOf func(T) string) func(T) bool {
	if ns == AllNamespaces || ns == "" {
		return nil
	}
	return func(v T) bool { return nsOf(v) == ns }
}

func allocNS(a *structs.Allocation) string { return a.Namespace }
func evalNS(e *structs.Evaluation) string  { return e.Namespace }

// AllocByID returns an allocation, or nil.
func (s *StateStore) AllocByID(ws memdb.WatchSet, id string) (*structs.Allocation, error) {
	return first[*structs.Allocation](s, ws, TableAllocs, "id", id)
}

// Allocs returns every allocation.
func (s *StateStore) Allocs(ws memdb.WatchSet) ([]*structs.Allocation, error) {
	return list[*structs.Allocation](s, ws, nil, TableAllocs, "id")
}

// AllocsByIDPrefix returns the allocations of ns (every namespace for
// AllNamespaces or "") whose ID starts with prefix.
func (s *StateStore) AllocsByIDPrefix(ws memdb.WatchSet, ns, prefix string) ([]*structs.Allocation, error) {
	return list(s, ws, inNamespace(ns, allocNS), TableAllocs, "id_prefix", prefix)
}

// AllocList is AllocsByIDPrefix; an empty prefix lists every allocation.
func (s *StateStore) AllocList(ws memdb.WatchSet, ns, prefix string) ([]*structs.Allocation, error) {
	return s.AllocsByIDPrefix(ws, ns, prefix)
}

// AllocsByJob returns a job's allocations. Unless anyCreateIndex is set,
// only those of the current job instance are returned: a job purged and
// registered again under the same ID does not inherit its predecessor's
// allocations. When the job does not exist, all are returned.
func (s *StateStore) AllocsByJob(ws memdb.WatchSet, ns, jobID string, anyCreateIndex bool) ([]*structs.Allocation, error) {
	txn := s.db.Txn(false)
	var keep func(*structs.Allocation) bool
	if !anyCreateIndex {
		raw, err := txn.First(TableJobs, "id", ns, jobID)
		if err != nil {
			return nil, fmt.Errorf("state: read %s: %w", TableJobs, err)
		}
		if raw != nil {
			created := raw.(*structs.Job).CreateIndex
			keep = func(a *structs.Allocation) bool { return a.Job == nil || a.Job.CreateIndex == created }
		}
	}
	return appendList(txn, nil, ws, keep, TableAllocs, "job", ns, jobID)
}

// AllocsByNode returns every allocation placed on a node, live ones first.
func (s *StateStore) AllocsByNode(ws memdb.WatchSet, nodeID string) ([]*structs.Allocation, error) {
	txn := s.db.Txn(false) // one view for both halves
	out, err := appendList[*structs.Allocation](txn, nil, ws, nil, TableAllocs, "node_terminal", nodeID, false)
	if err != nil {
		return nil, err
	}
	return appendList(txn, out, ws, nil, TableAllocs, "node_terminal", nodeID, true)
}

// AllocsByNodeTerminal returns a node's allocations whose TerminalStatus is
// terminal.
func (s *StateStore) AllocsByNodeTerminal(ws memdb.WatchSet, nodeID string, terminal bool) ([]*structs.Allocation, error) {
	return list[*structs.Allocation](s, ws, nil, TableAllocs, "node_terminal", nodeID, terminal)
}

// AllocsByEval returns the allocations an evaluation created or updated.
func (s *StateStore) AllocsByEval(ws memdb.WatchSet, evalID string) ([]*structs.Allocation, error) {
	return list[*structs.Allocation](s, ws, nil, TableAllocs, "eval", evalID)
}

// EvalByID returns an evaluation, or nil.
func (s *StateStore) EvalByID(ws memdb.WatchSet, id string) (*structs.Evaluation, error) {
	return first[*structs.Evaluation](s, ws, TableEvals, "id", id)
}

// Evals returns every evaluation.
func (s *StateStore) Evals(ws memdb.WatchSet) ([]*structs.Evaluation, error) {
	return list[*structs.Evaluation](s, ws, nil, TableEvals, "id")
}

// EvalsByIDPrefix returns the evaluations of ns (every namespace for
// AllNamespaces or "") whose ID starts with prefix.
func (s *StateStore) EvalsByIDPrefix(ws memdb.WatchSet, ns, prefix string) ([]*structs.Evaluation, error) {
	return list(s, ws, inNamespace(ns, evalNS), TableEvals, "id_prefix", prefix)
}

// EvalList is EvalsByIDPrefix; an empty prefix lists every evaluation.
func (s *StateStore) EvalList(ws memdb.WatchSet, ns, prefix string) ([]*structs.Evaluation, error) {
	return s.EvalsByIDPrefix(ws, ns, prefix)
}

// EvalsByJob returns a job's evaluations.
func (s *StateStore) EvalsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Evaluation, error) {
	return list[*structs.Evaluation](s, ws, nil, TableEvals, "job", ns, jobID)
}

// NodeByID returns a node, or nil.
func (s *StateStore) NodeByID(ws memdb.WatchSet, id string) (*structs.Node, error) {
	return first[*structs.Node](s, ws, TableNodes, "id", id)
}

// Nodes returns every node.
func (s *StateStore) Nodes(ws memdb.WatchSet) ([]*structs.Node, error) {
	return list[*structs.Node](s, ws, nil, TableNodes, "id")
}

// NodesByIDPrefix returns the nodes whose ID starts with prefix.
func (s *StateStore) NodesByIDPrefix(ws memdb.WatchSet, prefix string) ([]*structs.Node, error) {
	return list[*structs.Node](s, ws, nil, TableNodes, "id_prefix", prefix)
}

// NodeList is NodesByIDPrefix; an empty prefix lists every node.
func (s *StateStore) NodeList(ws memdb.WatchSet, prefix string) ([]*structs.Node, error) {
	return s.NodesByIDPrefix(ws, prefix)
}

// NodeBySecretID returns the node that holds a secret, or nil.
func (s *StateStore) NodeBySecretID(ws memdb.WatchSet, secret string) (*structs.Node, error) {
	if secret == "" {
		return nil, nil
	}
	return first[*structs.Node](s, ws, TableNodes, "secret_id", secret)
}

// NodesByPool returns the nodes of a node pool; the "all" pool holds every
// node.
func (s *StateStore) NodesByPool(ws memdb.WatchSet, pool string) ([]*structs.Node, error) {
	if pool == structs.NodePoolAll {
		return s.Nodes(ws)
	}
	return list[*structs.Node](s, ws, nil, TableNodes, "pool", pool)
}

// PeriodicLaunchByID returns the last launch of a periodic parent, or nil.
func (s *StateStore) PeriodicLaunchByID(ws memdb.WatchSet, ns, id string) (*structs.PeriodicLaunch, error) {
	return first[*structs.PeriodicLaunch](s, ws, TablePeriodicLaunch, "id", ns, id)
}

// PeriodicLaunches returns every launch record.
func (s *StateStore) PeriodicLaunches(ws memdb.WatchSet) ([]*structs.PeriodicLaunch, error) {
	return list[*structs.PeriodicLaunch](s, ws, nil, TablePeriodicLaunch, "id")
}

// SchedulerConfig returns the scheduler configuration and the index that
// last set it; (0, default configuration) when it was never set.
func (s *StateStore) SchedulerConfig() (uint64, *structs.SchedulerConfiguration, error) {
	c, err := first[*structs.SchedulerConfiguration](s, nil, TableSchedulerConfig, "id")
	if err != nil {
		return 0, nil, err
	}
	if c == nil {
		return 0, structs.DefaultSchedulerConfig(), nil
	}
	return c.ModifyIndex, c, nil
}

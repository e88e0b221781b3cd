package state

import (
	"sort"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// TableNodePools holds the node pools operators created and those nodes
// registered into. The built-in pools ("default", "all") are never stored:
// they are synthesized on read, so they exist from init and across any
// snapshot restore, and no write can change them.
const TableNodePools = schema.TableNodePools

// builtinPoolRefusal is the refusal of a write to a built-in pool.
func builtinPoolRefusal(verb, name string) error {
	return structs.NewError(structs.ErrInvalid, "node pool %q: %s a built-in node pool is not allowed", name, verb)
}

// UpsertNodePools creates or updates node pools in one transaction: all of
// them or, when one is refused, none. Built-in pools are refused.
func (s *StateStore) UpsertNodePools(index uint64, pools []*structs.NodePool) error {
	copies := make([]*structs.NodePool, 0, len(pools))
	for _, p := range pools {
		if err := p.Validate(); err != nil {
			return err
		}
		if structs.IsBuiltinNodePool(p.Name) {
			return builtinPoolRefusal("modifying", p.Name)
		}
		copies = append(copies, p.Copy())
	}
	return s.write(index, func(t *writeTxn) error {
		for _, p := range copies {
			if err := t.upsertNodePool(p); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *writeTxn) upsertNodePool(p *structs.NodePool) error {
	raw, err := t.first(TableNodePools, "id", p.Name)
	if err != nil {
		return err
	}
	p.CreateIndex = t.index
	if raw != nil {
		p.CreateIndex = raw.(*structs.NodePool).CreateIndex
	}
	p.ModifyIndex = t.index
	return t.insert(TableNodePools, p)
}

// ensureNodePool creates the pool a node registers into when it does not
// exist yet, as Nomad does. A built-in pool or a name that breaks the
// naming rule (the endpoint refuses those; an old log entry may carry one)
// is left alone: applying a node registration never fails on its pool.
func (t *writeTxn) ensureNodePool(name string) error {
	if name == "" || structs.IsBuiltinNodePool(name) || !structs.ValidNodePoolName(name) {
		return nil
	}
	raw, err := t.first(TableNodePools, "id", name)
	if err != nil || raw != nil {
		return err
	}
	return t.upsertNodePool(&structs.NodePool{Name: name})
}

// NodePoolByName returns a node pool, or nil when it does not exist.
func (s *StateStore) NodePoolByName(ws memdb.WatchSet, name string) (*structs.NodePool, error) {
	p, err := first[*structs.NodePool](s, ws, TableNodePools, "id", name)
	if err == nil && p == nil && structs.IsBuiltinNodePool(name) {
		for _, b := range structs.BuiltinNodePools() {
			if b.Name == name {
				return b, nil
			}
		}
	}
	return p, err
}

// NodePools returns every node pool whose name starts with prefix, sorted
// by name, the built-in pools included.
func (s *StateStore) NodePools(ws memdb.WatchSet, prefix string) ([]*structs.NodePool, error) {
	all, err := list[*structs.NodePool](s, ws, nil, TableNodePools, "id")
	if err != nil {
		return nil, err
	}
	var out []*structs.NodePool
	for _, p := range append(structs.BuiltinNodePools(), all...) {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// JobsByNodePool returns the jobs of namespace ns (AllNamespaces: every
// namespace) that run in pool; the "all" pool holds every job.
func (s *StateStore) JobsByNodePool(ws memdb.WatchSet, ns, pool string) ([]*structs.Job, error) {
	jobs, err := s.JobList(ws, ns, "")
	if err != nil || pool == structs.NodePoolAll {
		return jobs, err
	}
	out := jobs[:0:0]
	for _, j := range jobs {
		if jobPool(j) == pool {
			out = append(out, j)
		}
	}
	return out, nil
}

func jobPool(j *structs.Job) string {
	if j.NodePool == "" {
		return structs.NodePoolDefault
	}
	return j.NodePool
}

// DeleteNodePools removes node pools in one transaction, refusing them all
// (nothing written) when any one is refused: a built-in pool, a pool that
// does not exist (structs.ErrNotFound), one that still has nodes, or one
// that non-terminal jobs run in (structs.ErrInvalid).
func (s *StateStore) DeleteNodePools(index uint64, names []string) error {
	for _, name := range names {
		if structs.IsBuiltinNodePool(name) {
			return builtinPoolRefusal("deleting", name)
		}
	}
	return s.write(index, func(t *writeTxn) error {
		for _, name := range names {
			if err := t.deleteNodePool(name); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *writeTxn) deleteNodePool(name string) error {
	raw, err := t.first(TableNodePools, "id", name)
	if err != nil {
		return err
	}
	if raw == nil {
		return structs.NewError(structs.ErrNotFound, "node pool not found: %s", name)
	}
	if err := nodePoolInUse(t.txn, name); err != nil {
		return err
	}
	return t.delete(TableNodePools, raw)
}

// nodePoolInUse refuses (structs.ErrInvalid) a pool that holds a node or
// a non-terminal job, naming one of them.
func nodePoolInUse(txn *memdb.Txn, name string) error {
	node, err := txn.First(TableNodes, "pool", name)
	if err != nil {
		return err
	}
	if node != nil {
		return structs.NewError(structs.ErrInvalid, "node pool %q: has nodes (e.g. %s); move or remove them first", name, node.(*structs.Node).ID)
	}
	iter, err := txn.Get(TableJobs, "id")
	if err != nil {
		return err
	}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		j := raw.(*structs.Job)
		if jobPool(j) == name && j.Status != structs.JobStatusDead {
			return structs.NewError(structs.ErrInvalid, "node pool %q: has non-terminal jobs (e.g. %q in namespace %q); stop them first", name, j.ID, j.Namespace)
		}
	}
	return nil
}

// NodePoolInUse is the check DeleteNodePools makes, for an endpoint to
// refuse before proposing anything: nil when the pool may be deleted.
func (s *StateStore) NodePoolInUse(name string) error {
	return nodePoolInUse(s.db.Txn(false), name)
}

// NodePoolExists reports whether a node pool exists as the transaction has
// it so far; the built-in pools always do.
func (tx *Txn) NodePoolExists(name string) (bool, error) {
	if structs.IsBuiltinNodePool(name) {
		return true, nil
	}
	raw, err := tx.t.first(TableNodePools, "id", name)
	return raw != nil, err
}

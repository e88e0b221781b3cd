package state

import (
	"sort"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// UpsertNamespace creates or updates a namespace, keeping its CreateIndex.
func (s *StateStore) UpsertNamespace(index uint64, ns *structs.Namespace) error {
	return s.UpsertNamespaces(index, []*structs.Namespace{ns})
}

// UpsertNamespaces creates or updates namespaces in one transaction: all
// of them or, when one does not validate, none.
func (s *StateStore) UpsertNamespaces(index uint64, namespaces []*structs.Namespace) error {
	copies := make([]*structs.Namespace, 0, len(namespaces))
	for _, ns := range namespaces {
		if err := ns.Validate(); err != nil {
			return err
		}
		copies = append(copies, ns.Copy())
	}
	return s.write(index, func(t *writeTxn) error {
		for _, ns := range copies {
			raw, err := t.first(TableNamespaces, "id", ns.Name)
			if err != nil {
				return err
			}
			ns.CreateIndex = t.index
			if raw != nil {
				ns.CreateIndex = raw.(*structs.Namespace).CreateIndex
			}
			ns.ModifyIndex = t.index
			if err := t.insert(TableNamespaces, ns); err != nil {
				return err
			}
		}
		return nil
	})
}

// defaultNamespace is synthesized on read when the table holds no row for
// it, so it exists from init and across any snapshot restore.
func defaultNamespace() *structs.Namespace {
	return &structs.Namespace{Name: structs.DefaultNamespace, Description: "Default shared namespace"}
}

// NamespaceByName returns a namespace, or nil when it does not exist.
func (s *StateStore) NamespaceByName(ws memdb.WatchSet, name string) (*structs.Namespace, error) {
	ns, err := first[*structs.Namespace](s, ws, TableNamespaces, "id", name)
	if err == nil && ns == nil && name == structs.DefaultNamespace {
		return defaultNamespace(), nil
	}
	return ns, err
}

// Namespaces returns every namespace whose name starts with prefix, sorted
// by name, the default namespace included.
func (s *StateStore) Namespaces(ws memdb.WatchSet, prefix string) ([]*structs.Namespace, error) {
	all, err := list[*structs.Namespace](s, ws, nil, TableNamespaces, "id")
	if err != nil {
		return nil, err
	}
	var out []*structs.Namespace
	haveDefault := false
	for _, ns := range all {
		if ns.Name == structs.DefaultNamespace {
			haveDefault = true
		}
		if strings.HasPrefix(ns.Name, prefix) {
			out = append(out, ns)
		}
	}
	if !haveDefault && strings.HasPrefix(structs.DefaultNamespace, prefix) {
		out = append(out, defaultNamespace())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteNamespace removes a namespace. The default namespace and a
// namespace that still holds jobs are refused with structs.ErrInvalid; a
// missing one with structs.ErrNotFound. Nothing is written on refusal.
func (s *StateStore) DeleteNamespace(index uint64, name string) error {
	return s.DeleteNamespaces(index, []string{name})
}

// DeleteNamespaces removes namespaces in one transaction, refusing them
// all (nothing written) when any one is refused as DeleteNamespace would.
func (s *StateStore) DeleteNamespaces(index uint64, names []string) error {
	for _, name := range names {
		if name == structs.DefaultNamespace {
			return structs.NewError(structs.ErrInvalid, "namespace %q: the default namespace cannot be deleted", name)
		}
	}
	return s.write(index, func(t *writeTxn) error {
		for _, name := range names {
			if err := t.deleteNamespace(name); err != nil {
				return err
			}
		}
		return nil
	})
}

func (t *writeTxn) deleteNamespace(name string) error {
	raw, err := t.first(TableNamespaces, "id", name)
	if err != nil {
		return err
	}
	if raw == nil {
		return structs.NewError(structs.ErrNotFound, "namespace not found: %s", name)
	}
	job, err := t.first(TableJobs, "namespace", name)
	if err != nil {
		return err
	}
	if job != nil {
		return structs.NewError(structs.ErrInvalid, "namespace %q: has jobs (e.g. %q); stop and purge them first", name, job.(*structs.Job).ID)
	}
	return t.delete(TableNamespaces, raw)
}

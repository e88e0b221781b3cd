package state

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// UpsertNamespace creates or updates a namespace, keeping its CreateIndex.
func (s *StateStore) UpsertNamespace(index uint64, ns *structs.Namespace) error {
	if err := ns.Validate(); err != nil {
		return err
	}
	ns = ns.Copy()
	return s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TableNamespaces, "id", ns.Name)
		if err != nil {
			return err
		}
		ns.CreateIndex = t.index
		if raw != nil {
			ns.CreateIndex = raw.(*structs.Namespace).CreateIndex
		}
		ns.ModifyIndex = t.index
		return t.insert(TableNamespaces, ns)
	})
}

// NamespaceByName returns a namespace, or nil when it does not exist.
func (s *StateStore) NamespaceByName(ws memdb.WatchSet, name string) (*structs.Namespace, error) {
	return first[*structs.Namespace](s, ws, TableNamespaces, "id", name)
}

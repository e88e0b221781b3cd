package state

import (
	"reflect"
	"sort"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// TableServiceRegistrations holds the native (provider "nomad") service
// registrations of running allocations, one row per service and
// allocation. Clients write them; the store deletes an allocation's rows
// when it becomes client-terminal or is reaped, and a node's when the node
// goes down or is deleted, in the transaction that makes that change.
const TableServiceRegistrations = schema.TableServiceRegistrations

// UpsertServiceRegistrations stores registrations: a new one gets index as
// its CreateIndex, an existing one keeps its CreateIndex; both get index as
// ModifyIndex. A registration equal to the stored one (indexes aside) is
// not written again, so a client re-sending unchanged results wakes no
// reader. Registrations without an ID, of an allocation that is unknown or
// client-terminal (it stopped after the server accepted them), or of a
// node that is unknown or down, are skipped: a Raft entry never fails to
// apply.
func (s *StateStore) UpsertServiceRegistrations(index uint64, regs []*structs.ServiceRegistration) error {
	return s.write(index, func(t *writeTxn) error { return t.upsertServiceRegistrations(regs) })
}

// UpsertServiceRegistrations is StateStore.UpsertServiceRegistrations
// inside the transaction.
func (tx *Txn) UpsertServiceRegistrations(regs []*structs.ServiceRegistration) error {
	return tx.t.upsertServiceRegistrations(regs)
}

func (t *writeTxn) upsertServiceRegistrations(regs []*structs.ServiceRegistration) error {
	// Whether each alloc and node may register, looked up once: an
	// update carries many services of few allocs on one node.
	liveAlloc, liveNode := map[string]bool{}, map[string]bool{}
	for _, r := range regs {
		if r == nil || r.ID == "" || r.ServiceName == "" || r.AllocID == "" {
			continue
		}
		live, seen := liveAlloc[r.AllocID]
		if !seen {
			a, err := t.alloc(r.AllocID)
			if err != nil {
				return err
			}
			live = a != nil && !a.ClientTerminalStatus()
			liveAlloc[r.AllocID] = live
		}
		if !live {
			continue
		}
		// A node that is down serves none of its services; one that
		// registers while it goes down is not believed.
		up, seen := liveNode[r.NodeID]
		if !seen {
			n, err := t.node(r.NodeID)
			if err != nil {
				return err
			}
			up = n != nil && n.Status != structs.NodeStatusDown
			liveNode[r.NodeID] = up
		}
		if !up {
			continue
		}
		raw, err := t.first(TableServiceRegistrations, "id", r.ID)
		if err != nil {
			return err
		}
		c := *r
		if raw != nil {
			old := raw.(*structs.ServiceRegistration)
			c.CreateIndex, c.ModifyIndex = old.CreateIndex, old.ModifyIndex
			if reflect.DeepEqual(&c, old) {
				continue
			}
			// Insert replaces the row of the same ID and moves only the
			// index entries whose keys changed.
		} else {
			c.CreateIndex = t.index
		}
		c.ModifyIndex = t.index
		if err := t.insert(TableServiceRegistrations, &c); err != nil {
			return err
		}
	}
	return nil
}

// DeleteServiceRegistrationByID deletes one registration of namespace ns
// ("" or "*": any). A missing one is no error.
func (s *StateStore) DeleteServiceRegistrationByID(index uint64, ns, id string) error {
	return s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TableServiceRegistrations, "id", id)
		if err != nil || raw == nil {
			return err
		}
		r := raw.(*structs.ServiceRegistration)
		if ns != "" && ns != AllNamespaces && r.Namespace != ns {
			return nil
		}
		return t.delete(TableServiceRegistrations, r)
	})
}

// DeleteServiceRegistrationsByNodeID deletes every registration of a node.
func (s *StateStore) DeleteServiceRegistrationsByNodeID(index uint64, nodeID string) error {
	return s.write(index, func(t *writeTxn) error { return t.deleteServicesBy("node", nodeID) })
}

// DeleteServiceRegistrationsByAllocIDs deletes every registration of the
// allocations.
func (s *StateStore) DeleteServiceRegistrationsByAllocIDs(index uint64, allocIDs []string) error {
	return s.write(index, func(t *writeTxn) error {
		for _, id := range allocIDs {
			if err := t.deleteServicesBy("alloc", id); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteServiceRegistrationsByAllocIDs is
// StateStore.DeleteServiceRegistrationsByAllocIDs inside the transaction.
func (tx *Txn) DeleteServiceRegistrationsByAllocIDs(allocIDs []string) error {
	for _, id := range allocIDs {
		if err := tx.t.deleteServicesBy("alloc", id); err != nil {
			return err
		}
	}
	return nil
}

// deleteServicesBy deletes the registrations an index ("alloc" or "node")
// finds for key. The table's index moves only when a row goes.
func (t *writeTxn) deleteServicesBy(index, key string) error {
	if key == "" {
		return nil
	}
	rows, err := appendList[*structs.ServiceRegistration](t.txn, nil, nil, nil, TableServiceRegistrations, index, key)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := t.delete(TableServiceRegistrations, r); err != nil {
			return err
		}
	}
	return nil
}

func serviceNS(r *structs.ServiceRegistration) string { return r.Namespace }

// ServiceRegistrations lists the registrations of namespace ns ("*" or "":
// all), ordered by ID.
func (s *StateStore) ServiceRegistrations(ws memdb.WatchSet, ns string) ([]*structs.ServiceRegistration, error) {
	return list(s, ws, inNamespace(ns, serviceNS), TableServiceRegistrations, "id")
}

// ServiceRegistrationsByName lists the registrations of one service of
// namespace ns, ordered by ID.
func (s *StateStore) ServiceRegistrationsByName(ws memdb.WatchSet, ns, name string) ([]*structs.ServiceRegistration, error) {
	out, err := list[*structs.ServiceRegistration](s, ws, nil, TableServiceRegistrations, "service_name", ns, name)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ServiceRegistrationByID returns a registration, or nil.
func (s *StateStore) ServiceRegistrationByID(ws memdb.WatchSet, id string) (*structs.ServiceRegistration, error) {
	return first[*structs.ServiceRegistration](s, ws, TableServiceRegistrations, "id", id)
}

// ServiceRegistrationsByAllocID lists an allocation's registrations.
func (s *StateStore) ServiceRegistrationsByAllocID(ws memdb.WatchSet, allocID string) ([]*structs.ServiceRegistration, error) {
	return list[*structs.ServiceRegistration](s, ws, nil, TableServiceRegistrations, "alloc", allocID)
}

// ServiceRegistrationsByNodeID lists a node's registrations.
func (s *StateStore) ServiceRegistrationsByNodeID(ws memdb.WatchSet, nodeID string) ([]*structs.ServiceRegistration, error) {
	return list[*structs.ServiceRegistration](s, ws, nil, TableServiceRegistrations, "node", nodeID)
}

// ServiceRegistrationsByJobID lists a job's registrations.
func (s *StateStore) ServiceRegistrationsByJobID(ws memdb.WatchSet, ns, jobID string) ([]*structs.ServiceRegistration, error) {
	return list[*structs.ServiceRegistration](s, ws, nil, TableServiceRegistrations, "job", ns, jobID)
}

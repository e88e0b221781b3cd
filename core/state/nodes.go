package state

import (
	"github.com/drover-org/drover/core/structs"
)

// Drain statuses recorded in Node.LastDrain, as Nomad names them.
const (
	DrainStatusDraining = "draining"
	DrainStatusComplete = "complete"
	DrainStatusCanceled = "canceled"
)

// MaxRetainedNodeEvents bounds Node.Events; the oldest are dropped first.
const MaxRetainedNodeEvents = 10

// UpsertNode registers a node or updates its fingerprint. An existing node
// keeps its CreateIndex, events, SchedulingEligibility, DrainStrategy and
// LastDrain: those belong to the operator and the drainer, and a client
// re-registering (which sends its own view) must not undo a drain or an
// eligibility change. A new node without an eligibility is eligible, unless
// it arrives draining. The evals the registration causes are written in the
// same transaction (see writeNodeEvals).
func (s *StateStore) UpsertNode(index uint64, node *structs.Node, evals ...*structs.Evaluation) error {
	if node == nil || node.ID == "" {
		return structs.NewError(structs.ErrInvalid, "node: missing node ID")
	}
	return s.write(index, func(t *writeTxn) error {
		existing, err := t.node(node.ID)
		if err != nil {
			return err
		}
		if existing != nil {
			node.CreateIndex = existing.CreateIndex
			node.SchedulingEligibility = existing.SchedulingEligibility
			node.DrainStrategy = existing.DrainStrategy
			node.LastDrain = existing.LastDrain
			node.Events = existing.Events
			if existing.Status == structs.NodeStatusDown && node.Status != structs.NodeStatusDown {
				t.appendNodeEvent(node, &structs.NodeEvent{Message: "Node re-registered", Subsystem: "Cluster", Timestamp: t.now})
			}
		} else {
			node.CreateIndex = t.index
			switch {
			case node.DrainStrategy != nil:
				node.SchedulingEligibility = structs.NodeSchedulingIneligible
			case node.SchedulingEligibility == "":
				node.SchedulingEligibility = structs.NodeSchedulingEligible
			}
			if len(node.Events) == 0 {
				t.appendNodeEvent(node, &structs.NodeEvent{Message: "Node registered", Subsystem: "Cluster", Timestamp: t.now})
			}
			for _, ev := range node.Events {
				if ev != nil && ev.CreateIndex == 0 {
					ev.CreateIndex = t.index
				}
			}
		}
		node.ModifyIndex = t.index
		if err := t.insert(TableNodes, node); err != nil {
			return err
		}
		if err := t.foldNodePlugins(existing, node); err != nil {
			return err
		}
		// A node registering into a pool that does not exist creates it.
		if err := t.ensureNodePool(node.NodePool); err != nil {
			return err
		}
		return t.writeNodeEvals(node.ID, evals)
	})
}

// DeleteNode removes nodes. It fails with structs.ErrNotFound, deleting
// nothing, when any of them does not exist.
func (s *StateStore) DeleteNode(index uint64, ids []string) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableNodes] = struct{}{}
		for _, id := range ids {
			n, err := t.node(id)
			if err != nil {
				return err
			}
			if n == nil {
				return structs.NewError(structs.ErrNotFound, "node not found: %s", id)
			}
			if err := t.delete(TableNodes, n); err != nil {
				return err
			}
			if err := t.dropNodePlugins(n); err != nil {
				return err
			}
			// Its allocations' claims have no client left to release them.
			if err := t.touchNodeClaims(n.ID); err != nil {
				return err
			}
			if err := t.deleteServicesBy("node", n.ID); err != nil {
				return err
			}
		}
		return nil
	})
}

// UpdateNodeStatus sets a node's status and StatusUpdatedAt (unix seconds)
// and records ev when given, with the evals the change causes.
func (s *StateStore) UpdateNodeStatus(index uint64, nodeID, status string, updatedAt int64, ev *structs.NodeEvent, evals ...*structs.Evaluation) error {
	return s.updateNode(index, nodeID, ev, evals, func(t *writeTxn, existing, n *structs.Node) error {
		n.Status = status
		n.StatusUpdatedAt = updatedAt
		// A node that is down serves none of its services.
		if status == structs.NodeStatusDown {
			return t.deleteServicesBy("node", n.ID)
		}
		return nil
	})
}

// UpdateNodeDrain sets or clears a node's drain. Setting a drain makes the
// node ineligible and records LastDrain as draining. Clearing it makes the
// node eligible again only when markEligible is set; the last drain is then
// recorded as canceled (an operator ended it early and gave the node back),
// and as complete otherwise (the drainer finished and leaves the node
// ineligible).
func (s *StateStore) UpdateNodeDrain(index uint64, nodeID string, drain *structs.DrainStrategy, markEligible bool, updatedAt int64, ev *structs.NodeEvent) error {
	return s.UpdateNodeDrainWithMeta(index, nodeID, drain, markEligible, updatedAt, ev, nil)
}

// UpdateNodeDrainWithMeta is UpdateNodeDrain that also records the
// operator's metadata of a drain (`node drain -meta`) in LastDrain, and
// writes the evals the change causes.
func (s *StateStore) UpdateNodeDrainWithMeta(index uint64, nodeID string, drain *structs.DrainStrategy, markEligible bool, updatedAt int64, ev *structs.NodeEvent, meta map[string]string, evals ...*structs.Evaluation) error {
	return s.updateNode(index, nodeID, ev, evals, func(t *writeTxn, existing, n *structs.Node) error {
		n.DrainStrategy = drain
		if updatedAt != 0 {
			n.StatusUpdatedAt = updatedAt
		}
		var last structs.DrainMetadata
		if existing.LastDrain != nil {
			last = *existing.LastDrain
		}
		switch {
		case drain != nil:
			n.SchedulingEligibility = structs.NodeSchedulingIneligible
			if existing.DrainStrategy == nil || existing.LastDrain == nil {
				last = structs.DrainMetadata{StartedAt: t.now}
				if !drain.StartedAt.IsZero() {
					last.StartedAt = drain.StartedAt
				}
			}
			last.Status = DrainStatusDraining
		case existing.DrainStrategy != nil:
			last.Status = DrainStatusComplete
			if markEligible {
				last.Status = DrainStatusCanceled
			}
		}
		if drain == nil && markEligible {
			n.SchedulingEligibility = structs.NodeSchedulingEligible
		}
		if drain != nil || existing.DrainStrategy != nil {
			last.UpdatedAt = t.now
			if meta != nil {
				last.Meta = meta
			}
			n.LastDrain = &last
		}
		return nil
	})
}

// UpdateNodeEligibility sets a node's scheduling eligibility. A draining node
// cannot be made eligible: the drain must be cancelled instead. The evals the
// change causes are written with it.
func (s *StateStore) UpdateNodeEligibility(index uint64, nodeID, eligibility string, updatedAt int64, ev *structs.NodeEvent, evals ...*structs.Evaluation) error {
	if eligibility != structs.NodeSchedulingEligible && eligibility != structs.NodeSchedulingIneligible {
		return structs.NewError(structs.ErrInvalid, "invalid scheduling eligibility %q", eligibility)
	}
	return s.updateNode(index, nodeID, ev, evals, func(t *writeTxn, existing, n *structs.Node) error {
		if existing.DrainStrategy != nil && eligibility == structs.NodeSchedulingEligible {
			return structs.NewError(structs.ErrInvalid, "can not set node's scheduling eligibility to eligible while it is draining")
		}
		n.SchedulingEligibility = eligibility
		if updatedAt != 0 {
			n.StatusUpdatedAt = updatedAt
		}
		return nil
	})
}

// updateNode applies fn to a copy of a stored node and stores it, with the
// evals the change causes. The copy is shallow: fn replaces fields and never
// modifies what they point to.
func (s *StateStore) updateNode(index uint64, nodeID string, ev *structs.NodeEvent, evals []*structs.Evaluation, fn func(t *writeTxn, existing, n *structs.Node) error) error {
	return s.write(index, func(t *writeTxn) error {
		existing, err := t.node(nodeID)
		if err != nil {
			return err
		}
		if existing == nil {
			return structs.NewError(structs.ErrNotFound, "node not found: %s", nodeID)
		}
		c := *existing
		if err := fn(t, existing, &c); err != nil {
			return err
		}
		if ev != nil {
			t.appendNodeEvent(&c, ev)
		}
		c.ModifyIndex = t.index
		if err := t.insert(TableNodes, &c); err != nil {
			return err
		}
		// A node going down releases nothing itself: the claims of its
		// allocations (those that ended before, and those the scheduler
		// marks lost next) are the watcher's.
		if c.TerminalStatus() && !existing.TerminalStatus() {
			if err := t.touchNodeClaims(nodeID); err != nil {
				return err
			}
		}
		return t.writeNodeEvals(nodeID, evals)
	})
}

// writeNodeEvals writes the evals a node change causes in the change's own
// transaction: a reader (or a new leader) never sees the change without
// them. The leader builds them before the change has an index, so an eval
// of this node without a NodeModifyIndex gets the change's.
func (t *writeTxn) writeNodeEvals(nodeID string, evals []*structs.Evaluation) error {
	if len(evals) == 0 {
		return nil
	}
	for _, e := range evals {
		if e != nil && e.NodeID == nodeID && e.NodeModifyIndex == 0 {
			e.NodeModifyIndex = t.index
		}
	}
	return t.upsertEvals(evals)
}

func (t *writeTxn) node(id string) (*structs.Node, error) {
	raw, err := t.first(TableNodes, "id", id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Node), nil
}

// appendNodeEvent adds ev to a fresh copy of the node's events, keeping the
// newest MaxRetainedNodeEvents.
func (t *writeTxn) appendNodeEvent(n *structs.Node, ev *structs.NodeEvent) {
	ev.CreateIndex = t.index
	if ev.Timestamp.IsZero() {
		ev.Timestamp = t.now
	}
	events := make([]*structs.NodeEvent, 0, len(n.Events)+1)
	events = append(append(events, n.Events...), ev)
	if len(events) > MaxRetainedNodeEvents {
		events = events[len(events)-MaxRetainedNodeEvents:]
	}
	n.Events = events
}

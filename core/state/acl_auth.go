package state

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// Tables of auth methods, binding rules and the autopilot configuration
// (see schema).
const (
	TableACLAuthMethods  = schema.TableACLAuthMethods
	TableACLBindingRules = schema.TableACLBindingRules
	TableAutopilotConfig = schema.TableAutopilotConfig
)

// UpsertACLAuthMethods writes auth methods; an existing one (same name)
// keeps its CreateIndex and CreateTime. At most one method may be the
// Default: a method written as Default takes the flag from the others.
// One invalid method writes none.
func (s *StateStore) UpsertACLAuthMethods(index uint64, methods []*structs.ACLAuthMethod) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableACLAuthMethods] = struct{}{}
		for _, m := range methods {
			if err := m.Validate(); err != nil {
				return err
			}
			raw, err := t.first(TableACLAuthMethods, "id", m.Name)
			if err != nil {
				return err
			}
			m.CreateIndex = index
			if raw != nil {
				old := raw.(*structs.ACLAuthMethod)
				m.CreateIndex, m.CreateTime = old.CreateIndex, old.CreateTime
			}
			m.ModifyIndex = index
			if len(m.Hash) == 0 {
				m.SetHash()
			}
			if m.Default {
				if err := t.clearDefaultAuthMethod(m.Name, index); err != nil {
					return err
				}
			}
			if err := t.insert(TableACLAuthMethods, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// clearDefaultAuthMethod takes the Default flag from every method but
// keep.
func (t *writeTxn) clearDefaultAuthMethod(keep string, index uint64) error {
	iter, err := t.txn.Get(TableACLAuthMethods, "id")
	if err != nil {
		return err
	}
	var others []*structs.ACLAuthMethod
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		if m := raw.(*structs.ACLAuthMethod); m.Default && m.Name != keep {
			others = append(others, m)
		}
	}
	for _, m := range others {
		c := m.Copy()
		c.Default, c.ModifyIndex = false, index
		c.SetHash()
		if err := t.insert(TableACLAuthMethods, c); err != nil {
			return err
		}
	}
	return nil
}

// DeleteACLAuthMethods deletes auth methods by name, with their binding
// rules (as Nomad does). A name that does not exist is
// structs.ErrNotFound and deletes nothing. Tokens made by a login stay
// valid until they expire.
func (s *StateStore) DeleteACLAuthMethods(index uint64, names []string) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableACLAuthMethods] = struct{}{}
		for _, n := range names {
			raw, err := t.first(TableACLAuthMethods, "id", n)
			if err != nil {
				return err
			}
			if raw == nil {
				return structs.NewError(structs.ErrNotFound, "ACL auth method %q not found", n)
			}
			if err := t.delete(TableACLAuthMethods, raw); err != nil {
				return err
			}
			iter, err := t.txn.Get(TableACLBindingRules, "auth_method", n)
			if err != nil {
				return err
			}
			var rules []any
			for r := iter.Next(); r != nil; r = iter.Next() {
				rules = append(rules, r)
			}
			for _, r := range rules {
				t.tables[TableACLBindingRules] = struct{}{}
				if err := t.delete(TableACLBindingRules, r); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// ACLAuthMethodByName returns an auth method, or nil.
func (s *StateStore) ACLAuthMethodByName(ws memdb.WatchSet, name string) (*structs.ACLAuthMethod, error) {
	return first[*structs.ACLAuthMethod](s, ws, TableACLAuthMethods, "id", name)
}

// ACLAuthMethods returns every auth method, by name.
func (s *StateStore) ACLAuthMethods(ws memdb.WatchSet) ([]*structs.ACLAuthMethod, error) {
	return list[*structs.ACLAuthMethod](s, ws, nil, TableACLAuthMethods, "id")
}

// UpsertACLBindingRules writes binding rules; an existing rule (same ID)
// keeps its CreateIndex and CreateTime. Each rule's auth method must
// exist (structs.ErrNotFound otherwise). One bad rule writes none.
func (s *StateStore) UpsertACLBindingRules(index uint64, rules []*structs.ACLBindingRule) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableACLBindingRules] = struct{}{}
		for _, r := range rules {
			if err := r.Validate(); err != nil {
				return err
			}
			if r.ID == "" {
				return structs.NewError(structs.ErrInvalid, "ACL binding rule: missing ID")
			}
			m, err := t.first(TableACLAuthMethods, "id", r.AuthMethod)
			if err != nil {
				return err
			}
			if m == nil {
				return structs.NewError(structs.ErrNotFound, "ACL auth method %q not found", r.AuthMethod)
			}
			raw, err := t.first(TableACLBindingRules, "id", r.ID)
			if err != nil {
				return err
			}
			r.CreateIndex = index
			if raw != nil {
				old := raw.(*structs.ACLBindingRule)
				r.CreateIndex, r.CreateTime = old.CreateIndex, old.CreateTime
			}
			r.ModifyIndex = index
			if len(r.Hash) == 0 {
				r.SetHash()
			}
			if err := t.insert(TableACLBindingRules, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteACLBindingRules deletes binding rules by ID; an ID that does not
// exist is structs.ErrNotFound and deletes nothing.
func (s *StateStore) DeleteACLBindingRules(index uint64, ids []string) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableACLBindingRules] = struct{}{}
		for _, id := range ids {
			raw, err := t.first(TableACLBindingRules, "id", id)
			if err != nil {
				return err
			}
			if raw == nil {
				return structs.NewError(structs.ErrNotFound, "ACL binding rule %q not found", id)
			}
			if err := t.delete(TableACLBindingRules, raw); err != nil {
				return err
			}
		}
		return nil
	})
}

// ACLBindingRuleByID returns a binding rule, or nil.
func (s *StateStore) ACLBindingRuleByID(ws memdb.WatchSet, id string) (*structs.ACLBindingRule, error) {
	return first[*structs.ACLBindingRule](s, ws, TableACLBindingRules, "id", id)
}

// ACLBindingRules returns the binding rules whose ID starts with prefix,
// by ID.
func (s *StateStore) ACLBindingRules(ws memdb.WatchSet, prefix string) ([]*structs.ACLBindingRule, error) {
	return list[*structs.ACLBindingRule](s, ws, nil, TableACLBindingRules, "id_prefix", prefix)
}

// ACLBindingRulesByAuthMethod returns the binding rules of one method, by
// ID.
func (s *StateStore) ACLBindingRulesByAuthMethod(ws memdb.WatchSet, method string) ([]*structs.ACLBindingRule, error) {
	return list[*structs.ACLBindingRule](s, ws, nil, TableACLBindingRules, "auth_method", method)
}

// AutopilotSetConfig writes the autopilot configuration. With cas, it
// writes only when the stored configuration's ModifyIndex (0 when none
// is stored) is casIndex, and reports whether it wrote.
func (s *StateStore) AutopilotSetConfig(index uint64, c *structs.AutopilotConfig, cas bool, casIndex uint64) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	wrote := false
	err := s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TableAutopilotConfig, "id")
		if err != nil {
			return err
		}
		var cur uint64
		if raw != nil {
			cur = raw.(*structs.AutopilotConfig).ModifyIndex
		}
		if cas && cur != casIndex {
			return nil
		}
		c.CreateIndex = index
		if raw != nil {
			c.CreateIndex = raw.(*structs.AutopilotConfig).CreateIndex
		}
		c.ModifyIndex = index
		wrote = true
		t.tables[TableAutopilotConfig] = struct{}{}
		return t.insert(TableAutopilotConfig, c)
	})
	return wrote, err
}

// AutopilotConfig returns the autopilot configuration and its
// ModifyIndex: the defaults at index 0 when none was ever written.
func (s *StateStore) AutopilotConfig() (uint64, *structs.AutopilotConfig, error) {
	c, err := first[*structs.AutopilotConfig](s, nil, TableAutopilotConfig, "id")
	if err != nil {
		return 0, nil, err
	}
	if c == nil {
		return 0, structs.DefaultAutopilotConfig(), nil
	}
	return c.ModifyIndex, c.Copy(), nil
}

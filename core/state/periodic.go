package state

import (
	"github.com/drover-org/drover/core/structs"
)

// UpsertPeriodicLaunch records the last launch of a periodic parent. An
// existing record keeps its CreateIndex.
func (s *StateStore) UpsertPeriodicLaunch(index uint64, l *structs.PeriodicLaunch) error {
	return s.write(index, func(t *writeTxn) error { return t.upsertPeriodicLaunch(l) })
}

func (t *writeTxn) upsertPeriodicLaunch(l *structs.PeriodicLaunch) error {
	if l == nil || l.ID == "" {
		return structs.NewError(structs.ErrInvalid, "periodic launch: missing job ID")
	}
	raw, err := t.first(TablePeriodicLaunch, "id", l.Namespace, l.ID)
	if err != nil {
		return err
	}
	l.CreateIndex = t.index
	if raw != nil {
		l.CreateIndex = raw.(*structs.PeriodicLaunch).CreateIndex
	}
	l.ModifyIndex = t.index
	return t.insert(TablePeriodicLaunch, l)
}

// DeletePeriodicLaunch removes a launch record; structs.ErrNotFound when
// there is none.
func (s *StateStore) DeletePeriodicLaunch(index uint64, ns, id string) error {
	return s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TablePeriodicLaunch, "id", ns, id)
		if err != nil {
			return err
		}
		if raw == nil {
			return structs.NewError(structs.ErrNotFound, "periodic launch of job %q in namespace %q not found", id, ns)
		}
		return t.delete(TablePeriodicLaunch, raw)
	})
}

// SchedulerSetConfig replaces the scheduler configuration.
func (s *StateStore) SchedulerSetConfig(index uint64, c *structs.SchedulerConfiguration) error {
	if c == nil {
		return structs.NewError(structs.ErrInvalid, "scheduler configuration: missing")
	}
	return s.write(index, func(t *writeTxn) error {
		raw, err := t.first(TableSchedulerConfig, "id")
		if err != nil {
			return err
		}
		c.CreateIndex = t.index
		if raw != nil {
			c.CreateIndex = raw.(*structs.SchedulerConfiguration).CreateIndex
		}
		c.ModifyIndex = t.index
		return t.insert(TableSchedulerConfig, c)
	})
}

package state

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// TableScalingEvents holds one structs.JobScalingEvents per job that was
// ever scaled; it is deleted with the job.
const TableScalingEvents = schema.TableScalingEvents

// ScalingEventsByJob returns a job's scaling events, or nil.
func (s *StateStore) ScalingEventsByJob(ws memdb.WatchSet, ns, id string) (*structs.JobScalingEvents, error) {
	return first[*structs.JobScalingEvents](s, ws, TableScalingEvents, "id", ns, id)
}

// AddScalingEvent records ev as the newest event of the job's group,
// stamping its CreateIndex (and its Time from the transaction's when it
// has none), and drops the group's oldest events beyond
// structs.MaxScalingEventsPerGroup.
func (tx *Txn) AddScalingEvent(ns, jobID, group string, ev *structs.ScalingEvent) error {
	return tx.t.addScalingEvent(ns, jobID, group, ev)
}

func (t *writeTxn) addScalingEvent(ns, jobID, group string, ev *structs.ScalingEvent) error {
	if ev == nil || jobID == "" || group == "" {
		return structs.NewError(structs.ErrInvalid, "scaling event: missing event, job ID or group")
	}
	raw, err := t.first(TableScalingEvents, "id", ns, jobID)
	if err != nil {
		return err
	}
	var row *structs.JobScalingEvents
	if raw != nil {
		row = raw.(*structs.JobScalingEvents).Copy()
	} else {
		row = &structs.JobScalingEvents{Namespace: ns, JobID: jobID, ScalingEvents: map[string][]*structs.ScalingEvent{}}
	}
	c := *ev
	c.CreateIndex = t.index
	if c.Time == 0 {
		c.Time = t.nanos()
	}
	l := append([]*structs.ScalingEvent{&c}, row.ScalingEvents[group]...)
	if len(l) > structs.MaxScalingEventsPerGroup {
		l = l[:structs.MaxScalingEventsPerGroup]
	}
	row.ScalingEvents[group] = l
	row.ModifyIndex = t.index
	return t.insert(TableScalingEvents, row)
}

// deleteScalingEvents drops a job's scaling events, if any.
func (t *writeTxn) deleteScalingEvents(ns, jobID string) error {
	raw, err := t.first(TableScalingEvents, "id", ns, jobID)
	if err != nil || raw == nil {
		return err
	}
	return t.delete(TableScalingEvents, raw)
}

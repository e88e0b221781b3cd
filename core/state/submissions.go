package state

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// TableJobSubmissions holds the sources of job versions as submitted.
const TableJobSubmissions = schema.TableJobSubmissions

// UpsertJobSubmission stores sub for the version of its job that the
// transaction wrote (the caller fills Namespace, JobID, Version and
// JobModifyIndex from it), and drops the submissions of the job's
// versions that are no longer kept, so that sources live exactly as long
// as their versions.
func (tx *Txn) UpsertJobSubmission(sub *structs.JobSubmission) error {
	t := tx.t
	if err := t.insert(TableJobSubmissions, sub); err != nil {
		return err
	}
	return t.pruneJobSubmissions(sub.Namespace, sub.JobID, true)
}

// DeleteJobSubmissions drops every stored source of a job (its purge).
func (tx *Txn) DeleteJobSubmissions(ns, id string) error {
	return tx.t.pruneJobSubmissions(ns, id, false)
}

// pruneJobSubmissions deletes the job's submissions; with keepVersions
// only those whose version is no longer in job_versions.
func (t *writeTxn) pruneJobSubmissions(ns, id string, keepVersions bool) error {
	iter, err := t.txn.Get(TableJobSubmissions, "job", ns, id)
	if err != nil {
		return err
	}
	var drop []*structs.JobSubmission
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		sub := raw.(*structs.JobSubmission)
		if keepVersions {
			v, err := t.first(TableJobVersions, "id", ns, id, sub.Version)
			if err != nil {
				return err
			}
			if v != nil {
				continue
			}
		}
		drop = append(drop, sub)
	}
	for _, sub := range drop {
		if err := t.delete(TableJobSubmissions, sub); err != nil {
			return err
		}
	}
	return nil
}

// JobSubmission returns the source of one version of a job as submitted,
// or nil when none was kept.
func (s *StateStore) JobSubmission(ws memdb.WatchSet, ns, id string, version uint64) (*structs.JobSubmission, error) {
	return first[*structs.JobSubmission](s, ws, TableJobSubmissions, "id", ns, id, version)
}

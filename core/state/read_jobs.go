package state

import (
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// JobByID returns a job, or nil.
func (s *StateStore) JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error) {
	return first[*structs.Job](s, ws, TableJobs, "id", ns, id)
}

// Jobs returns every job of every namespace.
func (s *StateStore) Jobs(ws memdb.WatchSet) ([]*structs.Job, error) {
	return list[*structs.Job](s, ws, nil, TableJobs, "id")
}

// JobsEvaluatedOnNodeChange returns the jobs whose type declares an eval on
// node updates or joins (EvalOnNodeUpdate, EvalOnNodeJoin).
func (s *StateStore) JobsEvaluatedOnNodeChange(ws memdb.WatchSet) ([]*structs.Job, error) {
	return list[*structs.Job](s, ws, nil, TableJobs, "node_evals", true)
}

// JobsByNamespace returns the jobs of ns; AllNamespaces (or "") lists every
// job.
func (s *StateStore) JobsByNamespace(ws memdb.WatchSet, ns string) ([]*structs.Job, error) {
	if ns == AllNamespaces || ns == "" {
		return s.Jobs(ws)
	}
	return list[*structs.Job](s, ws, nil, TableJobs, "namespace", ns)
}

// JobsByIDPrefix returns the jobs of ns whose ID starts with prefix; with
// AllNamespaces (or "") it searches every namespace.
func (s *StateStore) JobsByIDPrefix(ws memdb.WatchSet, ns, prefix string) ([]*structs.Job, error) {
	if ns == AllNamespaces || ns == "" {
		return list(s, ws, func(j *structs.Job) bool { return strings.HasPrefix(j.ID, prefix) }, TableJobs, "id")
	}
	return list[*structs.Job](s, ws, nil, TableJobs, "id_prefix", ns, prefix)
}

// JobList is JobsByIDPrefix; an empty prefix lists every job of ns.
func (s *StateStore) JobList(ws memdb.WatchSet, ns, prefix string) ([]*structs.Job, error) {
	return s.JobsByIDPrefix(ws, ns, prefix)
}

// JobsByParent returns the children (periodic launches, dispatches) of a
// parent job.
func (s *StateStore) JobsByParent(ws memdb.WatchSet, ns, parentID string) ([]*structs.Job, error) {
	return list[*structs.Job](s, ws, nil, TableJobs, "parent", ns, parentID)
}

// JobVersionsByID returns the kept versions of a job, newest first.
func (s *StateStore) JobVersionsByID(ws memdb.WatchSet, ns, id string) ([]*structs.Job, error) {
	out, err := list[*structs.Job](s, ws, nil, TableJobVersions, "job", ns, id)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, err
}

// JobByIDAndVersion returns one kept version of a job, or nil.
func (s *StateStore) JobByIDAndVersion(ws memdb.WatchSet, ns, id string, version uint64) (*structs.Job, error) {
	return first[*structs.Job](s, ws, TableJobVersions, "id", ns, id, version)
}

// JobSummaryByID returns a job's summary, or nil.
func (s *StateStore) JobSummaryByID(ws memdb.WatchSet, ns, id string) (*structs.JobSummary, error) {
	return first[*structs.JobSummary](s, ws, TableJobSummary, "id", ns, id)
}

// JobSummaries returns every job summary.
func (s *StateStore) JobSummaries(ws memdb.WatchSet) ([]*structs.JobSummary, error) {
	return list[*structs.JobSummary](s, ws, nil, TableJobSummary, "id")
}

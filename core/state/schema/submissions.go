package schema

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// TableJobSubmissions holds the sources of job versions as submitted
// (structs.JobSubmission), keyed like job_versions.
const TableJobSubmissions = "job_submissions"

func jobSubmissionsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableJobSubmissions, Indexes: indexes(
		idx("id", true, false, &memdb.CompoundIndex{Indexes: []memdb.Indexer{
			strEmpty(func(s *structs.JobSubmission) string { return s.Namespace }),
			str(func(s *structs.JobSubmission) string { return s.JobID }),
			&memdb.UintFieldIndex{Field: "Version"},
		}}),
		idx("job", false, false, nsID(
			func(s *structs.JobSubmission) string { return s.Namespace },
			func(s *structs.JobSubmission) string { return s.JobID })),
	)}
}

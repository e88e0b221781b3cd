package httpapi

import (
	"context"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// reader is the read side of the state store that the handlers use. Every
// method registers what it reads in ws so that a blocking query wakes when
// it changes. Results are shared with the store and must not be modified;
// a missing object is (nil, nil). List methods with ns "*" read every
// namespace, and an empty prefix matches every ID.
type reader interface {
	JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error)
	JobList(ws memdb.WatchSet, ns, prefix string) ([]*structs.Job, error)
	JobsByParent(ws memdb.WatchSet, ns, parent string) ([]*structs.Job, error)
	JobVersionsByID(ws memdb.WatchSet, ns, id string) ([]*structs.Job, error)
	JobSummaryByID(ws memdb.WatchSet, ns, id string) (*structs.JobSummary, error)
	JobSubmission(ws memdb.WatchSet, ns, id string, version uint64) (*structs.JobSubmission, error)
	JobByIDAndVersion(ws memdb.WatchSet, ns, id string, version uint64) (*structs.Job, error)
	ScalingEventsByJob(ws memdb.WatchSet, ns, id string) (*structs.JobScalingEvents, error)

	AllocByID(ws memdb.WatchSet, id string) (*structs.Allocation, error)
	AllocList(ws memdb.WatchSet, ns, prefix string) ([]*structs.Allocation, error)
	AllocsByJob(ws memdb.WatchSet, ns, jobID string, anyCreateIndex bool) ([]*structs.Allocation, error)
	AllocsByNode(ws memdb.WatchSet, nodeID string) ([]*structs.Allocation, error)
	AllocsByEval(ws memdb.WatchSet, evalID string) ([]*structs.Allocation, error)

	EvalByID(ws memdb.WatchSet, id string) (*structs.Evaluation, error)
	EvalList(ws memdb.WatchSet, ns, prefix string) ([]*structs.Evaluation, error)
	EvalsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Evaluation, error)

	NodeByID(ws memdb.WatchSet, id string) (*structs.Node, error)
	NodeList(ws memdb.WatchSet, prefix string) ([]*structs.Node, error)

	NamespaceByName(ws memdb.WatchSet, name string) (*structs.Namespace, error)
	Namespaces(ws memdb.WatchSet, prefix string) ([]*structs.Namespace, error)

	CSIVolumeByID(ws memdb.WatchSet, ns, id string) (*structs.CSIVolume, error)
	CSIVolumes(ws memdb.WatchSet, ns, prefix, pluginID string) ([]*structs.CSIVolume, error)
	CSIPluginByID(ws memdb.WatchSet, id string) (*structs.CSIPlugin, error)
	CSIPlugins(ws memdb.WatchSet, prefix string) ([]*structs.CSIPlugin, error)

	deploymentReader
	nodePoolReader
	serviceReader

	// Index is the last Raft index that wrote the table ("jobs", "allocs",
	// "evals", "nodes", "job_summary", "job_versions").
	Index(table string) uint64
}

// queryFunc runs fn against the state and re-runs it whenever what it read
// changes, until the index it returns exceeds minIndex or ctx ends; with
// minIndex 0 it runs fn once. It returns the last index and fn's error.
type queryFunc func(ctx context.Context, minIndex uint64, fn func(ws memdb.WatchSet, st reader) (uint64, error)) (uint64, error)

// The state store is the reader the handlers run against.
var _ reader = (*state.StateStore)(nil)

// storeQuery runs reads as blocking queries on the server's current state
// store. The store is fetched per query because a snapshot restore swaps
// it; BlockingQuery follows a swap that happens while it waits.
func storeQuery(srv Server) queryFunc {
	return func(ctx context.Context, minIndex uint64, fn func(ws memdb.WatchSet, st reader) (uint64, error)) (uint64, error) {
		return srv.State().BlockingQuery(ctx, minIndex, func(ws memdb.WatchSet, s *state.StateStore) (uint64, error) {
			return fn(ws, s)
		})
	}
}

package schedio

import (
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// The read-only views of state this package reads, each declared for its
// user; a *state.StateSnapshot serves all of them. Every read is of one
// consistent snapshot, so a request or a plan check never mixes two states.
// Returned objects belong to the state store and are never modified here:
// what a request or a plan needs changed is copied first. A nil object
// with a nil error means "not found"; an error is the store's and is
// returned as it is.

// NodeLister lists nodes, all or those of one pool.
type NodeLister interface {
	Nodes(ws memdb.WatchSet) ([]*structs.Node, error)
	NodesByPool(ws memdb.WatchSet, pool string) ([]*structs.Node, error)
}

// RequestState is what building a schedule request reads.
type RequestState interface {
	NodeLister
	SchedulerConfig() (uint64, *structs.SchedulerConfiguration, error)
	NodeByID(ws memdb.WatchSet, id string) (*structs.Node, error)
	AllocsByJob(ws memdb.WatchSet, ns, jobID string, anyCreateIndex bool) ([]*structs.Allocation, error)
	AllocsByNodeTerminal(ws memdb.WatchSet, nodeID string, terminal bool) ([]*structs.Allocation, error)
	EvalByID(ws memdb.WatchSet, id string) (*structs.Evaluation, error)
	LatestDeploymentByJob(ws memdb.WatchSet, ns, jobID string) (*structs.Deployment, error)
	CSIVolumeForPlacement(ws memdb.WatchSet, ns, id string) (*structs.CSIVolume, error)
	// CSIVolumesByPluginRaw returns the stored volumes without their
	// denormalized claims; only the claims' node IDs are read.
	CSIVolumesByPluginRaw(ws memdb.WatchSet, pluginID string) ([]*structs.CSIVolume, error)
}

// PlanState is what checking a plugin's response against the snapshot
// the request was built from reads.
type PlanState interface {
	// LatestIndex is the snapshot's index, which the plan carries so the
	// applier can tell what changed since.
	LatestIndex() uint64
	AllocByID(ws memdb.WatchSet, id string) (*structs.Allocation, error)
	EvalByID(ws memdb.WatchSet, id string) (*structs.Evaluation, error)
	DeploymentByID(ws memdb.WatchSet, id string) (*structs.Deployment, error)
	LatestDeploymentByJob(ws memdb.WatchSet, ns, jobID string) (*structs.Deployment, error)
}

// ExplainState is what explaining placement failures reads.
type ExplainState interface {
	JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error)
	NodesByPool(ws memdb.WatchSet, pool string) ([]*structs.Node, error)
}

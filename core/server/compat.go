package server

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// The Server still answers the calls of its in-process callers that have
// not moved to the endpoints yet: core/client's ServerConn (an agent's
// client talks to its own server directly) and the GC and CSI tests. Each
// forwards to its endpoint; remove them as those callers move.

// RegisterNode is Nodes().Register.
func (s *Server) RegisterNode(ctx context.Context, node *structs.Node) (time.Duration, error) {
	return s.Nodes().Register(ctx, node)
}

// Heartbeat is Nodes().Heartbeat.
func (s *Server) Heartbeat(ctx context.Context, nodeID, secretID string) (time.Duration, error) {
	return s.Nodes().Heartbeat(ctx, nodeID, secretID)
}

// Allocs is Nodes().Allocs.
func (s *Server) Allocs(ctx context.Context, nodeID, secretID string, minIndex uint64, maxWait time.Duration) ([]*structs.Allocation, uint64, error) {
	return s.Nodes().Allocs(ctx, nodeID, secretID, minIndex, maxWait)
}

// UpdateAllocs is Nodes().UpdateAllocs.
func (s *Server) UpdateAllocs(ctx context.Context, nodeID, secretID string, allocs []*structs.Allocation) error {
	return s.Nodes().UpdateAllocs(ctx, nodeID, secretID, allocs)
}

// UpdateNodeEligibility is Nodes().UpdateEligibility.
func (s *Server) UpdateNodeEligibility(ctx context.Context, nodeID, eligibility string) (*structs.NodeEligibilityUpdateResponse, error) {
	return s.Nodes().UpdateEligibility(ctx, nodeID, eligibility)
}

// UpdateServices is Services().Update.
func (s *Server) UpdateServices(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error {
	return s.Services().Update(ctx, args)
}

// LookupServices is Services().Lookup.
func (s *Server) LookupServices(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
	return s.Services().Lookup(ctx, args)
}

// RegisterJob is Jobs().Register.
func (s *Server) RegisterJob(ctx context.Context, job *structs.Job, enforceIndex bool, jobModifyIndex uint64) (*structs.JobRegisterResponse, error) {
	return s.Jobs().Register(ctx, job, enforceIndex, jobModifyIndex)
}

// DeregisterJob is Jobs().Deregister.
func (s *Server) DeregisterJob(ctx context.Context, ns, jobID string, purge bool) (*structs.JobDeregisterResponse, error) {
	return s.Jobs().Deregister(ctx, ns, jobID, purge)
}

// PromoteDeployment is Deployments().Promote.
func (s *Server) PromoteDeployment(ctx context.Context, id string, all bool, groups []string) (*structs.DeploymentUpdateResponse, error) {
	return s.Deployments().Promote(ctx, id, all, groups)
}

package server

import (
	"context"

	"github.com/drover-org/drover/core/server/planapply"
	"github.com/drover-org/drover/core/structs"
)

// newPlanApplier wires the plan applier to this server's state, Raft log,
// eval constructor, clock and metrics.
func (s *Server) newPlanApplier() *planapply.Applier {
	return planapply.New(planapply.Config{
		Snapshot: func(ctx context.Context, minIndex uint64) (planapply.Snapshot, error) {
			snap, err := s.snapshotMinIndex(ctx, minIndex)
			if err != nil {
				return nil, err // not a typed nil in the interface
			}
			return snap, nil
		},
		Commit: func(req *structs.ApplyPlanResultsRequest) (uint64, error) {
			return s.raftApply(structs.ApplyPlanResultsRequestType, req)
		},
		NewEval: s.newEval,
		Now:     s.cfg.Now,
		Logger:  s.logger,
		Observe: s.cfg.Metrics.PlanApplied,
	})
}

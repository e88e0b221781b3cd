package server

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/gcengine"
	"github.com/drover-org/drover/core/structs"
)

// ForceGC runs every core GC job at once with the force threshold
// (sdk/gc.ForceThreshold), node GC last: `drover system gc`, PUT
// /v1/system/gc. A follower forwards it to the leader
// (System.GarbageCollect); errors keep their kind across the forward. It
// returns once every job ran. A CSI plugin or volume still in use is kept,
// never an error; a GC plugin that is missing or unavailable is
// structs.ErrUnavailable, and nothing is collected.
//
// The RPC is server-only (rpcAccess does not list it): the HTTP API that
// calls ForceGC checks the caller's management token first.
func (s *Server) ForceGC(ctx context.Context) error {
	if _, ok, err := forward[Empty, Empty](ctx, s, "System.GarbageCollect", &Empty{}); ok {
		return err
	}
	if s.cfg.GC == nil {
		return structs.NewError(structs.ErrUnavailable, "garbage collection: no GC plugin configured")
	}
	return collector{s}.run(ctx, nil, true)
}

// run has this leader's GC engine run jobs (nil: all, in order) now and
// waits for them.
func (c collector) run(ctx context.Context, jobs []string, force bool) error {
	s := c.s
	if !s.IsLeader() {
		return structs.NewError(structs.ErrNoLeader, "No cluster leader")
	}
	s.leaderMu.Lock()
	g := s.gc
	s.leaderMu.Unlock()
	if g == nil {
		return structs.NewError(structs.ErrNoLeader, "No cluster leader: leadership is not established yet")
	}
	return g.RunNow(ctx, jobs, force)
}

// reconcileJobsPerEntry is how many jobs one ReconcileJobSummaries entry
// reconciles: each reads every alloc of its job, so the entry stays short
// next to the scheduler's.
const reconcileJobsPerEntry = 500

// ReconcileJobSummaries rebuilds every job summary from the allocations and
// children in the state (PUT /v1/system/reconcile/summaries), in entries of
// reconcileJobsPerEntry jobs paced as the GC's (a share of the leader's
// time, yielding to scheduling). A follower forwards it to the leader
// (System.ReconcileSummaries).
func (s *Server) ReconcileJobSummaries(ctx context.Context) error {
	if _, ok, err := forward[Empty, Empty](ctx, s, "System.ReconcileSummaries", &Empty{}); ok {
		return err
	}
	p := gcengine.DefaultPacing()
	if s.cfg.gcPacing != nil {
		p = *s.cfg.gcPacing
	}
	pace := gcengine.NewPacer(p, collector{s}.quiet())
	req := &structs.ReconcileJobSummariesRequest{Limit: reconcileJobsPerEntry}
	for {
		if err := pace.Wait(ctx); err != nil {
			return err
		}
		start := time.Now()
		_, resp, err := s.gcApply(structs.ReconcileJobSummariesRequestType, req)
		if err != nil {
			return err
		}
		pace.Took(time.Since(start))
		out, ok := resp.(*structs.ReconcileJobSummariesResponse)
		if !ok {
			return fmt.Errorf("reconcile summaries: unexpected response %T", resp)
		}
		if out.Done {
			return nil
		}
		req = &structs.ReconcileJobSummariesRequest{AfterNamespace: out.NextNamespace, AfterID: out.NextID, Limit: reconcileJobsPerEntry}
	}
}

func (s *Server) registerGCRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "System.GarbageCollect", func(ctx context.Context, _ *Empty) (*Empty, error) {
		return &Empty{}, s.ForceGC(mark(ctx))
	})
	rpc.Handle(rs, "System.ReconcileSummaries", func(ctx context.Context, _ *Empty) (*Empty, error) {
		return &Empty{}, s.ReconcileJobSummaries(mark(ctx))
	})
}

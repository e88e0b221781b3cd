package server

import (
	"context"
	"fmt"

	"github.com/drover-org/drover/core/server/evalbroker"
	"github.com/drover-org/drover/core/server/worker"
	"github.com/drover-org/drover/core/structs"
)

// Defaults of Config.SchedulerCallTimeout and Config.SlowSchedulerCall.
const (
	DefaultSchedulerCallTimeout = worker.DefaultCallTimeout
	DefaultSlowSchedulerCall    = worker.DefaultSlowCall
)

// newWorkers wires the scheduler workers (package worker) to the server;
// New starts them.
func newWorkers(s *Server) *worker.Pool {
	cfg := s.cfg
	return worker.New(worker.Config{
		Workers:    cfg.NumWorkers,
		Broker:     s.broker,
		Schedulers: cfg.Schedulers,
		Snapshot:   s.snapshotMinIndex,
		State:      s.State,
		NodeCache:  s.nodeCache,
		SubmitPlan: func(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, error) {
			fut, err := s.planQueue.Enqueue(plan)
			if err != nil {
				return nil, err
			}
			return fut.Wait(ctx)
		},
		Apply:            s.raftApply,
		CallTimeout:      cfg.SchedulerCallTimeout,
		SlowCall:         cfg.SlowSchedulerCall,
		MaxAllocsPerEval: cfg.MaxAllocsPerEval,
		MaxAllocsPerJob:  cfg.MaxAllocsPerJob,
		InitialNackDelay: cfg.Broker.InitialNackDelay,
		Now:              cfg.Now,
		Metrics:          cfg.Metrics,
		Logger:           s.logger,
	})
}

// deliveryLimitDescription is the StatusDescription of an eval failed at
// the delivery limit.
func (k evalKeeper) deliveryLimitDescription(evalID string) string {
	s := k.s
	limit := s.cfg.Broker.DeliveryLimit
	if limit <= 0 {
		limit = evalbroker.DefaultDeliveryLimit
	}
	desc := fmt.Sprintf("evaluation reached delivery limit (%d)", limit)
	if reason := s.workers.TakeNackReason(evalID); reason != "" {
		desc += "; last error: " + reason
	}
	return desc
}

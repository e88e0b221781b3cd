package server

import (
	"context"

	"github.com/drover-org/drover/core/structs"
)

// SetSchedulerConfig replaces the scheduler configuration (preemption per
// scheduler type). With cas, the write happens only if the stored config's
// ModifyIndex equals index; the reply says whether it did.
func (ep Operator) SetSchedulerConfig(ctx context.Context, cfg *structs.SchedulerConfiguration, cas bool, index uint64) (bool, uint64, error) {
	s := ep.srv
	if r, ok, err := forward[SchedulerConfigArgs, SchedulerConfigReply](ctx, s, "Operator.SchedulerSetConfig", &SchedulerConfigArgs{Config: cfg, CAS: cas, Index: index}); ok {
		if err != nil {
			return false, 0, err
		}
		return r.Updated, r.Index, nil
	}
	if cfg == nil {
		return false, 0, structs.NewError(structs.ErrInvalid, "SchedulerConfig: missing configuration")
	}
	switch cfg.SchedulerAlgorithm {
	case "", "binpack", "spread":
	default:
		return false, 0, structs.NewError(structs.ErrInvalid, "SchedulerAlgorithm: %q is not valid (must be \"binpack\" or \"spread\")", cfg.SchedulerAlgorithm)
	}
	if cas {
		cur, _, err := s.State().SchedulerConfig()
		if err != nil {
			return false, 0, err
		}
		if cur != index {
			return false, cur, nil
		}
	}
	c := *cfg
	if c.SchedulerAlgorithm == "" {
		c.SchedulerAlgorithm = "binpack"
	}
	idx, err := s.raftApply(structs.SchedulerConfigRequestType, &structs.SchedulerSetConfigRequest{Config: c})
	if err != nil {
		return false, 0, err
	}
	// This server is the leader (the write was not forwarded): its broker
	// follows the pause switch at once, as stored (a concurrent write
	// may have come after this one).
	if err := s.applyBrokerPause(); err != nil {
		return true, idx, err
	}
	s.logger.Info("scheduler configuration updated", "system_preemption", c.PreemptionConfig.SystemSchedulerEnabled,
		"sysbatch_preemption", c.PreemptionConfig.SysBatchSchedulerEnabled, "pause_eval_broker", c.PauseEvalBroker,
		"reject_job_registration", c.RejectJobRegistration)
	return true, idx, nil
}

// applyBrokerPause sets the broker's pause from the stored scheduler
// configuration (PauseEvalBroker); the leader calls it when it steps up.
func (s *Server) applyBrokerPause() error {
	_, cfg, err := s.State().SchedulerConfig()
	if err != nil {
		return err
	}
	s.broker.SetPaused(cfg != nil && cfg.PauseEvalBroker)
	return nil
}

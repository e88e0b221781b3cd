package agent

import (
	"fmt"
	"time"

	"github.com/drover-org/drover/core/server"
)

// validateSchedulerLimits checks the server block's scheduler settings.
func (sc *ServerConfig) validateSchedulerLimits() error {
	if sc.SchedulerCallTimeout != "" {
		d, err := time.ParseDuration(sc.SchedulerCallTimeout)
		if err != nil {
			return fmt.Errorf("server.scheduler_call_timeout: %v", err)
		}
		if d <= 0 {
			return fmt.Errorf("server.scheduler_call_timeout: must be positive, got %s", sc.SchedulerCallTimeout)
		}
	}
	if sc.MaxAllocsPerJob < 0 {
		return fmt.Errorf("server.max_allocs_per_job: must not be negative, got %d", sc.MaxAllocsPerJob)
	}
	if sc.MaxAllocsPerEval < 0 {
		return fmt.Errorf("server.max_allocs_per_eval: must not be negative, got %d", sc.MaxAllocsPerEval)
	}
	return nil
}

// applySchedulerLimits copies the validated settings into the server's
// config; unset ones keep the server's defaults.
func (sc *ServerConfig) applySchedulerLimits(cfg *server.Config) {
	if sc.SchedulerCallTimeout != "" {
		cfg.SchedulerCallTimeout, _ = time.ParseDuration(sc.SchedulerCallTimeout)
	}
	cfg.MaxAllocsPerJob = sc.MaxAllocsPerJob
	cfg.MaxAllocsPerEval = sc.MaxAllocsPerEval
}

package agent

import (
	"time"

	"github.com/drover-org/drover/core/server"
)

// applySchedulerLimits copies the validated settings into the server's
// config; unset ones keep the server's defaults.
func (sc *ServerConfig) applySchedulerLimits(cfg *server.Config) {
	if sc.SchedulerCallTimeout != "" {
		cfg.SchedulerCallTimeout, _ = time.ParseDuration(sc.SchedulerCallTimeout)
	}
	cfg.MaxAllocsPerJob = sc.MaxAllocsPerJob
	cfg.MaxAllocsPerEval = sc.MaxAllocsPerEval
}

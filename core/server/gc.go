package server

import (
	"github.com/drover-org/drover/core/server/gcengine"
	"github.com/drover-org/drover/core/structs"
)

// The garbage collector is core/server/gcengine; this wires it to the
// server: the state, the GC's own Raft entries (gcApply), the quiet its
// steps yield to (collector.quiet) and the deferral of Raft snapshots
// while a job runs (collector.deferSnapshots). establishLeadership starts
// one Engine per term (s.gc) and revokeLeadership stops it; ForceGC asks
// it to run (gc_force.go).

// collector is the server's side of garbage collection: what the GC
// engine is built from and how a forced run reaches it.
type collector struct{ s *Server }

// GCRouter hands the leader's core GC jobs the plugin that decides each
// collection (the agent's pluginhost implements it).
type GCRouter = gcengine.Router

// GCConfig holds the garbage collector's thresholds and intervals, Nomad's
// server stanza keys (NOMAD-BEHAVIOR.md §5.2). Zero fields take the
// defaults (DefaultGCConfig).
type GCConfig = gcengine.Settings

// DefaultGCConfig is Nomad's defaults.
func DefaultGCConfig() GCConfig { return gcengine.DefaultSettings() }

// newEngine returns a leadership term's collector.
func (c collector) newEngine() *gcengine.Engine {
	s := c.s
	ott := s.cfg.OneTimeTokenGCInterval
	if ott <= 0 {
		ott = oneTimeTokenGCInterval
	}
	cfg := gcengine.Config{
		State: s.State, Router: s.cfg.GC, Apply: s.gcApply, Propose: s.proposeEntry, Quiet: c.quiet(), DeferSnapshots: c.deferSnapshots,
		Settings: s.cfg.GCConfig, OneTimeTokenInterval: ott, ACLEnabled: s.cfg.ACLEnabled,
		Pacing: s.cfg.gcPacing, Trace: s.cfg.gcTrace, Now: s.cfg.Now, Logger: s.logger,
	}
	if s.cfg.Schedulers != nil {
		cfg.JobType = func(t string) (structs.JobTypeBehavior, bool) { return s.cfg.Schedulers.JobType(t) }
	}
	if s.cfg.Metrics != nil {
		cfg.Metrics = s.cfg.Metrics
	}
	return gcengine.New(cfg)
}

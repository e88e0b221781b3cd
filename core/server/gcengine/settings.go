package gcengine

import (
	"time"

	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// Router hands the leader's core GC jobs the plugin that decides each
// collection (the agent's pluginhost implements it; server.GCRouter).
type Router interface {
	// Collector returns the GC plugin deciding collection. It returns an
	// error wrapping structs.ErrUnavailable while no plugin is loaded or
	// the plugin is restarting: the core job keeps everything and tries
	// again at its next run.
	Collector(collection gcpb.Collection) (sdkgc.Collector, error)
}

// Settings holds the garbage collector's thresholds and intervals, Nomad's
// server stanza keys (NOMAD-BEHAVIOR.md §5.2; server.GCConfig). Zero fields
// take the defaults (DefaultSettings).
type Settings struct {
	// Thresholds: an object is old enough to collect once its last
	// change is older than its threshold.
	EvalGCThreshold           time.Duration // eval_gc_threshold
	BatchEvalGCThreshold      time.Duration // batch_eval_gc_threshold
	JobGCThreshold            time.Duration // job_gc_threshold
	NodeGCThreshold           time.Duration // node_gc_threshold
	DeploymentGCThreshold     time.Duration // deployment_gc_threshold
	CSIVolumeClaimGCThreshold time.Duration // csi_volume_claim_gc_threshold
	CSIPluginGCThreshold      time.Duration // csi_plugin_gc_threshold
	ACLTokenGCThreshold       time.Duration // acl_token_gc_threshold

	// Intervals of the leader's core jobs.
	JobGCInterval            time.Duration // job_gc_interval (eval, job, node, deployment, plugin GC)
	CSIVolumeClaimGCInterval time.Duration // csi_volume_claim_gc_interval
}

// DefaultSettings is Nomad's defaults.
func DefaultSettings() Settings {
	t := sdkgc.DefaultThresholds()
	return Settings{
		EvalGCThreshold:           time.Duration(t.EvalNs),
		BatchEvalGCThreshold:      time.Duration(t.BatchEvalNs),
		JobGCThreshold:            time.Duration(t.JobNs),
		NodeGCThreshold:           time.Duration(t.NodeNs),
		DeploymentGCThreshold:     time.Duration(t.DeploymentNs),
		CSIVolumeClaimGCThreshold: time.Duration(t.CsiVolumeClaimNs),
		CSIPluginGCThreshold:      time.Duration(t.CsiPluginNs),
		ACLTokenGCThreshold:       time.Duration(t.AclTokenNs),
		JobGCInterval:             5 * time.Minute,
		CSIVolumeClaimGCInterval:  5 * time.Minute,
	}
}

// WithDefaults fills the zero fields of c from DefaultSettings.
func (c Settings) WithDefaults() Settings {
	d := DefaultSettings()
	for _, f := range []struct{ v, def *time.Duration }{
		{&c.EvalGCThreshold, &d.EvalGCThreshold}, {&c.BatchEvalGCThreshold, &d.BatchEvalGCThreshold},
		{&c.JobGCThreshold, &d.JobGCThreshold}, {&c.NodeGCThreshold, &d.NodeGCThreshold},
		{&c.DeploymentGCThreshold, &d.DeploymentGCThreshold}, {&c.CSIVolumeClaimGCThreshold, &d.CSIVolumeClaimGCThreshold},
		{&c.CSIPluginGCThreshold, &d.CSIPluginGCThreshold}, {&c.ACLTokenGCThreshold, &d.ACLTokenGCThreshold},
		{&c.JobGCInterval, &d.JobGCInterval}, {&c.CSIVolumeClaimGCInterval, &d.CSIVolumeClaimGCInterval},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return c
}

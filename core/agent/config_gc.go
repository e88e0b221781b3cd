package agent

import (
	"fmt"
	"time"

	"github.com/drover-org/drover/core/server"
)

// Bounds of the server block's GC intervals: a core GC job that runs more
// often than every second only competes with real work for the leader,
// and one that runs less often than daily lets state pile up.
const (
	minGCInterval = time.Second
	maxGCInterval = 24 * time.Hour
	// maxGCThreshold: ten years, which is "keep it"; beyond that a value
	// is a typo (and near time.Duration's end).
	maxGCThreshold = 10 * 365 * 24 * time.Hour
)

// gcSetting is one of the server block's GC keys (Nomad's): a threshold
// (an object is old enough to collect once its last change is older,
// 0..maxGCThreshold)
// or the interval of a core job (minGCInterval..maxGCInterval). Values are
// duration strings ("1h", "30m").
type gcSetting struct {
	key      string
	interval bool
	value    func(*ServerConfig) *string
	target   func(*server.GCConfig) *time.Duration
}

var gcSettings = []gcSetting{
	{"eval_gc_threshold", false, func(s *ServerConfig) *string { return &s.EvalGCThreshold },
		func(c *server.GCConfig) *time.Duration { return &c.EvalGCThreshold }},
	{"batch_eval_gc_threshold", false, func(s *ServerConfig) *string { return &s.BatchEvalGCThreshold },
		func(c *server.GCConfig) *time.Duration { return &c.BatchEvalGCThreshold }},
	{"job_gc_threshold", false, func(s *ServerConfig) *string { return &s.JobGCThreshold },
		func(c *server.GCConfig) *time.Duration { return &c.JobGCThreshold }},
	{"node_gc_threshold", false, func(s *ServerConfig) *string { return &s.NodeGCThreshold },
		func(c *server.GCConfig) *time.Duration { return &c.NodeGCThreshold }},
	{"deployment_gc_threshold", false, func(s *ServerConfig) *string { return &s.DeploymentGCThreshold },
		func(c *server.GCConfig) *time.Duration { return &c.DeploymentGCThreshold }},
	{"csi_volume_claim_gc_threshold", false, func(s *ServerConfig) *string { return &s.CSIVolumeClaimGCThreshold },
		func(c *server.GCConfig) *time.Duration { return &c.CSIVolumeClaimGCThreshold }},
	{"csi_plugin_gc_threshold", false, func(s *ServerConfig) *string { return &s.CSIPluginGCThreshold },
		func(c *server.GCConfig) *time.Duration { return &c.CSIPluginGCThreshold }},
	{"acl_token_gc_threshold", false, func(s *ServerConfig) *string { return &s.ACLTokenGCThreshold },
		func(c *server.GCConfig) *time.Duration { return &c.ACLTokenGCThreshold }},
	{"job_gc_interval", true, func(s *ServerConfig) *string { return &s.JobGCInterval },
		func(c *server.GCConfig) *time.Duration { return &c.JobGCInterval }},
	{"csi_volume_claim_gc_interval", true, func(s *ServerConfig) *string { return &s.CSIVolumeClaimGCInterval },
		func(c *server.GCConfig) *time.Duration { return &c.CSIVolumeClaimGCInterval }},
}

// check parses v, the setting's value, against its rule; the error names
// the key and the rule.
func (g gcSetting) check(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fmt.Errorf("server.%s: %q is not a duration (such as \"1h\" or \"30m\")", g.key, v)
	case g.interval && d < minGCInterval:
		return 0, fmt.Errorf("server.%s: must be at least %s, got %q", g.key, minGCInterval, v)
	case g.interval && d > maxGCInterval:
		return 0, fmt.Errorf("server.%s: must be at most %s, got %q", g.key, maxGCInterval, v)
	case d < 0:
		return 0, fmt.Errorf("server.%s: must not be negative, got %q", g.key, v)
	case d > maxGCThreshold:
		return 0, fmt.Errorf("server.%s: must be at most %s, got %q", g.key, maxGCThreshold, v)
	}
	return d, nil
}

// gcConfig is the server's GC config: Nomad's defaults, overridden by the
// settings given. A threshold of zero (collect as soon as an object is
// terminal) becomes one nanosecond, since a zero field of server.GCConfig
// means the default.
func (sc *ServerConfig) gcConfig() server.GCConfig {
	cfg := server.DefaultGCConfig()
	for _, g := range gcSettings {
		v := *g.value(sc)
		if v == "" {
			continue
		}
		d, err := g.check(v)
		if err != nil {
			continue // validated when the config was parsed
		}
		if d == 0 {
			d = time.Nanosecond
		}
		*g.target(&cfg) = d
	}
	return cfg
}

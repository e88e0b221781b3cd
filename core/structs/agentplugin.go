package structs

import "time"

// AgentPlugin is one plugin of an agent, as GET /v1/agent/plugins lists it
// and `drover operator plugin list|status` shows it.
type AgentPlugin struct {
	Name    string
	Kind    string // "scheduler", "driver", ...
	Builtin bool
	// Path is the binary a third-party plugin runs from; empty for a
	// built-in (the agent's own binary).
	Path    string `json:",omitempty"`
	Version string `json:",omitempty"`
	// JobTypes are the job types a scheduler plugin serves, with what it
	// declares about each.
	JobTypes []AgentJobType `json:",omitempty"`
	PID      int            `json:",omitempty"`
	// StartTime is when the current instance started (RFC 3339 in JSON).
	StartTime time.Time `json:",omitempty"`
	// Restarts counts restarts after crashes and reloads since the agent
	// started.
	Restarts  int
	LastError string `json:",omitempty"`
	// Health is AgentPluginHealthy, AgentPluginRestarting,
	// AgentPluginFailed, AgentPluginUnhealthy (running but not
	// answering; HealthDescription says why), or AgentPluginIdle /
	// AgentPluginStarting for a plugin started when first needed.
	Health            string
	HealthDescription string `json:",omitempty"`
}

// AgentJobType is one job type a scheduler plugin serves.
type AgentJobType struct {
	Name     string
	Behavior JobTypeBehavior
}

// AgentPlugin.Health values.
const (
	AgentPluginHealthy    = "healthy"
	AgentPluginRestarting = "restarting"
	AgentPluginFailed     = "failed"
	AgentPluginUnhealthy  = "unhealthy"
	// AgentPluginIdle: a plugin the agent starts when first needed, not
	// started yet; AgentPluginStarting while that first start runs.
	AgentPluginIdle     = "idle"
	AgentPluginStarting = "starting"
)

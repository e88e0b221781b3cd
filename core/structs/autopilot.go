package structs

import (
	"encoding/json"
	"time"
)

// AutopilotConfigRequestType writes the autopilot configuration.
const AutopilotConfigRequestType MessageType = 104

// Autopilot defaults, as Nomad's.
const (
	DefaultAutopilotLastContactThreshold    = 200 * time.Millisecond
	DefaultAutopilotMaxTrailingLogs         = 250
	DefaultAutopilotServerStabilizationTime = 10 * time.Second

	// Bounds of the durations an operator may set.
	MaxAutopilotLastContactThreshold    = time.Hour
	MaxAutopilotServerStabilizationTime = 24 * time.Hour
	MaxAutopilotMinQuorum               = 64
)

// AutopilotConfig is the autopilot configuration, replicated through
// Raft (Nomad's fields).
type AutopilotConfig struct {
	// CleanupDeadServers removes a server that has been gone longer than
	// ServerStabilizationTime from the Raft configuration, when the
	// cluster keeps its quorum without it.
	CleanupDeadServers bool
	// LastContactThreshold is how long a follower may go without contact
	// from the leader and still be healthy.
	LastContactThreshold time.Duration
	// MaxTrailingLogs is how many log entries a server may trail the
	// leader by and still be healthy.
	MaxTrailingLogs uint64
	// MinQuorum is the voter count cleanup never goes below.
	MinQuorum uint
	// ServerStabilizationTime is how long a server must be healthy to be
	// stable, and how long a failed server is kept before its cleanup.
	ServerStabilizationTime time.Duration
	// The enterprise features: stored and reported, not acted on.
	EnableRedundancyZones   bool
	DisableUpgradeMigration bool
	EnableCustomUpgrades    bool
	CreateIndex             uint64
	ModifyIndex             uint64
}

// DefaultAutopilotConfig is the configuration of a cluster that was never
// given one.
func DefaultAutopilotConfig() *AutopilotConfig {
	return &AutopilotConfig{
		CleanupDeadServers:      true,
		LastContactThreshold:    DefaultAutopilotLastContactThreshold,
		MaxTrailingLogs:         DefaultAutopilotMaxTrailingLogs,
		ServerStabilizationTime: DefaultAutopilotServerStabilizationTime,
	}
}

// Validate checks the configuration's bounds.
func (c *AutopilotConfig) Validate() error {
	var l errList
	if c == nil {
		l.add("autopilot configuration: missing")
		return l.err()
	}
	if c.LastContactThreshold <= 0 || c.LastContactThreshold > MaxAutopilotLastContactThreshold {
		l.add("LastContactThreshold %s: must be more than 0 and at most %s", c.LastContactThreshold, MaxAutopilotLastContactThreshold)
	}
	if c.ServerStabilizationTime < 0 || c.ServerStabilizationTime > MaxAutopilotServerStabilizationTime {
		l.add("ServerStabilizationTime %s: must be between 0 and %s", c.ServerStabilizationTime, MaxAutopilotServerStabilizationTime)
	}
	if c.MinQuorum > MaxAutopilotMinQuorum {
		l.add("MinQuorum %d: must be at most %d", c.MinQuorum, MaxAutopilotMinQuorum)
	}
	return l.err()
}

// Copy returns a copy of the configuration.
func (c *AutopilotConfig) Copy() *AutopilotConfig {
	if c == nil {
		return nil
	}
	cp := *c
	return &cp
}

// MarshalJSON writes the durations as strings ("200ms"), as Nomad's API
// does.
func (c AutopilotConfig) MarshalJSON() ([]byte, error) {
	type plain AutopilotConfig
	return json.Marshal(struct {
		LastContactThreshold    string
		ServerStabilizationTime string
		*plain
	}{c.LastContactThreshold.String(), c.ServerStabilizationTime.String(), (*plain)(&c)})
}

// UnmarshalJSON reads the durations as strings or nanoseconds.
func (c *AutopilotConfig) UnmarshalJSON(b []byte) error {
	type plain AutopilotConfig
	aux := struct {
		LastContactThreshold    json.RawMessage
		ServerStabilizationTime json.RawMessage
		*plain
	}{plain: (*plain)(c)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	d, err := decodeDuration(aux.LastContactThreshold)
	if err != nil {
		return NewError(ErrInvalid, "LastContactThreshold: %v", err)
	}
	c.LastContactThreshold = d
	if d, err = decodeDuration(aux.ServerStabilizationTime); err != nil {
		return NewError(ErrInvalid, "ServerStabilizationTime: %v", err)
	}
	c.ServerStabilizationTime = d
	return nil
}

// AutopilotSetConfigRequest writes the configuration (type 104). With
// CAS, the write happens only when the stored configuration's
// ModifyIndex is Index; the entry's response says whether it did.
type AutopilotSetConfigRequest struct {
	Config AutopilotConfig
	CAS    bool `codec:",omitempty"`
	Index  uint64
}

// ServerHealth is one server's health as autopilot sees it (Nomad's
// fields). LastContact is a duration string in JSON ("12ms").
type ServerHealth struct {
	ID          string
	Name        string
	Address     string
	SerfStatus  string
	Version     string
	Leader      bool
	LastContact time.Duration
	LastTerm    uint64
	LastIndex   uint64
	Healthy     bool
	Voter       bool
	StableSince time.Time
}

// MarshalJSON writes LastContact as a duration string.
func (h ServerHealth) MarshalJSON() ([]byte, error) {
	type plain ServerHealth
	return json.Marshal(struct {
		LastContact string
		*plain
	}{h.LastContact.String(), (*plain)(&h)})
}

// UnmarshalJSON reads LastContact as a string or nanoseconds.
func (h *ServerHealth) UnmarshalJSON(b []byte) error {
	type plain ServerHealth
	aux := struct {
		LastContact json.RawMessage
		*plain
	}{plain: (*plain)(h)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	d, err := decodeDuration(aux.LastContact)
	h.LastContact = d
	return err
}

// OperatorHealthReply is the body of GET /v1/operator/autopilot/health.
type OperatorHealthReply struct {
	Healthy          bool
	FailureTolerance int
	Leader           string
	Voters           []string
	Servers          []ServerHealth
}

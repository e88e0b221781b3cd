package server

import "github.com/drover-org/drover/core/server/raftstore"

// The Raft timing knobs of Config, defined in raftstore.
const (
	DefaultRaftMultiplier = raftstore.DefaultMultiplier
	MaxRaftMultiplier     = raftstore.MaxMultiplier
)

// RaftTiming sets Raft's timers directly (Config.RaftTiming).
type RaftTiming = raftstore.Timing

// ValidateRaftMultiplier checks a raft_multiplier: 0 means the default.
func ValidateRaftMultiplier(m int) error { return raftstore.ValidateMultiplier(m) }

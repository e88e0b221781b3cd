package raftstore

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

// Raft's timers outside dev mode are hashicorp/raft's defaults, which are
// Nomad's at raft_multiplier = 1: a follower that hears nothing from the
// leader for a heartbeat timeout (1s) stands for election, and a leader
// that cannot reach a quorum for its lease (500ms) steps down. Shorter
// timers fail over faster but cost leaderless time that no failure caused
// whenever a loaded machine delays a heartbeat: at 500ms/250ms three
// servers on a busy 2-core host lost their leader every few minutes.
const (
	// DefaultMultiplier is the raft_multiplier of a config that sets none.
	DefaultMultiplier = 1
	// MaxMultiplier is Nomad's bound: ten seconds without a leader's
	// heartbeat is already a long outage.
	MaxMultiplier = 10

	baseHeartbeatTimeout   = time.Second
	baseElectionTimeout    = time.Second
	baseLeaderLeaseTimeout = 500 * time.Millisecond
	baseCommitTimeout      = 50 * time.Millisecond
)

// Timing sets Raft's timers directly, in place of the multiplier's: for
// tests that measure failover on purpose.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is optional: raft's default scaled when zero.
	CommitTimeout time.Duration
}

// ValidateMultiplier checks a raft_multiplier: 0 means the default.
func ValidateMultiplier(m int) error {
	if m < 0 || m > MaxMultiplier {
		return structs.NewError(structs.ErrInvalid, "raft_multiplier: must be between 1 and %d (got %d)", MaxMultiplier, m)
	}
	return nil
}

// ApplyTiming sets rc's timers from the multiplier (0 is the default), or
// from t when a test gave it, and refuses timers Raft would refuse.
func ApplyTiming(rc *raft.Config, multiplier int, t *Timing) error {
	if err := ValidateMultiplier(multiplier); err != nil {
		return err
	}
	m := time.Duration(multiplier)
	if m == 0 {
		m = DefaultMultiplier
	}
	rc.HeartbeatTimeout = baseHeartbeatTimeout * m
	rc.ElectionTimeout = baseElectionTimeout * m
	rc.LeaderLeaseTimeout = baseLeaderLeaseTimeout * m
	rc.CommitTimeout = baseCommitTimeout * m
	if t != nil {
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = t.HeartbeatTimeout, t.ElectionTimeout, t.LeaderLeaseTimeout
		if t.CommitTimeout > 0 {
			rc.CommitTimeout = t.CommitTimeout
		}
	}
	// hashicorp/raft refuses these at NewRaft with a less specific error.
	switch {
	case rc.HeartbeatTimeout < 5*time.Millisecond || rc.ElectionTimeout < 5*time.Millisecond || rc.LeaderLeaseTimeout < 5*time.Millisecond:
		return structs.NewError(structs.ErrInvalid, "raft timing: heartbeat, election and leader lease timeouts must be at least 5ms (got %s, %s, %s)",
			rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout)
	case rc.ElectionTimeout < rc.HeartbeatTimeout:
		return structs.NewError(structs.ErrInvalid, "raft timing: the election timeout (%s) must not be shorter than the heartbeat timeout (%s)",
			rc.ElectionTimeout, rc.HeartbeatTimeout)
	case rc.LeaderLeaseTimeout > rc.HeartbeatTimeout:
		return structs.NewError(structs.ErrInvalid, "raft timing: the leader lease (%s) must not exceed the heartbeat timeout (%s)",
			rc.LeaderLeaseTimeout, rc.HeartbeatTimeout)
	}
	return nil
}

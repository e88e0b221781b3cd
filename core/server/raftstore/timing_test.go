package raftstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

func TestApplyTimingMultiplier(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		multiplier                         int
		timing                             *Timing
		heartbeat, election, lease, commit time.Duration
	}{
		{"default", 0, nil, time.Second, time.Second, 500 * time.Millisecond, 50 * time.Millisecond},
		{"one", 1, nil, time.Second, time.Second, 500 * time.Millisecond, 50 * time.Millisecond},
		{"five", 5, nil, 5 * time.Second, 5 * time.Second, 2500 * time.Millisecond, 250 * time.Millisecond},
		{"max", MaxMultiplier, nil, 10 * time.Second, 10 * time.Second, 5 * time.Second, 500 * time.Millisecond},
		{"explicit for a failover test", 0, &Timing{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond},
			200 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond, 50 * time.Millisecond},
		{"explicit commit timeout", 0, &Timing{HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 10 * time.Millisecond},
			200 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := raft.DefaultConfig()
			if err := ApplyTiming(rc, tc.multiplier, tc.timing); err != nil {
				t.Fatal(err)
			}
			if rc.HeartbeatTimeout != tc.heartbeat || rc.ElectionTimeout != tc.election || rc.LeaderLeaseTimeout != tc.lease || rc.CommitTimeout != tc.commit {
				t.Errorf("heartbeat %s, election %s, lease %s, commit %s; want %s, %s, %s, %s",
					rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout, rc.CommitTimeout, tc.heartbeat, tc.election, tc.lease, tc.commit)
			}
		})
	}
}

func TestApplyTimingInvalid(t *testing.T) {
	for _, tc := range []struct {
		name       string
		multiplier int
		timing     *Timing
		want       string
	}{
		{"multiplier above 10", 11, nil, "raft_multiplier: must be between 1 and 10 (got 11)"},
		{"negative multiplier", -1, nil, "raft_multiplier: must be between 1 and 10 (got -1)"},
		{"lease over heartbeat", 0, &Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 2 * time.Second}, "leader lease (2s) must not exceed the heartbeat timeout (1s)"},
		{"election under heartbeat", 0, &Timing{HeartbeatTimeout: time.Second, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond}, "election timeout (100ms) must not be shorter"},
		{"zero", 0, &Timing{}, "at least 5ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ApplyTiming(raft.DefaultConfig(), tc.multiplier, tc.timing)
			if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an invalid-request error containing %q", err, tc.want)
			}
		})
	}
	for _, m := range []int{0, 1, MaxMultiplier} {
		if err := ValidateMultiplier(m); err != nil {
			t.Errorf("ValidateMultiplier(%d) = %v", m, err)
		}
	}
}

package server

import (
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

// trackedServer is what the leader remembers of one server across
// autopilot rounds.
type trackedServer struct {
	ID, Address string
	healthy     bool
	// stableSince is when healthy last changed.
	stableSince time.Time
	// failedSince is when the server stopped answering (zero: it answers).
	failedSince time.Time
}

// decideAutopilot is one autopilot round's decision, without I/O: from
// the configuration, the Raft servers, the leader's ID and each server's
// answer to the probe (nil: no answer), it updates tracked (by server ID)
// and returns the health reply and the dead server to remove, if any.
//
// A server is healthy when it answers, and (unless it is the leader) has
// heard from the leader within LastContactThreshold, is at the leader's
// log term and trails the leader's log by at most MaxTrailingLogs. A
// server that has not answered for ServerStabilizationTime is removed
// when the voters left keep MinQuorum and a quorum of them answers; one
// at a time, the one gone longest first.
func decideAutopilot(cfg *structs.AutopilotConfig, servers []raft.Server, leaderID string, probes map[string]*AutopilotStats,
	tracked map[string]*trackedServer, now time.Time) (*structs.OperatorHealthReply, *trackedServer) {
	inConfig := make(map[string]bool, len(servers))
	for _, srv := range servers {
		inConfig[string(srv.ID)] = true
	}
	for id := range tracked {
		if !inConfig[id] {
			delete(tracked, id)
		}
	}
	leader := probes[leaderID]
	reply := &structs.OperatorHealthReply{Healthy: true, Leader: leaderID}
	voters, healthyVoters, aliveVoters := 0, 0, 0
	var candidate *trackedServer
	for _, srv := range servers {
		id := string(srv.ID)
		st := probes[id]
		alive := st != nil
		t, seen := tracked[id]
		if !seen {
			t = &trackedServer{ID: id, stableSince: now}
			tracked[id] = t
		}
		t.Address = string(srv.Address)
		switch {
		case alive:
			t.failedSince = time.Time{}
		case t.failedSince.IsZero():
			t.failedSince = now
		}
		healthy := alive && (id == leaderID || followerHealthy(cfg, st, leader))
		if seen && healthy != t.healthy {
			t.stableSince = now
		}
		t.healthy = healthy
		voter := srv.Suffrage == raft.Voter
		h := structs.ServerHealth{ID: id, Name: id, Address: string(srv.Address), SerfStatus: "failed",
			Leader: id == leaderID, Healthy: healthy, Voter: voter, StableSince: t.stableSince.UTC()}
		if alive {
			h.SerfStatus, h.Version, h.LastContact, h.LastTerm, h.LastIndex = "alive", st.Version, st.LastContact, st.LastTerm, st.LastIndex
			if st.Name != "" {
				h.Name = st.Name
			}
		}
		reply.Servers = append(reply.Servers, h)
		if !healthy {
			reply.Healthy = false
		}
		if voter {
			voters++
			reply.Voters = append(reply.Voters, id)
			if healthy {
				healthyVoters++
			}
			if alive {
				aliveVoters++
			}
		}
		if !alive && id != leaderID && now.Sub(t.failedSince) >= cfg.ServerStabilizationTime &&
			(candidate == nil || t.failedSince.Before(candidate.failedSince)) {
			candidate = t
		}
	}
	sort.Slice(reply.Servers, func(i, j int) bool { return reply.Servers[i].Name < reply.Servers[j].Name })
	sort.Strings(reply.Voters)
	reply.FailureTolerance = max(0, healthyVoters-(voters/2+1))
	if candidate == nil || !canRemove(cfg, servers, candidate.ID, voters, aliveVoters) {
		return reply, nil
	}
	c := *candidate
	return reply, &c
}

// followerHealthy is the health of a follower that answered.
func followerHealthy(cfg *structs.AutopilotConfig, st, leader *AutopilotStats) bool {
	if st.LastContact < 0 || st.LastContact > cfg.LastContactThreshold || leader == nil {
		return false
	}
	if st.LastTerm != leader.LastTerm {
		return false
	}
	return st.LastIndex >= leader.LastIndex || leader.LastIndex-st.LastIndex <= cfg.MaxTrailingLogs
}

// canRemove says whether the cluster keeps its quorum without the dead
// server id: a non-voter always goes; a voter only when the voters left
// are at least MinQuorum and a majority of them answer.
func canRemove(cfg *structs.AutopilotConfig, servers []raft.Server, id string, voters, aliveVoters int) bool {
	for _, srv := range servers {
		if string(srv.ID) != id {
			continue
		}
		if srv.Suffrage != raft.Voter {
			return true
		}
		left := voters - 1
		if left < 1 || (cfg.MinQuorum > 0 && left < int(cfg.MinQuorum)) {
			return false
		}
		return aliveVoters >= left/2+1
	}
	return false
}

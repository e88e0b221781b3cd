package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// Autopilot (Nomad's /v1/operator/autopilot/*): the leader probes every
// server of the Raft configuration each autopilotInterval, keeps each
// one's health (autopilot_health.go decides it, purely), and removes a
// server that has been unreachable longer than ServerStabilizationTime
// when the cluster keeps its quorum without it. The configuration is
// replicated through Raft.
//
// A removed server is not forgotten: as Nomad's leader adds a server back
// when Serf sees it alive again, the leader keeps probing the servers
// autopilot removed and adds one back as a voter as soon as it answers (a
// healed partition, a restarted machine). A server an operator removed
// (raft remove-peer) is not re-added.

// autopilotInterval is how often the leader probes the servers.
const autopilotInterval = time.Second

// autopilotProbeTimeout bounds one server's answer to a probe: a server on
// a loaded machine answers well within it, a dead one is failed after it.
const autopilotProbeTimeout = 3 * time.Second

// AutopilotConfigArgs is a write of the autopilot configuration.
type AutopilotConfigArgs struct {
	Config *structs.AutopilotConfig
	CAS    bool
	Index  uint64
}

// AutopilotConfigReply says whether a write happened and at which index.
type AutopilotConfigReply struct {
	Updated bool
	Index   uint64
}

// AutopilotStats is what a server reports of its own Raft state.
type AutopilotStats struct {
	ID      string
	Name    string
	Version string
	// LastContact is the time since this server last heard from the
	// leader (0 on the leader, -1 never).
	LastContact time.Duration
	LastTerm    uint64
	LastIndex   uint64
}

// AutopilotConfig returns the autopilot configuration and its index.
func (ep Operator) AutopilotConfig() (*structs.AutopilotConfig, uint64, error) {
	idx, c, err := ep.srv.State().AutopilotConfig()
	return c, idx, err
}

// SetAutopilotConfig replaces the autopilot configuration; with cas only
// when the stored one's ModifyIndex is index (0: none stored yet). It
// reports whether it wrote.
func (ep Operator) SetAutopilotConfig(ctx context.Context, cfg *structs.AutopilotConfig, cas bool, index uint64) (bool, uint64, error) {
	s := ep.srv
	if r, ok, err := forward[AutopilotConfigArgs, AutopilotConfigReply](ctx, s, "Operator.AutopilotSetConfig",
		&AutopilotConfigArgs{Config: cfg, CAS: cas, Index: index}); ok {
		if err != nil {
			return false, 0, err
		}
		return r.Updated, r.Index, nil
	}
	if err := cfg.Validate(); err != nil {
		return false, 0, err
	}
	c := *cfg
	c.CreateIndex, c.ModifyIndex = 0, 0
	idx, resp, err := s.raftApplyResponse(structs.AutopilotConfigRequestType,
		&structs.AutopilotSetConfigRequest{Config: c, CAS: cas, Index: index})
	if err != nil {
		return false, 0, err
	}
	updated, _ := resp.(bool)
	if updated {
		s.logger.Info("autopilot configuration updated", "cleanup_dead_servers", c.CleanupDeadServers,
			"last_contact_threshold", c.LastContactThreshold, "max_trailing_logs", c.MaxTrailingLogs,
			"min_quorum", c.MinQuorum, "server_stabilization_time", c.ServerStabilizationTime, "index", idx)
	}
	return updated, idx, nil
}

// AutopilotHealth reports the health of every server, as the leader sees
// it (a follower asks the leader).
func (ep Operator) AutopilotHealth(ctx context.Context) (*structs.OperatorHealthReply, error) {
	s := ep.srv
	if r, ok, err := forward[Empty, structs.OperatorHealthReply](ctx, s, "Operator.AutopilotHealth", &Empty{}); ok {
		return r, err
	}
	if !s.IsLeader() {
		return nil, structs.NewError(structs.ErrNoLeader, "No cluster leader")
	}
	h := s.autopilot.health()
	if h == nil {
		// No round yet this term: probe now.
		if _, err := s.autopilotRound(ctx, false); err != nil {
			return nil, err
		}
		h = s.autopilot.health()
	}
	if h == nil {
		return nil, structs.NewError(structs.ErrUnavailable, "autopilot: no server health known yet")
	}
	return h, nil
}

// autopilotStats is this server's own report.
func (s *Server) autopilotStats() *AutopilotStats {
	st := &AutopilotStats{ID: s.raftID(), Name: s.cfg.NodeName, Version: s.cfg.Version, LastIndex: s.raft.LastIndex()}
	if st.Name == "" {
		st.Name = st.ID
	}
	stats := s.raft.Stats()
	st.LastTerm, _ = strconv.ParseUint(stats["last_log_term"], 10, 64)
	switch {
	case s.IsLeader():
	case s.raft.LastContact().IsZero():
		st.LastContact = -1
	default:
		st.LastContact = time.Since(s.raft.LastContact())
	}
	return st
}

func (ep Operator) registerAutopilot(rs *rpc.Server, mark func(context.Context) context.Context) {
	s := ep.srv
	rpc.Handle(rs, "Autopilot.ServerStats", func(context.Context, *Empty) (*AutopilotStats, error) {
		return s.autopilotStats(), nil
	})
	rpc.Handle(rs, "Operator.AutopilotSetConfig", func(ctx context.Context, a *AutopilotConfigArgs) (*AutopilotConfigReply, error) {
		updated, idx, err := ep.SetAutopilotConfig(mark(ctx), a.Config, a.CAS, a.Index)
		return &AutopilotConfigReply{Updated: updated, Index: idx}, err
	})
	rpc.Handle(rs, "Operator.AutopilotHealth", func(ctx context.Context, _ *Empty) (*structs.OperatorHealthReply, error) {
		return ep.AutopilotHealth(mark(ctx))
	})
}

// autopilotTracker is the leader's memory of the servers' health across
// rounds. Its zero value is ready; it is reset at each step-up.
type autopilotTracker struct {
	mu      sync.Mutex
	servers map[string]*trackedServer
	last    *structs.OperatorHealthReply
	// removed are the servers this leader's autopilot removed, by ID
	// (their Raft address): probed each round and added back when they
	// answer. Kept across step-downs of this server.
	removed map[string]raft.ServerAddress
}

func (t *autopilotTracker) reset() {
	t.mu.Lock()
	t.servers, t.last = nil, nil
	t.mu.Unlock()
}

func (t *autopilotTracker) health() *structs.OperatorHealthReply {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		return nil
	}
	c := *t.last
	c.Servers = append([]structs.ServerHealth(nil), t.last.Servers...)
	c.Voters = append([]string(nil), t.last.Voters...)
	return &c
}

// runAutopilot is the leader loop: a round each autopilotInterval.
func (s *Server) runAutopilot(ctx context.Context) {
	s.autopilot.reset()
	s.initAutopilotConfig(ctx)
	t := time.NewTicker(autopilotInterval)
	defer t.Stop()
	for {
		if _, err := s.autopilotRound(ctx, true); err != nil && ctx.Err() == nil {
			s.logger.Debug("autopilot round failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// initAutopilotConfig writes the agent's autopilot block when the cluster
// has no configuration yet (a check-and-set at 0, so that a configuration
// an operator set is never overwritten).
func (s *Server) initAutopilotConfig(ctx context.Context) {
	if s.cfg.Autopilot == nil {
		return
	}
	if idx, _, err := s.State().AutopilotConfig(); err != nil || idx != 0 {
		return
	}
	if _, _, err := s.Operator().SetAutopilotConfig(ctx, s.cfg.Autopilot, true, 0); err != nil && ctx.Err() == nil {
		s.logger.Warn("autopilot: could not write the agent's autopilot configuration", "error", err)
	}
}

// autopilotRound probes every server, updates the tracker and, with
// cleanup, removes one dead server when the configuration allows it. It
// returns the server it removed, if any.
func (s *Server) autopilotRound(ctx context.Context, cleanup bool) (string, error) {
	_, cfg, err := s.State().AutopilotConfig()
	if err != nil {
		return "", err
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return "", err
	}
	servers := f.Configuration().Servers
	_, leaderID := s.raft.LeaderWithID()
	s.readdReturnedServers(ctx, servers)
	probes := s.probeServers(ctx, servers)
	now := time.Now()

	s.autopilot.mu.Lock()
	if s.autopilot.servers == nil {
		s.autopilot.servers = map[string]*trackedServer{}
	}
	reply, remove := decideAutopilot(cfg, servers, string(leaderID), probes, s.autopilot.servers, now)
	s.autopilot.last = reply
	s.autopilot.mu.Unlock()

	if !cleanup || !cfg.CleanupDeadServers || remove == nil || ctx.Err() != nil {
		return "", nil
	}
	s.logger.Info("autopilot: removing dead server from the Raft configuration", "id", remove.ID,
		"address", remove.Address, "failed_for", now.Sub(remove.failedSince).Round(time.Millisecond))
	if err := s.raft.RemoveServer(raft.ServerID(remove.ID), 0, 30*time.Second).Error(); err != nil {
		return "", err
	}
	s.logger.Info("autopilot: removed dead server", "id", remove.ID, "address", remove.Address)
	s.autopilot.mu.Lock()
	if s.autopilot.removed == nil {
		s.autopilot.removed = map[string]raft.ServerAddress{}
	}
	s.autopilot.removed[remove.ID] = raft.ServerAddress(remove.Address)
	s.autopilot.mu.Unlock()
	return remove.ID, nil
}

// readdReturnedServers probes the servers autopilot removed and adds back,
// as voters, those that answer again. One that is in the configuration
// again (added by an operator) is forgotten.
func (s *Server) readdReturnedServers(ctx context.Context, servers []raft.Server) {
	s.autopilot.mu.Lock()
	gone := make([]raft.Server, 0, len(s.autopilot.removed))
	for id, addr := range s.autopilot.removed {
		gone = append(gone, raft.Server{ID: raft.ServerID(id), Address: addr})
	}
	s.autopilot.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	inConfig := make(map[raft.ServerID]bool, len(servers))
	for _, srv := range servers {
		inConfig[srv.ID] = true
	}
	var probe []raft.Server
	for _, srv := range gone {
		if inConfig[srv.ID] {
			s.forgetRemoved(string(srv.ID))
			continue
		}
		probe = append(probe, srv)
	}
	for id, st := range s.probeServers(ctx, probe) {
		if st == nil || st.ID != id || ctx.Err() != nil {
			continue
		}
		s.autopilot.mu.Lock()
		addr := s.autopilot.removed[id]
		s.autopilot.mu.Unlock()
		s.logger.Info("autopilot: a server it removed answers again; adding it back", "id", id, "address", addr)
		if err := s.raft.AddVoter(raft.ServerID(id), addr, 0, 30*time.Second).Error(); err != nil {
			s.logger.Warn("autopilot: could not add the server back", "id", id, "address", addr, "error", err)
			continue
		}
		s.forgetRemoved(id)
	}
}

func (s *Server) forgetRemoved(id string) {
	s.autopilot.mu.Lock()
	delete(s.autopilot.removed, id)
	s.autopilot.mu.Unlock()
}

// probeServers asks every server for its stats at once; a server that does
// not answer within autopilotProbeTimeout has a nil entry.
func (s *Server) probeServers(ctx context.Context, servers []raft.Server) map[string]*AutopilotStats {
	out := make(map[string]*AutopilotStats, len(servers))
	var mu sync.Mutex
	set := func(id string, st *AutopilotStats) {
		mu.Lock()
		out[id] = st
		mu.Unlock()
	}
	var wg sync.WaitGroup
	self := s.raftID()
	for _, srv := range servers {
		id, addr := string(srv.ID), string(srv.Address)
		switch {
		case id == self:
			set(id, s.autopilotStats())
			continue
		case s.rpcPool == nil:
			set(id, nil)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, autopilotProbeTimeout)
			defer cancel()
			var st *AutopilotStats
			if conn, err := s.rpcPool.Get(addr); err == nil {
				st, _ = rpc.Call[Empty, AutopilotStats](pctx, conn, "Autopilot.ServerStats", &Empty{})
			}
			set(id, st)
		}()
	}
	wg.Wait()
	return out
}

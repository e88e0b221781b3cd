package server

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// ServerInfo describes one server to its peers and to operators.
type ServerInfo struct {
	ID         string
	Name       string
	RPCAddr    string
	HTTPAddr   string
	Region     string
	Datacenter string
	IsLeader   bool
	LeaderAddr string
	// HasState is true once the server belongs to a Raft configuration.
	HasState  bool
	LastIndex uint64
	Version   string
}

// RaftPeer is one entry of the Raft configuration.
type RaftPeer struct {
	ID      string
	Node    string
	Address string
	Leader  bool
	Voter   bool
}

// RaftPeerArgs names a peer to add or remove.
type RaftPeerArgs struct {
	ID      string
	Address string
}

// RaftPeersReply lists the Raft configuration.
type RaftPeersReply struct {
	Servers []RaftPeer
	Index   uint64
}

// Member is one row of `drover server members`.
type Member struct {
	Name       string
	Address    string
	Status     string // alive | failed
	Leader     bool
	Region     string
	Datacenter string
	Version    string
	RaftID     string
}

// Info describes this server.
func (s *Server) Info() *ServerInfo {
	leader, _ := s.raft.LeaderWithID()
	info := &ServerInfo{
		ID: s.raftID(), Name: s.cfg.NodeName, RPCAddr: s.cfg.RPCAddr, HTTPAddr: s.cfg.HTTPAddr,
		Region: s.cfg.Region, Datacenter: s.cfg.Datacenter, IsLeader: s.IsLeader(),
		LeaderAddr: string(leader), LastIndex: s.raft.LastIndex(), Version: s.cfg.Version,
	}
	if f := s.raft.GetConfiguration(); f.Error() == nil && len(f.Configuration().Servers) > 0 {
		info.HasState = true
	}
	return info
}

func (s *Server) raftID() string {
	if s.cfg.NodeName != "" {
		return s.cfg.NodeName
	}
	return "server-1"
}

// RaftPeers lists the Raft configuration.
func (ep Operator) RaftPeers() (*RaftPeersReply, error) {
	s := ep.srv
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	_, leaderID := s.raft.LeaderWithID()
	out := &RaftPeersReply{Index: f.Index()}
	for _, srv := range f.Configuration().Servers {
		addr := string(srv.Address)
		if s.cfg.DevMode && s.cfg.RPCAddr != "" && string(srv.ID) == s.raftID() {
			// The dev server's in-memory transport is addressed by its
			// ID: show the RPC address it serves on, as LeaderAddr does.
			addr = s.cfg.RPCAddr
		}
		out.Servers = append(out.Servers, RaftPeer{
			ID: string(srv.ID), Node: string(srv.ID), Address: addr,
			Leader: srv.ID == leaderID, Voter: srv.Suffrage == raft.Voter,
		})
	}
	return out, nil
}

// AddRaftPeer adds a server as a voter (leader only; followers forward).
func (ep Operator) AddRaftPeer(ctx context.Context, id, addr string) error {
	s := ep.srv
	if _, ok, err := forward[RaftPeerArgs, Empty](ctx, s, "Operator.RaftAddPeer", &RaftPeerArgs{ID: id, Address: addr}); ok {
		return err
	}
	if id == "" || addr == "" {
		return structs.NewError(structs.ErrInvalid, "raft peer: ID and Address are required")
	}
	if err := s.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 30*time.Second).Error(); err != nil {
		return fmt.Errorf("add raft peer %s at %s: %w", id, addr, err)
	}
	s.logger.Info("raft peer added", "id", id, "address", addr)
	return nil
}

// RemoveRaftPeer removes a server, by ID or address (leader only).
func (ep Operator) RemoveRaftPeer(ctx context.Context, id, addr string) error {
	s := ep.srv
	if _, ok, err := forward[RaftPeerArgs, Empty](ctx, s, "Operator.RaftRemovePeer", &RaftPeerArgs{ID: id, Address: addr}); ok {
		return err
	}
	peers, err := ep.RaftPeers()
	if err != nil {
		return err
	}
	for _, p := range peers.Servers {
		if (id != "" && p.ID == id) || (addr != "" && p.Address == addr) {
			if err := s.raft.RemoveServer(raft.ServerID(p.ID), 0, 30*time.Second).Error(); err != nil {
				return fmt.Errorf("remove raft peer %s: %w", p.ID, err)
			}
			s.logger.Info("raft peer removed", "id", p.ID, "address", p.Address)
			return nil
		}
	}
	// Nomad's words (its API tests match them).
	if id != "" {
		return structs.NewError(structs.ErrNotFound, "id %q was not found in the Raft configuration", id)
	}
	return structs.NewError(structs.ErrNotFound, "address %q was not found in the Raft configuration", addr)
}

// Members asks every server of the Raft configuration for its info, all
// at once: a member is "alive" when it answers within memberInfoTimeout
// (quick failures, such as a pooled connection the peer closed, are tried
// again until then), "failed" otherwise.
func (ep Operator) Members(ctx context.Context) ([]*Member, error) {
	s := ep.srv
	peers, err := ep.RaftPeers()
	if err != nil {
		return nil, err
	}
	out := make([]*Member, len(peers.Servers))
	var wg sync.WaitGroup
	for i, p := range peers.Servers {
		m := &Member{Name: p.ID, Address: p.Address, Status: "failed", Leader: p.Leader, RaftID: p.ID}
		out[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := leaderLink{s}.peerInfo(ctx, p.Address)
			if err != nil {
				return
			}
			m.Status, m.Region, m.Datacenter, m.Version = "alive", info.Region, info.Datacenter, info.Version
			if info.Name != "" {
				m.Name = info.Name
			}
		}()
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// memberInfoTimeout bounds how long Members waits for one server's info:
// long enough for a server on a loaded machine, short enough for
// `server members` to answer promptly when one is down.
const memberInfoTimeout = 5 * time.Second

// peerInfo asks the server at addr for its info, retrying until
// memberInfoTimeout.
func (l leaderLink) peerInfo(ctx context.Context, addr string) (*ServerInfo, error) {
	s := l.s
	if addr == s.cfg.RPCAddr || s.rpcPool == nil {
		return s.Info(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, memberInfoTimeout)
	defer cancel()
	for {
		conn, err := s.rpcPool.Get(addr)
		if err == nil {
			var info *ServerInfo
			if info, err = rpc.Call[Empty, ServerInfo](ctx, conn, "Status.ServerInfo", &Empty{}); err == nil {
				return info, nil
			}
		}
		// A connection the peer closed, or one gRPC is re-dialling,
		// fails at once: try again until the deadline.
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (ep Operator) register(rs *rpc.Server, mark func(context.Context) context.Context) {
	s := ep.srv
	rpc.Handle(rs, "Status.ServerInfo", func(ctx context.Context, _ *Empty) (*ServerInfo, error) {
		return s.Info(), nil
	})
	rpc.Handle(rs, "Operator.RaftListPeers", func(ctx context.Context, _ *Empty) (*RaftPeersReply, error) {
		return ep.RaftPeers()
	})
	rpc.Handle(rs, "Operator.RaftAddPeer", func(ctx context.Context, a *RaftPeerArgs) (*Empty, error) {
		return &Empty{}, ep.AddRaftPeer(mark(ctx), a.ID, a.Address)
	})
	rpc.Handle(rs, "Operator.RaftRemovePeer", func(ctx context.Context, a *RaftPeerArgs) (*Empty, error) {
		return &Empty{}, ep.RemoveRaftPeer(mark(ctx), a.ID, a.Address)
	})
	rpc.Handle(rs, "Status.Members", func(ctx context.Context, _ *Empty) (*MembersReply, error) {
		m, err := ep.Members(ctx)
		return &MembersReply{Members: m}, err
	})
}

// MembersReply wraps the member list for RPC.
type MembersReply struct{ Members []*Member }

// joinLoop forms or joins a cluster: until this server belongs to a Raft
// configuration it asks every retry_join address for its info; once
// bootstrap_expect servers answer and none has state, every one of them
// bootstraps the same configuration (Raft accepts identical bootstraps);
// when some server already has state, this one asks the leader to add it.
func (l leaderLink) joinLoop(ctx context.Context) {
	s := l.s
	interval := s.cfg.RetryInterval
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		done, err := l.tryJoin(ctx)
		if done {
			return
		}
		if err != nil {
			s.logger.Debug("cluster join attempt failed; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tryJoin is one attempt of joinLoop; done once this server belongs to a
// Raft configuration.
func (l leaderLink) tryJoin(ctx context.Context) (bool, error) {
	s := l.s
	self := s.Info()
	if self.HasState {
		return true, nil
	}
	found := map[string]*ServerInfo{self.ID: self}
	var withState *ServerInfo
	var lastErr error
	for _, addr := range s.cfg.RetryJoin {
		if addr == s.cfg.RPCAddr {
			continue
		}
		info, err := l.peerInfo(ctx, addr)
		if err != nil {
			lastErr = err
			continue
		}
		found[info.ID] = info
		if info.HasState && info.LeaderAddr != "" {
			withState = info
		}
	}
	if withState != nil {
		conn, err := s.rpcPool.Get(withState.LeaderAddr)
		if err != nil {
			return false, err
		}
		_, err = rpc.Call[RaftPeerArgs, Empty](ctx, conn, "Operator.RaftAddPeer", &RaftPeerArgs{ID: self.ID, Address: self.RPCAddr})
		if err != nil {
			return false, err
		}
		s.logger.Info("joined cluster", "leader", withState.LeaderAddr)
		return true, nil
	}
	if len(found) < s.cfg.BootstrapExpect {
		if lastErr == nil {
			lastErr = fmt.Errorf("found %d of %d expected servers", len(found), s.cfg.BootstrapExpect)
		}
		return false, lastErr
	}
	conf := raft.Configuration{}
	for _, info := range found {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(info.ID), Address: raft.ServerAddress(info.RPCAddr), Suffrage: raft.Voter})
	}
	sort.Slice(conf.Servers, func(i, j int) bool { return conf.Servers[i].ID < conf.Servers[j].ID })
	if err := s.raft.BootstrapCluster(conf).Error(); err != nil && err != raft.ErrCantBootstrap {
		return false, err
	}
	s.logger.Info("bootstrapped cluster", "servers", len(conf.Servers))
	return true, nil
}

// Pool is the server's connection pool to other agents (nil in dev mode).
func (s *Server) Pool() *rpc.Pool { return s.rpcPool }

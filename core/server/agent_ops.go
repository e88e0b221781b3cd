package server

import (
	"context"
	"fmt"
	"net"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/worker"
	"github.com/drover-org/drover/core/structs"
)

// Limits of the agent operations below, applied before any RPC.
const (
	// MaxJoinAddrs bounds the addresses of one join.
	MaxJoinAddrs = 16
	// maxAddrLen bounds one address or server name.
	maxAddrLen = 256
)

// SchedulerWorkers describes this server's scheduler workers, for
// /v1/agent/schedulers.
func (s *Server) SchedulerWorkers() []worker.Info { return s.workers.Info() }

// SchedulerWorkerConfig is this server's worker count and the job types
// its workers schedule: those set by SetSchedulerWorkerConfig, else every
// type some scheduler plugin serves now.
func (s *Server) SchedulerWorkerConfig() (int, []string) {
	if enabled := s.workers.Enabled(); enabled != nil {
		return s.workers.Workers(), enabled
	}
	return s.workers.Workers(), s.workers.ServedTypes()
}

// SetSchedulerWorkerConfig changes this server's worker count (0 allowed)
// and the job types its workers take ("_core" and served types), until
// the agent restarts; see worker.Pool.Reconfigure. Errors are ErrInvalid
// naming the field.
func (s *Server) SetSchedulerWorkerConfig(num int, enabled []string) error {
	return s.workers.Reconfigure(num, enabled)
}

// RaftStats are hashicorp/raft's own statistics of this server (state,
// term, indexes, peers, last contact), as `nomad agent-info` prints them.
func (s *Server) RaftStats() map[string]string { return s.raft.Stats() }

// JoinServers joins this server and the servers at addrs (RPC
// "host:port") into one cluster and says how many were joined:
//   - a server without Raft state joins the cluster of one that has it
//     (this one asks that cluster's leader to add it, or asks its own
//     leader to add the other);
//   - a server already in this server's Raft configuration counts as
//     joined;
//   - two servers of different clusters, or two without state (a
//     bootstrap is bootstrap_expect's job), cannot be joined.
//
// The error joins the reasons of every address that failed.
func (s *Server) JoinServers(ctx context.Context, addrs []string) (int, error) {
	if len(addrs) == 0 {
		return 0, structs.NewError(structs.ErrInvalid, "address: at least one server address is required")
	}
	if len(addrs) > MaxJoinAddrs {
		return 0, structs.NewError(structs.ErrInvalid, "address: at most %d addresses, got %d", MaxJoinAddrs, len(addrs))
	}
	for _, a := range addrs {
		if len(a) > maxAddrLen {
			return 0, structs.NewError(structs.ErrInvalid, "address: %d bytes is longer than %d", len(a), maxAddrLen)
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return 0, structs.NewError(structs.ErrInvalid, "address: %q is not host:port", a)
		}
	}
	if s.rpcPool == nil {
		return 0, structs.NewError(structs.ErrInvalid, "this server runs in dev mode without an RPC listener: it cannot join other servers")
	}
	joined := 0
	var errs []error
	for _, addr := range addrs {
		if err := s.joinOne(ctx, addr); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		joined++
	}
	if len(errs) > 0 {
		return joined, joinErrors(errs)
	}
	return joined, nil
}

// joinErrors joins the failures of a join into one message.
func joinErrors(errs []error) error {
	msg := ""
	for i, e := range errs {
		if i > 0 {
			msg += "; "
		}
		msg += e.Error()
	}
	return fmt.Errorf("%s", msg)
}

func (s *Server) joinOne(ctx context.Context, addr string) error {
	self := s.Info()
	if addr == s.cfg.RPCAddr {
		return nil // itself
	}
	other, err := leaderLink{s}.peerInfo(ctx, addr)
	if err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	switch {
	case !self.HasState && other.HasState:
		if other.LeaderAddr == "" {
			return fmt.Errorf("its cluster has no leader now")
		}
		conn, err := s.rpcPool.Get(other.LeaderAddr)
		if err != nil {
			return err
		}
		_, err = rpc.Call[RaftPeerArgs, Empty](ctx, conn, "Operator.RaftAddPeer", &RaftPeerArgs{ID: self.ID, Address: self.RPCAddr})
		if err == nil {
			s.logger.Info("joined cluster", "through", addr, "leader", other.LeaderAddr)
		}
		return err
	case self.HasState && !other.HasState:
		return Operator{s}.AddRaftPeer(ctx, other.ID, other.RPCAddr)
	case self.HasState && other.HasState:
		peers, err := Operator{s}.RaftPeers()
		if err != nil {
			return err
		}
		for _, p := range peers.Servers {
			if p.ID == other.ID {
				return nil // already one cluster
			}
		}
		return fmt.Errorf("server %q belongs to another cluster", other.ID)
	default:
		return fmt.Errorf("neither server belongs to a cluster yet (bootstrap_expect forms the first one)")
	}
}

// ForceLeave removes the server named name (its member name or Raft ID)
// from the Raft configuration when it is not alive, as a member that
// left would be. An alive server is refused (stop it first, or remove it
// with operator raft remove-peer); an unknown name is a no-op, as Nomad's.
func (s *Server) ForceLeave(ctx context.Context, name string) error {
	if name == "" {
		return structs.NewError(structs.ErrInvalid, "node: the server's name is required")
	}
	if len(name) > maxAddrLen {
		return structs.NewError(structs.ErrInvalid, "node: %d bytes is longer than %d", len(name), maxAddrLen)
	}
	members, err := Operator{s}.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Name != name && m.RaftID != name {
			continue
		}
		if m.Status == "alive" {
			return structs.NewError(structs.ErrInvalid, "node: server %q is alive; stop it first or remove it with operator raft remove-peer", name)
		}
		return Operator{s}.RemoveRaftPeer(ctx, m.RaftID, "")
	}
	// Nomad's force-leave of a name no member has is a no-op, not an error.
	s.logger.Info("force-leave: no server by that name; nothing to do", "node", name)
	return nil
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
)

// remoteServers is a client's connection to the servers of its cluster
// over RPC. Calls go to one server at a time; when it is unreachable or has
// no leader the next server is tried, so a client rides through server
// restarts and leader elections.
type remoteServers struct {
	pool   *rpc.Pool
	logger hclog.Logger

	mu      sync.Mutex
	servers []string
	cur     int
	// noLeaderSince is when the server in use first answered "no
	// leader" in a row (zero: it did not); see rpc.NoLeaderPatience.
	noLeaderSince time.Time
}

func newRemoteServers(pool *rpc.Pool, servers []string, logger hclog.Logger) (*remoteServers, error) {
	if len(servers) == 0 {
		return nil, errors.New("client.servers: at least one server address is required")
	}
	return &remoteServers{pool: pool, servers: append([]string(nil), servers...), logger: logger}, nil
}

func (r *remoteServers) current() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servers[r.cur%len(r.servers)], r.cur
}

// rotate moves past the server at position seen (unless another caller
// already did).
func (r *remoteServers) rotate(seen int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == seen {
		r.cur++
		r.noLeaderSince = time.Time{}
	}
}

// waitForLeader reports whether calls stay with the server at pos, which
// just answered "no leader": yes until it has answered so for
// rpc.NoLeaderPatience (an election; the server forwards to the leader
// once there is one).
func (r *remoteServers) waitForLeader(pos int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != pos {
		return false
	}
	if r.noLeaderSince.IsZero() {
		r.noLeaderSince = time.Now()
	}
	if time.Since(r.noLeaderSince) < rpc.NoLeaderPatience {
		return true
	}
	r.noLeaderSince = time.Time{}
	return false
}

// leaderSeen clears the "no leader" streak of the server at pos.
func (r *remoteServers) leaderSeen(pos int) {
	r.mu.Lock()
	if r.cur == pos {
		r.noLeaderSince = time.Time{}
	}
	r.mu.Unlock()
}

// retryable reports whether another server may succeed where one failed.
func retryable(err error) bool {
	return errors.Is(err, structs.ErrUnavailable) || errors.Is(err, structs.ErrNoLeader)
}

func call[Req, Resp any](ctx context.Context, r *remoteServers, method string, req *Req) (*Resp, error) {
	var lastErr error
	for i := 0; i < len(r.servers); i++ {
		addr, pos := r.current()
		conn, err := r.pool.Get(addr)
		if err == nil {
			var resp *Resp
			resp, err = rpc.Call[Req, Resp](ctx, conn, method, req)
			if err == nil || !retryable(err) {
				r.leaderSeen(pos)
				return resp, err
			}
			if errors.Is(err, structs.ErrNoLeader) && r.waitForLeader(pos) {
				// An election: the caller retries here after its backoff.
				return nil, fmt.Errorf("server %s: %w", addr, err)
			}
		}
		lastErr = fmt.Errorf("server %s: %w", addr, err)
		r.logger.Debug("server call failed; trying the next server", "method", method, "server", addr, "error", err)
		r.rotate(pos)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, lastErr
}

func (r *remoteServers) RegisterNode(ctx context.Context, node *structs.Node) (time.Duration, error) {
	resp, err := call[server.NodeRegisterArgs, server.TTLReply](ctx, r, "Node.Register", &server.NodeRegisterArgs{Node: node})
	if err != nil {
		return 0, err
	}
	return resp.TTL, nil
}

func (r *remoteServers) Heartbeat(ctx context.Context, nodeID, secretID string) (time.Duration, error) {
	resp, err := call[server.NodeAuthArgs, server.TTLReply](ctx, r, "Node.Heartbeat", &server.NodeAuthArgs{NodeID: nodeID, SecretID: secretID})
	if err != nil {
		return 0, err
	}
	return resp.TTL, nil
}

func (r *remoteServers) Allocs(ctx context.Context, nodeID, secretID string, minIndex uint64, maxWait time.Duration) ([]*structs.Allocation, uint64, error) {
	resp, err := call[server.NodeAllocsArgs, server.NodeAllocsReply](ctx, r, "Node.GetAllocs", &server.NodeAllocsArgs{
		NodeID: nodeID, SecretID: secretID, MinIndex: minIndex, MaxWait: maxWait,
	})
	if err != nil {
		return nil, 0, err
	}
	return resp.Allocs, resp.Index, nil
}

func (r *remoteServers) UpdateAllocs(ctx context.Context, nodeID, secretID string, allocs []*structs.Allocation) error {
	_, err := call[server.NodeUpdateAllocsArgs, server.Empty](ctx, r, "Node.UpdateAllocs", &server.NodeUpdateAllocsArgs{
		NodeID: nodeID, SecretID: secretID, Allocs: allocs,
	})
	return err
}

func (r *remoteServers) ClaimVolume(ctx context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
	return call[structs.CSIVolumeClaimArgs, structs.CSIVolumeClaimReply](ctx, r, "CSIVolume.Claim", args)
}

func (r *remoteServers) UnpublishVolume(ctx context.Context, args *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error) {
	return call[structs.CSIVolumeUnpublishArgs, structs.CSIVolumeUnpublishReply](ctx, r, "CSIVolume.Unpublish", args)
}

func (r *remoteServers) ControllerOps(ctx context.Context, args *structs.CSIControllerPollArgs) (*structs.CSIControllerPollReply, error) {
	return call[structs.CSIControllerPollArgs, structs.CSIControllerPollReply](ctx, r, "CSIController.Poll", args)
}

func (r *remoteServers) ControllerDone(ctx context.Context, args *structs.CSIControllerDoneArgs) error {
	_, err := call[structs.CSIControllerDoneArgs, server.Empty](ctx, r, "CSIController.Done", args)
	return err
}

func (r *remoteServers) UpdateServices(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error {
	_, err := call[structs.ServiceRegistrationNodeArgs, server.Empty](ctx, r, "ServiceRegistration.NodeUpdate", args)
	return err
}

// LookupVariables reads variables for a task's templates.
func (r *remoteServers) LookupVariables(ctx context.Context, args *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error) {
	return call[structs.VariableTaskReadArgs, structs.VariableTaskReadReply](ctx, r, "Variables.TaskRead", args)
}

func (r *remoteServers) LookupServices(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
	return call[structs.ServiceLookupArgs, structs.ServiceLookupReply](ctx, r, "ServiceRegistration.Lookup", args)
}

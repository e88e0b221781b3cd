package agent

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
)

// clusterServer adapts a server to the HTTP API's optional Cluster
// interface (members, raft peers, leader forwarding of reads).
type clusterServer struct {
	*server.Server

	// The leader's HTTP address, remembered per leader RPC address so a
	// forwarded read costs no extra RPC while the leader stays the same.
	mu         sync.Mutex
	leaderRPC  string
	leaderHTTP string
}

var _ httpapi.Cluster = (*clusterServer)(nil)

// LeaderHTTPAddr asks the leader for its HTTP address.
func (c *clusterServer) LeaderHTTPAddr(ctx context.Context) string {
	info := c.Info()
	if info.IsLeader {
		return info.HTTPAddr
	}
	if info.LeaderAddr == "" || c.Pool() == nil {
		return ""
	}
	c.mu.Lock()
	if c.leaderRPC == info.LeaderAddr && c.leaderHTTP != "" {
		addr := c.leaderHTTP
		c.mu.Unlock()
		return addr
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := c.Pool().Get(info.LeaderAddr)
	if err != nil {
		return ""
	}
	li, err := rpc.Call[server.Empty, server.ServerInfo](ctx, conn, "Status.ServerInfo", &server.Empty{})
	if err != nil {
		return ""
	}
	c.mu.Lock()
	c.leaderRPC, c.leaderHTTP = info.LeaderAddr, li.HTTPAddr
	c.mu.Unlock()
	return li.HTTPAddr
}

func (c *clusterServer) ClusterMembers(ctx context.Context) ([]httpapi.ClusterMember, error) {
	ms, err := c.Operator().Members(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]httpapi.ClusterMember, 0, len(ms))
	for _, m := range ms {
		host, port, _ := net.SplitHostPort(m.Address)
		p, _ := strconv.Atoi(port)
		out = append(out, httpapi.ClusterMember{
			Name: m.Name, Address: host, Port: p, Status: m.Status, Leader: m.Leader,
			Region: m.Region, Datacenter: m.Datacenter, Version: m.Version, RaftID: m.RaftID,
		})
	}
	return out, nil
}

func (c *clusterServer) ClusterRaftPeers() ([]httpapi.RaftPeer, uint64, error) {
	r, err := c.Operator().RaftPeers()
	if err != nil {
		return nil, 0, err
	}
	out := make([]httpapi.RaftPeer, 0, len(r.Servers))
	for _, p := range r.Servers {
		out = append(out, httpapi.RaftPeer{ID: p.ID, Node: p.Node, Address: p.Address, Leader: p.Leader, Voter: p.Voter, RaftProtocol: "3"})
	}
	return out, r.Index, nil
}

func (c *clusterServer) ClusterRemoveRaftPeer(ctx context.Context, id, addr string) error {
	return c.Operator().RemoveRaftPeer(ctx, id, addr)
}

package httpapi

import (
	"context"
	"net"
	"net/http"
	"sort"
	"strconv"
)

// Cluster is implemented by servers that run in a cluster. The HTTP API
// finds it on the Server by type assertion, so a server that runs alone
// (and the fakes of tests) needs none of it: the cluster endpoints then
// answer 501 and every read is served locally.
type Cluster interface {
	// IsLeader reports whether this server is the Raft leader; reads that
	// must be consistent are served here only when it is.
	IsLeader() bool
	// LeaderHTTPAddr is the leader's HTTP address ("host:port"), or "" when
	// unknown.
	LeaderHTTPAddr(ctx context.Context) string
	// ClusterMembers lists the servers of the Raft configuration, with the
	// facts each reported about itself (Status "failed" when it did not
	// answer).
	ClusterMembers(ctx context.Context) ([]ClusterMember, error)
	// ClusterRaftPeers lists the Raft configuration and the index it was
	// committed at.
	ClusterRaftPeers() ([]RaftPeer, uint64, error)
	// ClusterRemoveRaftPeer removes the peer with that ID or address (one
	// is empty). An unknown peer is an error of kind structs.ErrNotFound.
	ClusterRemoveRaftPeer(ctx context.Context, id, addr string) error
}

// ClusterMember is one server of the cluster.
type ClusterMember struct {
	Name string
	// Address is the server's RPC host; a "host:port" is accepted too, and
	// its port is used when Port is 0.
	Address string
	// Port is the server's RPC port.
	Port       int
	Status     string // alive | failed
	Leader     bool
	Region     string
	Datacenter string
	Version    string
	RaftID     string
}

// RaftPeer is one entry of the Raft configuration, as
// /v1/operator/raft/configuration shows it.
type RaftPeer struct {
	ID      string
	Node    string
	Address string
	Leader  bool
	Voter   bool
	// RaftProtocol is the Raft protocol version; "" is shown as "3", the
	// only one drover speaks.
	RaftProtocol string
}

// raftProtocol is the Raft protocol version drover's servers speak
// (hashicorp/raft's protocol 3: servers identified by ID).
const raftProtocol = "3"

// memberRole is the "role" tag of every member; Nomad's is "nomad".
const memberRole = "drover"

// agentMember is one member in GET /v1/agent/members, shaped like Nomad's
// (a serf member). drover has no serf: Addr and Tags["port"] are the RPC
// address, which is how Nomad's CLI matches a member to the leader that
// /v1/status/leader names.
type agentMember struct {
	Name   string
	Addr   string
	Port   int
	Tags   map[string]string
	Status string
}

// serverMembers is the body of GET /v1/agent/members.
type serverMembers struct {
	ServerName   string
	ServerRegion string
	ServerDC     string
	Members      []*agentMember
}

// raftConfiguration is the body of GET /v1/operator/raft/configuration.
type raftConfiguration struct {
	Servers []RaftPeer
	Index   uint64
}

// cluster returns the server's Cluster side, or answers 501 and false when
// this agent does not run in a cluster.
func (s *HTTPServer) cluster(w http.ResponseWriter) (Cluster, bool) {
	c, ok := s.srv.(Cluster)
	if !ok {
		writeText(w, http.StatusNotImplemented, "This agent's server does not run in a cluster")
	}
	return c, ok
}

func (s agentHandlers) agentMembers(w http.ResponseWriter, r *http.Request) {
	c, ok := s.cluster(w)
	if !ok {
		return
	}
	members, err := c.ClusterMembers(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := &serverMembers{
		ServerName:   s.nodeName,
		ServerRegion: s.region(),
		ServerDC:     s.srv.Datacenter(),
		Members:      make([]*agentMember, 0, len(members)),
	}
	for _, m := range members {
		if out.ServerName == "" && m.Leader && c.IsLeader() {
			out.ServerName = m.Name
		}
		out.Members = append(out.Members, toAgentMember(m))
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].Name < out.Members[j].Name })
	writeJSON(w, r, http.StatusOK, out)
}

func toAgentMember(m ClusterMember) *agentMember {
	host, port := m.Address, m.Port
	if h, p, err := net.SplitHostPort(m.Address); err == nil {
		host = h
		if port == 0 {
			port, _ = strconv.Atoi(p)
		}
	}
	status := m.Status
	if status == "" {
		status = "alive"
	}
	tags := map[string]string{
		"role":     memberRole,
		"region":   m.Region,
		"dc":       m.Datacenter,
		"build":    m.Version,
		"port":     strconv.Itoa(port),
		"rpc_addr": host,
		"raft_vsn": raftProtocol,
		"id":       m.RaftID,
		// Not one of Nomad's tags: drover knows the leader directly, so
		// its CLI need not match addresses (which NAT or a wildcard bind
		// address can make differ).
		"leader": strconv.FormatBool(m.Leader),
	}
	return &agentMember{Name: m.Name, Addr: host, Port: port, Tags: tags, Status: status}
}

func (s operatorHandlers) raftConfiguration(w http.ResponseWriter, r *http.Request) {
	c, ok := s.cluster(w)
	if !ok {
		return
	}
	peers, index, err := c.ClusterRaftPeers()
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := &raftConfiguration{Servers: make([]RaftPeer, 0, len(peers)), Index: index}
	for _, p := range peers {
		if p.RaftProtocol == "" {
			p.RaftProtocol = raftProtocol
		}
		out.Servers = append(out.Servers, p)
	}
	s.setReadHeaders(w, max(index, 1))
	writeJSON(w, r, http.StatusOK, out)
}

// raftRemovePeer is DELETE /v1/operator/raft/peer?id=|?address=: exactly one
// of them names the peer.
func (s operatorHandlers) raftRemovePeer(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, addr := q.Get("id"), q.Get("address")
	switch {
	case id == "" && addr == "":
		s.writeError(w, badRequest("Must specify either ?id with the server's ID or ?address with IP:port of peer to remove"))
		return
	case id != "" && addr != "":
		s.writeError(w, badRequest("Must specify only one of ?id or ?address"))
		return
	}
	c, ok := s.cluster(w)
	if !ok {
		return
	}
	if err := c.ClusterRemoveRaftPeer(r.Context(), id, addr); err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// peerAddrs lists the Raft peers' addresses for /v1/status/peers: from the
// Raft configuration in a cluster, else from Peerer, else the leader alone.
func (s *HTTPServer) peerAddrs() ([]string, error) {
	peers := []string{}
	switch p := s.srv.(type) {
	case Cluster:
		conf, _, err := p.ClusterRaftPeers()
		if err != nil {
			return nil, err
		}
		for _, c := range conf {
			peers = append(peers, c.Address)
		}
	case Peerer:
		peers = append(peers, p.Peers()...)
	default:
		if leader := s.srv.LeaderAddr(); leader != "" {
			peers = append(peers, leader)
		}
	}
	return peers, nil
}

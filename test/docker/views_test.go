package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// What the tests read of the cluster, through each agent's HTTP API. Reads
// with ?stale are the agent's own view; without, a server hands them to the
// leader (so they also prove the leader's advertised HTTP address works).

// raftConfig is GET /v1/operator/raft/configuration.
type raftConfig struct {
	Index   uint64
	Servers []raftServer
}

type raftServer struct {
	ID, Node, Address string
	Leader, Voter     bool
}

// leaderNode is the node the configuration marks as leader, or "".
func (r raftConfig) leaderNode() string {
	for _, s := range r.Servers {
		if s.Leader {
			return s.Node
		}
	}
	return ""
}

// raftConfig is the server's own view of the Raft configuration.
func (a *agent) raftConfig() (raftConfig, error) {
	var rc raftConfig
	status, err := a.Do(http.MethodGet, "/v1/operator/raft/configuration?stale", nil, &rc)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET /v1/operator/raft/configuration?stale: status %d", status)
	}
	return rc, err
}

// errNoLeader is leaderAddr's answer when the server knows no leader.
var errNoLeader = errors.New("no leader known")

// leaderAddr is the leader's RPC address as the server names it.
func (a *agent) leaderAddr() (string, error) {
	status, body, err := a.Raw(http.MethodGet, "/v1/status/leader?stale", nil)
	switch {
	case err != nil:
		return "", err
	case status == http.StatusServiceUnavailable:
		return "", fmt.Errorf("%w (503: %s)", errNoLeader, strings.TrimSpace(string(body)))
	case status != http.StatusOK:
		return "", fmt.Errorf("GET /v1/status/leader?stale: status %d: %s", status, body)
	}
	var addr string
	if err := json.Unmarshal(body, &addr); err != nil {
		return "", fmt.Errorf("GET /v1/status/leader?stale: %w: %s", err, body)
	}
	return addr, nil
}

// server is the server named name, or nil.
func (c *cluster) server(name string) *agent {
	for _, s := range c.servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// pollLeader waits until every server of among names the same leader, by
// address (/v1/status/leader) and by node (the Raft configuration), and
// that leader is one of among. It returns the leader and its address.
func (c *cluster) pollLeader(among []*agent, timeout time.Duration) (*agent, string, error) {
	var leader *agent
	var addr string
	last, ok := harness.Poll(timeout, 200*time.Millisecond, func() (bool, string) {
		leader, addr = nil, ""
		var node string
		seen := map[string]string{}
		for _, s := range among {
			l, err := s.leaderAddr()
			if err != nil {
				return false, fmt.Sprintf("%s: %v (seen so far %v)", s, err, seen)
			}
			rc, err := s.raftConfig()
			if err != nil {
				return false, fmt.Sprintf("%s: %v", s, err)
			}
			n := rc.leaderNode()
			seen[s.Name] = n + "@" + l
			if addr == "" {
				addr, node = l, n
			}
			if l != addr || n != node || n == "" {
				return false, fmt.Sprintf("leaders seen: %v", seen)
			}
		}
		leader = c.server(node)
		if !slices.Contains(among, leader) {
			return false, fmt.Sprintf("leader %q is not one of %v", node, among)
		}
		return true, ""
	})
	if !ok {
		return nil, "", fmt.Errorf("servers %v did not agree on a leader among them within %s: %s", among, timeout, last)
	}
	return leader, addr, nil
}

// leader waits for the leader every server of among agrees on.
func (c *cluster) leader(among []*agent) (*agent, string) {
	c.t.Helper()
	l, addr, err := c.pollLeader(among, electionTimeout)
	if err != nil {
		c.t.Fatal(err)
	}
	return l, addr
}

// without is servers minus the one excluded.
func without(servers []*agent, excluded *agent) []*agent {
	var out []*agent
	for _, s := range servers {
		if s != excluded {
			out = append(out, s)
		}
	}
	return out
}

// reachable are the servers on the cluster network.
func (c *cluster) reachable() []*agent {
	var out []*agent
	for _, s := range c.servers {
		if s.ctlNet == "" {
			out = append(out, s)
		}
	}
	return out
}

// nodes lists the nodes through a server (a consistent read).
func nodes(via *agent) ([]harness.NodeStub, error) {
	var out []harness.NodeStub
	status, err := via.Do(http.MethodGet, "/v1/nodes", nil, &out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET /v1/nodes on %s: status %d", via, status)
	}
	return out, err
}

// pollNodeReady waits until the client's node is ready, eligible and its
// raw_exec driver healthy, as a reachable server reports it, and returns
// the node's ID.
func (c *cluster) pollNodeReady(cl *agent, timeout time.Duration) (string, error) {
	var id string
	last, ok := harness.Poll(timeout, 200*time.Millisecond, func() (bool, string) {
		var errs []error
		for _, s := range c.reachable() {
			ns, err := nodes(s)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, n := range ns {
				if n.Name == cl.Name {
					id = n.ID
					return n.Status == "ready" && n.SchedulingEligibility == "eligible" && n.Drivers["raw_exec"].Healthy,
						fmt.Sprintf("%+v", n)
				}
			}
			return false, fmt.Sprintf("no node named %s in %+v", cl, ns)
		}
		return false, errors.Join(errs...).Error()
	})
	if !ok {
		return "", fmt.Errorf("node of %s not ready within %s: %s", cl, timeout, last)
	}
	return id, nil
}

// clientNodeIDs maps every client's node ID to its name.
func (c *cluster) clientNodeIDs() map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, cl := range c.clients {
		id, err := c.pollNodeReady(cl, waitTimeout)
		if err != nil {
			c.t.Fatal(err)
		}
		out[id] = cl.Name
	}
	return out
}

// jobList is the server's own (stale) list of jobs, sorted by ID.
func jobList(a *agent) ([]harness.JobStub, error) {
	var out []harness.JobStub
	status, err := a.Do(http.MethodGet, "/v1/jobs?stale", nil, &out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("GET /v1/jobs?stale on %s: status %d", a, status)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

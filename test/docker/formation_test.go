package docker

import (
	"net"
	"net/http"
	"strconv"
	"testing"
)

// Three servers and two clients, each in its own container and knowing
// the others only by container name, form one cluster: one leader, three
// Raft voters at the advertised names, two ready nodes, and a sysbatch job
// sent to a follower runs once on each client. Reading its output through
// a server proves the clients' advertised HTTP names work too.
func TestFormation(t *testing.T) {
	c := newCluster(t, "form")
	leader, leaderAddr := c.leader(c.servers)
	t.Logf("leader %s at %s", leader, leaderAddr)

	// /v1/status/leader names the leader by the address Raft dials: the
	// advertised name or the IP it resolves to on the cluster network.
	ip, err := networkIP(leader.Container, c.net)
	if err != nil {
		t.Fatal(err)
	}
	if want := net.JoinHostPort(ip, strconv.Itoa(rpcPort)); leaderAddr != leader.RPCAddr() && leaderAddr != want {
		t.Errorf("leader address %q is neither %s's advertised %q nor its cluster address %q", leaderAddr, leader, leader.RPCAddr(), want)
	}

	// Every server holds the same configuration: three voters, each at
	// its advertised name, the agreed leader marked.
	for _, s := range c.servers {
		rc, err := s.raftConfig()
		if err != nil {
			t.Fatal(err)
		}
		if len(rc.Servers) != len(c.servers) {
			t.Errorf("%s: raft configuration has %d servers, want %d: %+v", s, len(rc.Servers), len(c.servers), rc.Servers)
		}
		for _, p := range rc.Servers {
			want := c.server(p.ID)
			switch {
			case want == nil:
				t.Errorf("%s: raft configuration holds unknown server %+v", s, p)
			case p.Address != want.RPCAddr():
				t.Errorf("%s: raft peer %s at %q, want its advertised %q", s, p.ID, p.Address, want.RPCAddr())
			case !p.Voter:
				t.Errorf("%s: raft peer %s is not a voter", s, p.ID)
			case p.Leader != (p.ID == leader.Name):
				t.Errorf("%s: raft peer %s has Leader=%v, but the leader is %s", s, p.ID, p.Leader, leader)
			}
		}
	}

	// An agent that binds 0.0.0.0 tells where it is reached: its
	// advertised name, not the wildcard.
	for _, a := range c.all() {
		var self struct{ Member struct{ Name, Addr string } }
		if status, err := a.Do(http.MethodGet, "/v1/agent/self", nil, &self); err != nil || status != http.StatusOK {
			t.Fatalf("%s: GET /v1/agent/self: status %d, %v", a, status, err)
		}
		if self.Member.Name != a.Name || self.Member.Addr != a.Container {
			t.Errorf("%s: /v1/agent/self member = %+v; want name %q at %q", a, self.Member, a.Name, a.Container)
		}
	}

	// The servers are not nodes: exactly the two clients are, both ready.
	ns, err := nodes(leader)
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, n := range ns {
		ready[n.Name] = n.Status == "ready"
	}
	if len(ns) != len(c.clients) || !ready["c1"] || !ready["c2"] {
		t.Errorf("nodes = %+v; want c1 and c2, both ready", ns)
	}

	// A write sent to a follower is forwarded to the leader across the
	// network; the job's allocations reach both clients and complete.
	follower := without(c.servers, leader)[0]
	c.register(follower, "hello-sysbatch")
	allocs := c.waitComplete(follower, "hello-sysbatch")
	for node, a := range allocs {
		out, err := allocStdout(follower, a.ID)
		if err != nil {
			t.Errorf("stdout of the allocation on %s through %s: %v", node, follower, err)
			continue
		}
		if out != "hi\n" {
			t.Errorf("stdout of the allocation on %s = %q, want %q", node, out, "hi\n")
		}
	}
}

package cluster

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// Three servers and two clients form one cluster: every server names the
// same leader, the Raft configuration has three voters, both nodes are
// ready, and the operator commands answer the same on every server.
//
// Each server's views are compared with the leader the servers agree on
// at that moment, and awaited: on a loaded machine an election may move
// the leader between two reads, after which the views agree again.
func TestFormation(t *testing.T) {
	c := newCluster(t, options{clients: 2})
	c.leader()

	for _, s := range c.servers {
		harness.WaitFor(t, waitTimeout, s.Name+"'s views to name the cluster's leader", func() (bool, string) {
			l, err := c.pollLeader(electionTimeout)
			if err != nil {
				return false, err.Error()
			}
			if why := serverViews(s, l, c.servers); why != "" {
				return false, why
			}
			return true, ""
		})
	}
	// A client agent answers for the cluster too (it proxies to a server).
	harness.WaitFor(t, waitTimeout, "client "+c.clients[0].Name+" to name the cluster's leader", func() (bool, string) {
		l, err := c.pollLeader(electionTimeout)
		if err != nil {
			return false, err.Error()
		}
		got, err := leaderOf(c.clients[0])
		return err == nil && got == l.RPCAddr(), fmt.Sprintf("/v1/status/leader = %q, %v; want %s", got, err, l.RPCAddr())
	})

	var nodes []harness.NodeStub
	c.leader().MustGet("/v1/nodes", &nodes)
	ready := map[string]bool{}
	for _, n := range nodes {
		ready[n.Name] = n.Status == "ready" && n.SchedulingEligibility == "eligible"
	}
	if len(nodes) != 2 || !ready["c1"] || !ready["c2"] {
		t.Errorf("nodes = %+v; want c1 and c2, ready and eligible", nodes)
	}
}

// serverViews compares what server s says about the cluster (its leader,
// its Raft configuration, `server members`, `operator raft list-peers`)
// with leader l of servers; it returns the first difference, or "".
// Members must always be alive; that is failed at once.
func serverViews(s, l *agent, servers []*agent) string {
	t := s.c.t
	t.Helper()
	if got, err := leaderOf(s); err != nil || got != l.RPCAddr() {
		return fmt.Sprintf("%s: /v1/status/leader = %q, %v; want %s", s, got, err, l.RPCAddr())
	}
	peers, err := raftPeers(s)
	if err != nil {
		return err.Error()
	}
	var leaders []string
	for _, p := range peers {
		if p.Leader {
			leaders = append(leaders, p.Address)
		}
	}
	if len(peers) != 3 || voters(peers) != 3 || len(leaders) != 1 || leaders[0] != l.RPCAddr() {
		return fmt.Sprintf("%s: raft configuration %+v; want 3 voters led by %s", s, peers, l.RPCAddr())
	}

	members := harness.Table(harness.Lines(s.MustCLI("server", "members").Stdout))
	var names []string
	leaders = nil
	for _, m := range members {
		names = append(names, m["Name"])
		if m["Status"] != "alive" {
			t.Errorf("server members on %s: %s is %q; want alive", s, m["Name"], m["Status"])
		}
		if m["Leader"] == "true" {
			leaders = append(leaders, m["Name"]+":"+m["Port"])
		}
	}
	want := l.Name + ":" + strconv.Itoa(l.RPCPort)
	if strings.Join(names, ",") != "s1,s2,s3" || len(leaders) != 1 || leaders[0] != want {
		return fmt.Sprintf("server members on %s: names %v, leaders %v; want s1,s2,s3 led by %s", s, names, leaders, want)
	}

	peerRows := harness.Table(harness.Lines(s.MustCLI("operator", "raft", "list-peers").Stdout))
	var states, wantStates []string
	for _, p := range peerRows {
		states = append(states, p["Node"]+"="+p["State"]+"/"+p["Voter"])
	}
	for _, srv := range servers {
		state := "follower"
		if srv == l {
			state = "leader"
		}
		wantStates = append(wantStates, srv.Name+"="+state+"/true")
	}
	if strings.Join(states, " ") != strings.Join(wantStates, " ") {
		return fmt.Sprintf("operator raft list-peers on %s: %v; want %v", s, states, wantStates)
	}
	return ""
}

// Writes sent to a follower reach the leader, and so do their errors, kind
// intact: a bad job is a 400 that says why, an unknown job a 404.
func TestWritesViaFollower(t *testing.T) {
	c := newCluster(t, options{clients: 2})
	l := c.leader()
	f := c.followers(l)[0]
	nodes := []string{c.nodeID(c.clients[0]), c.nodeID(c.clients[1])}

	run := f.MustCLI("job", "run", harness.WriteFile(t, "hello.hcl", fmt.Sprintf(trueJob, "via-follower")))
	if !strings.Contains(run.Stdout, `finished with status "complete"`) {
		t.Errorf("job run via follower %s did not follow the evaluation to the end:\n%s", f, run)
	}
	c.waitSysbatchDone(l, "via-follower", nodes)

	// Read your writes: a consistent read on a follower goes to the
	// leader, so a job the leader just acknowledged is there at once.
	register(l, fmt.Sprintf(trueJob, "via-leader"))
	if status, err := f.DoRetry(http.MethodGet, "/v1/job/via-leader", nil, nil); err != nil || status != http.StatusOK {
		t.Errorf("GET a just-registered job via follower %s: status %d, %v; want 200", f, status, err)
	}
	// A client agent passes writes on to the servers too.
	register(c.clients[0], fmt.Sprintf(trueJob, "via-client"))
	c.waitSysbatchDone(l, "via-client", nodes)

	// The server refuses the job (a system job runs one per node), not
	// the parser: parse through the follower, then register there.
	bad := f.ParseJob(strings.Replace(fmt.Sprintf(sleeperJob, "too-many"), `group "sleeper" {`, "group \"sleeper\" {\n    count = 2", 1))
	status, body, err := tryRegister(f, bad)
	if err != nil || status != http.StatusBadRequest || !strings.Contains(body, "count") || !strings.Contains(body, "system") {
		t.Errorf("invalid job via follower: status %d, %v, body %q; want 400 naming the count rule", status, err, body)
	}
	if status, err := l.DoRetry(http.MethodGet, "/v1/job/too-many?stale", nil, nil); err != nil || status != http.StatusNotFound {
		t.Errorf("the refused job exists on the leader: status %d, %v", status, err)
	}

	status, raw, err := f.RawRetry(http.MethodPut, "/v1/job/no-such-job/dispatch", map[string]any{})
	if err != nil || status != http.StatusNotFound {
		t.Errorf("dispatch of an unknown job via follower: status %d, %v, %q; want 404", status, err, raw)
	}
	// A consistent read of something missing is a 404 through the
	// follower too.
	if status, err := f.DoRetry(http.MethodGet, "/v1/job/no-such-job", nil, nil); err != nil || status != http.StatusNotFound {
		t.Errorf("GET an unknown job via follower: status %d, %v; want 404", status, err)
	}
}

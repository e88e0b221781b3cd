package cluster

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/drover-org/drover/test/internal/harness"
)

// sleeperJob is a system job whose task writes its pid to the shared alloc
// dir and then becomes `sleep 3600` (exec keeps the pid), so a test can
// find the very process the driver runs.
const sleeperJob = `job %q {
  type        = "system"
  datacenters = ["*"]

  group "sleeper" {
    task "sleep" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$ > $NOMAD_ALLOC_DIR/pid; exec sleep 3600"]
      }

      kill_timeout = "2s"

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// trueJob is the smallest sysbatch job: one /bin/true per node.
const trueJob = harness.TrueJob

// sleepBatchJob is a sysbatch job whose task runs for 30s on every node.
const sleepBatchJob = `job %q {
  type        = "sysbatch"
  datacenters = ["*"]

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["30"]
      }

      kill_timeout = "2s"

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// dispatchJob is a parameterized sysbatch job: each dispatch is a child
// that runs /bin/true once on every node.
const dispatchJob = `job %q {
  type        = "sysbatch"
  datacenters = ["*"]

  parameterized {
    meta_optional = ["seq"]
  }

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// register parses hcl and registers the job through a (any server) and
// returns the evaluation the registration created.
func register(a *agent, hcl string) string {
	a.T.Helper()
	var resp harness.RegisterResponse
	a.MustWrite(http.MethodPut, "/v1/jobs", map[string]any{"Job": a.ParseJob(hcl)}, &resp)
	return resp.EvalID
}

// tryRegister registers a parsed job and reports the status and body.
func tryRegister(a *agent, parsed any) (int, string, error) {
	status, body, err := a.RawRetry(http.MethodPut, "/v1/jobs", map[string]any{"Job": parsed})
	return status, string(body), err
}

// jobIndexes lists the jobs a server knows, each with its modify index:
// from the leader (through a if a follows), or from a's own state when
// stale.
func jobIndexes(a *agent, stale bool) (map[string]uint64, error) {
	path := "/v1/jobs"
	if stale {
		path += "?stale"
	}
	var jobs []harness.JobStub
	status, err := a.DoRetry(http.MethodGet, path, nil, &jobs)
	if err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("GET %s on %s: %d %v", path, a, status, err)
	}
	out := make(map[string]uint64, len(jobs))
	for _, j := range jobs {
		out[j.ID] = j.ModifyIndex
	}
	return out, nil
}

// waitCaughtUp waits until a's own (stale) job list equals the leader's:
// the server has replicated everything the leader has.
func (c *cluster) waitCaughtUp(a *agent) {
	c.t.Helper()
	harness.WaitFor(c.t, waitTimeout, a.Name+" to catch up with the leader", func() (bool, string) {
		l, err := c.pollLeader(electionTimeout)
		if err != nil {
			return false, err.Error()
		}
		want, err := jobIndexes(l, false)
		if err != nil {
			return false, err.Error()
		}
		got, err := jobIndexes(a, true)
		if err != nil {
			return false, err.Error()
		}
		return maps.Equal(got, want), fmt.Sprintf("%s has %d jobs %v; leader %s has %d %v", a, len(got), got, l, len(want), want)
	})
}

// waitRejoined waits until a restarted server follows the cluster's leader
// again, the Raft configuration has three voters, and a has caught up.
func (c *cluster) waitRejoined(a *agent) {
	c.t.Helper()
	c.waitFollowing(a)
	c.waitCaughtUp(a)
}

// waitFollowing waits until a restarted server is back in the cluster:
// every running server, a too, names the same leader and the Raft
// configuration has three voters. A restarted server does not force an
// election (pre-vote), but on a loaded machine an election for another
// reason may elect it; that is logged, and the tests that care (the
// leader watch of TestRollingRestart, TestLeaderKill) judge leadership.
func (c *cluster) waitFollowing(a *agent) {
	c.t.Helper()
	var l *agent
	harness.WaitFor(c.t, formTimeout, a.Name+" to rejoin", func() (bool, string) {
		var err error
		if l, err = c.pollLeader(electionTimeout); err != nil {
			return false, err.Error()
		}
		peers, err := raftPeers(l)
		if err != nil {
			return false, err.Error()
		}
		return voters(peers) == 3, fmt.Sprintf("raft configuration: %+v", peers)
	})
	if l == a {
		c.t.Logf("%s leads after its restart (an election while it rejoined)", a)
	}
}

// raftPeer is one entry of GET /v1/operator/raft/configuration.
type raftPeer struct {
	ID, Node, Address string
	Leader, Voter     bool
}

// raftPeers reads a server's own view of the Raft configuration.
func raftPeers(a *agent) ([]raftPeer, error) {
	var conf struct{ Servers []raftPeer }
	status, err := a.DoRetry(http.MethodGet, "/v1/operator/raft/configuration?stale", nil, &conf)
	if err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("raft configuration from %s: %d %v", a, status, err)
	}
	return conf.Servers, nil
}

func voters(peers []raftPeer) int {
	n := 0
	for _, p := range peers {
		if p.Voter {
			n++
		}
	}
	return n
}

// allocsByNode groups a job's allocations by node ID.
func allocsByNode(a *agent, jobID string) (map[string][]harness.Alloc, error) {
	var allocs []harness.Alloc
	path := "/v1/job/" + harness.Escape(jobID) + "/allocations"
	status, err := a.DoRetry(http.MethodGet, path, nil, &allocs)
	if err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("GET %s on %s: %d %v", path, a, status, err)
	}
	out := map[string][]harness.Alloc{}
	for _, al := range allocs {
		out[al.NodeID] = append(out[al.NodeID], al)
	}
	return out, nil
}

// describeAllocs is a compact, stable rendering of allocations for
// failure messages.
func describeAllocs(byNode map[string][]harness.Alloc) string {
	var parts []string
	for node, allocs := range byNode {
		for _, al := range allocs {
			parts = append(parts, fmt.Sprintf("%s@%.8s:%s/%s", shortID(al.ID), node, al.DesiredStatus, al.ClientStatus))
		}
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// waitSysbatchDone waits until the sysbatch job has exactly one complete
// allocation on each of nodes and none elsewhere.
func (c *cluster) waitSysbatchDone(a *agent, jobID string, nodes []string) map[string][]harness.Alloc {
	c.t.Helper()
	var byNode map[string][]harness.Alloc
	harness.WaitFor(c.t, waitTimeout, jobID+" complete on every node", func() (bool, string) {
		var err error
		if byNode, err = allocsByNode(a, jobID); err != nil {
			return false, err.Error()
		}
		return onePerNode(byNode, nodes, "complete"), describeAllocs(byNode)
	})
	return byNode
}

// onePerNode reports whether byNode has exactly one allocation on each of
// nodes, in clientStatus, and none on any other node.
func onePerNode(byNode map[string][]harness.Alloc, nodes []string, clientStatus string) bool {
	if len(byNode) != len(nodes) {
		return false
	}
	for _, n := range nodes {
		allocs := byNode[n]
		if len(allocs) != 1 || allocs[0].ClientStatus != clientStatus {
			return false
		}
	}
	return true
}

// taskPID reads the pid a sleeper task wrote to its alloc dir on the
// client and checks that it is a live `sleep 3600`.
func taskPID(cl *agent, allocID string) (int, string) {
	path := filepath.Join(cl.DataDir, "alloc", allocID, "alloc", "pid")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err.Error()
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Sprintf("pid file %q: %v", b, err)
	}
	p, ok := harness.ReadProc(pid)
	if !ok || !p.Alive() || p.Cmd != "sleep 3600" {
		return 0, fmt.Sprintf("pid %d is not a running `sleep 3600` (%+v)", pid, p)
	}
	return pid, ""
}

// stateDigest renders a server's own (stale) view of the replicated state
// that the tests touch: jobs, evaluations, allocations and nodes, each
// with the fields the FSM sets. Two servers that applied the same log
// have the same digest.
func stateDigest(a *agent) (string, error) {
	type row struct {
		ID, Status, ClientStatus, DesiredStatus string
		ModifyIndex                             uint64
	}
	var b strings.Builder
	for _, path := range []string{"/v1/jobs", "/v1/evaluations", "/v1/allocations", "/v1/nodes"} {
		var rows []row
		if status, err := a.DoRetry(http.MethodGet, path+"?stale", nil, &rows); err != nil || status != http.StatusOK {
			return "", fmt.Errorf("GET %s?stale on %s: %d %v", path, a, status, err)
		}
		lines := make([]string, 0, len(rows))
		for _, r := range rows {
			lines = append(lines, fmt.Sprintf("%s %s %s %s %d", r.ID, r.Status, r.ClientStatus, r.DesiredStatus, r.ModifyIndex))
		}
		sort.Strings(lines)
		fmt.Fprintf(&b, "%s (%d)\n  %s\n", path, len(rows), strings.Join(lines, "\n  "))
	}
	return b.String(), nil
}

// waitConverged waits until every running server holds the same state.
func (c *cluster) waitConverged() {
	c.t.Helper()
	harness.WaitFor(c.t, waitTimeout, "every server to hold the same state", func() (bool, string) {
		var first string
		for i, s := range c.runningServers() {
			d, err := stateDigest(s)
			if err != nil {
				return false, err.Error()
			}
			if i == 0 {
				first = d
				continue
			}
			if d != first {
				return false, fmt.Sprintf("%s differs from %s:\n%s\n---\n%s", s, c.runningServers()[0], first, d)
			}
		}
		return true, ""
	})
}

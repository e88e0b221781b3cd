package cluster

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// runSleeper runs the sleeper system job and waits until it runs on every
// client's node; it returns the running allocation of each node.
func (c *cluster) runSleeper(id string) map[string]harness.Alloc {
	c.t.Helper()
	l := c.leader()
	l.MustCLI("job", "run", harness.WriteFile(c.t, id+".hcl", fmt.Sprintf(sleeperJob, id)))
	var nodes []string
	for _, cl := range c.clients {
		nodes = append(nodes, c.nodeID(cl))
	}
	out := map[string]harness.Alloc{}
	harness.WaitFor(c.t, waitTimeout, id+" running on every node", func() (bool, string) {
		byNode, err := allocsByNode(l, id)
		if err != nil {
			return false, err.Error()
		}
		if !onePerNode(byNode, nodes, "running") {
			return false, describeAllocs(byNode)
		}
		for n, allocs := range byNode {
			out[n] = allocs[0]
		}
		return true, ""
	})
	return out
}

// A client's machine is lost: its node goes down once the heartbeat TTL
// and grace have passed and its system allocation is lost. The machine
// comes back with the same data dir: the node is ready again and the
// system job runs there again, in a new allocation.
func TestClientLossAndReturn(t *testing.T) {
	// A node known when a leader takes over gets failover_heartbeat_ttl
	// (5m by default) until its first heartbeat to that leader. Under load
	// the first leader's step-up can end after the clients registered and
	// the client is lost before it heartbeats again: a short failover TTL
	// keeps the node's loss visible within the wait below either way.
	c := newCluster(t, options{clients: 2, serverExtra: `failover_heartbeat_ttl = "10s"`})
	const id = "everywhere"
	before := c.runSleeper(id)
	lostClient, keptClient := c.clients[1], c.clients[0]
	lostNode, keptNode := c.nodeID(lostClient), c.nodeID(keptClient)
	lostAlloc := before[lostNode]
	l := c.leader()

	start := time.Now()
	lostClient.crash()
	harness.WaitFor(t, waitTimeout, "the lost node to be down", func() (bool, string) {
		var n harness.Node
		l.MustGet("/v1/node/"+lostNode, &n)
		return n.Status == "down", fmt.Sprintf("node %s is %s", n.Name, n.Status)
	})
	// Down only after TTL + grace (2s + 2s) without a heartbeat; the last
	// heartbeat came at most about TTL/2 before the crash.
	if took := time.Since(start); took < 2500*time.Millisecond {
		t.Errorf("node marked down %s after its loss; TTL + grace minus one heartbeat interval is about 2.8s", took)
	}
	harness.WaitFor(t, waitTimeout, "the lost node's allocation to be lost", func() (bool, string) {
		var al harness.Alloc
		l.MustGet("/v1/allocation/"+lostAlloc.ID, &al)
		return al.ClientStatus == "lost", fmt.Sprintf("desired %s, client %s", al.DesiredStatus, al.ClientStatus)
	})
	byNode, err := allocsByNode(l, id)
	if err != nil {
		t.Fatal(err)
	}
	if k := byNode[keptNode]; len(k) != 1 || k[0].ID != before[keptNode].ID || k[0].ClientStatus != "running" {
		t.Errorf("the surviving node's allocations changed: %s", describeAllocs(byNode))
	}

	lostClient.restart()
	if got := c.waitNodeReady(lostClient); got != lostNode {
		t.Errorf("the returning client registered as node %s; want its old node %s", got, lostNode)
	}
	harness.WaitFor(t, waitTimeout, id+" running on the returned node again", func() (bool, string) {
		byNode, err := allocsByNode(l, id)
		if err != nil {
			return false, err.Error()
		}
		var running []string
		for _, al := range byNode[lostNode] {
			if al.ClientStatus == "running" && al.ID != lostAlloc.ID {
				running = append(running, al.ID)
			}
		}
		return len(running) == 1, describeAllocs(byNode)
	})
	// The lost allocation stays stopped. (Its client status may turn from
	// lost to complete: the returning client reports the task it found
	// dead, as Nomad's clients do.)
	var old harness.Alloc
	l.MustGet("/v1/allocation/"+lostAlloc.ID, &old)
	if old.DesiredStatus != "stop" || old.ClientStatus == "running" {
		t.Errorf("the lost allocation came back as desired %s, client %s; want it stopped", old.DesiredStatus, old.ClientStatus)
	}
}

// A client agent stops (SIGINT) under a running task and starts again: the
// task runs on undisturbed (same process, same allocation, no new one), the
// restarted agent supervises it again, and stopping the job kills it.
func TestClientRestartKeepsTasks(t *testing.T) {
	// A long TTL: the node must not be marked down while its agent is
	// restarting (that is another test).
	c := newCluster(t, options{clients: 1, heartbeatTTL: "10s", heartbeatGrace: "10s"})
	cl := c.clients[0]
	node := c.nodeID(cl)
	const id = "survivor"
	al := c.runSleeper(id)[node]
	var pid int
	harness.WaitFor(t, waitTimeout, "the task to record its pid", func() (bool, string) {
		var why string
		pid, why = taskPID(cl, al.ID)
		return pid != 0, why
	})

	cl.stop()
	if !harness.PIDAlive(pid) {
		t.Fatalf("task %d died with its client agent; a non-dev client must leave it running", pid)
	}
	cl.restart()
	c.waitNodeReady(cl)
	l := c.leader()
	// The restarted client must report the task as running (again); give
	// it the time of a few allocation syncs, then check that nothing
	// changed.
	harness.WaitFor(t, waitTimeout, "the restarted client to report the task running", func() (bool, string) {
		var got harness.Alloc
		l.MustGet("/v1/allocation/"+al.ID, &got)
		ts := got.TaskStates["sleep"]
		return got.ClientStatus == "running" && ts != nil && ts.State == "running",
			fmt.Sprintf("client %s, task %+v", got.ClientStatus, ts)
	})
	if now, why := taskPID(cl, al.ID); now != pid {
		t.Errorf("task pid after the client's restart: %d (%s); want the same process %d", now, why, pid)
	}
	byNode, err := allocsByNode(l, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := byNode[node]; len(got) != 1 || got[0].ID != al.ID || got[0].ClientStatus != "running" {
		t.Errorf("allocations after the client's restart: %s; want only %s, running", describeAllocs(byNode), shortID(al.ID))
	}

	l.MustCLI("job", "stop", id)
	harness.WaitFor(t, waitTimeout, "the recovered task to be killed by job stop", func() (bool, string) {
		return !harness.PIDAlive(pid), fmt.Sprintf("pid %d alive", pid)
	})
	harness.WaitFor(t, waitTimeout, "the allocation to be stopped and complete", func() (bool, string) {
		var got harness.Alloc
		l.MustGet("/v1/allocation/"+al.ID, &got)
		return got.DesiredStatus == "stop" && got.ClientStatus == "complete",
			fmt.Sprintf("desired %s, client %s", got.DesiredStatus, got.ClientStatus)
	})
}

// A node with a running system allocation and a running sysbatch one is
// drained with a 5s deadline: the sysbatch allocation is left to run until
// the deadline and then stopped, the system one goes with it, the drain
// completes, and -disable makes the node eligible again.
func TestDrain(t *testing.T) {
	c := newCluster(t, options{clients: 2})
	l := c.leader()
	drained, other := c.nodeID(c.clients[0]), c.nodeID(c.clients[1])
	system := c.runSleeper("sys")[drained]
	l.MustCLI("job", "run", "-detach", harness.WriteFile(t, "batch.hcl", fmt.Sprintf(sleepBatchJob, "batch")))
	var batch harness.Alloc
	harness.WaitFor(t, waitTimeout, "the sysbatch job running on both nodes", func() (bool, string) {
		byNode, err := allocsByNode(l, "batch")
		if err != nil {
			return false, err.Error()
		}
		if !onePerNode(byNode, []string{drained, other}, "running") {
			return false, describeAllocs(byNode)
		}
		batch = byNode[drained][0]
		return true, ""
	})

	start := time.Now()
	res := l.MustCLI("node", "drain", "-enable", "-yes", "-deadline", "5s", drained)
	took := time.Since(start)
	if !strings.Contains(res.Stdout, "Drain complete") {
		t.Errorf("node drain did not follow the drain to its end:\n%s", res)
	}
	// The command returned when the drain completed, which the sysbatch
	// allocation held up until the deadline.
	if took < 5*time.Second {
		t.Errorf("the drain completed %s after it started; the sysbatch alloc should hold it until the 5s deadline", took)
	}
	t.Logf("drain completed after %s", took.Round(time.Millisecond))

	// The drain is complete once its allocations are told to stop (as
	// Nomad's: a desired stop is terminal); the client reports them
	// stopped when their tasks have been killed, a moment later.
	for _, al := range []harness.Alloc{batch, system} {
		harness.WaitFor(t, waitTimeout, al.JobID+"'s alloc on the drained node to stop", func() (bool, string) {
			var got harness.Alloc
			l.MustGet("/v1/allocation/"+al.ID, &got)
			if got.DesiredStatus != "stop" {
				t.Fatalf("%s alloc on the drained node after the drain: desired %s, client %s; want it told to stop", al.JobID, got.DesiredStatus, got.ClientStatus)
			}
			return got.ClientStatus == "complete" || got.ClientStatus == "failed", fmt.Sprintf("desired %s, client %s", got.DesiredStatus, got.ClientStatus)
		})
	}
	byNode, err := allocsByNode(l, "batch")
	if err != nil {
		t.Fatal(err)
	}
	// Untouched: still meant to run. Its 30s task may have finished on a
	// slow machine, so complete is as good as running.
	if o := byNode[other]; len(o) != 1 || o[0].DesiredStatus != "run" || (o[0].ClientStatus != "running" && o[0].ClientStatus != "complete") {
		t.Errorf("the sysbatch alloc on the other node was touched: %s", describeAllocs(byNode))
	}
	if d := byNode[drained]; len(d) != 1 {
		t.Errorf("the stopped sysbatch alloc was replaced on the drained node: %s", describeAllocs(byNode))
	}

	var n harness.Node
	l.MustGet("/v1/node/"+drained, &n)
	if string(n.DrainStrategy) != "null" && len(n.DrainStrategy) != 0 || n.SchedulingEligibility != "ineligible" {
		t.Errorf("after the drain: strategy %s, eligibility %s; want none, ineligible", n.DrainStrategy, n.SchedulingEligibility)
	}
	l.MustCLI("node", "drain", "-disable", "-yes", drained)
	l.MustGet("/v1/node/"+drained, &n)
	if n.SchedulingEligibility != "eligible" {
		t.Errorf("after drain -disable: eligibility %s; want eligible", n.SchedulingEligibility)
	}
	// Eligible again, the node gets the system job back.
	harness.WaitFor(t, waitTimeout, "the system job back on the undrained node", func() (bool, string) {
		byNode, err := allocsByNode(l, "sys")
		if err != nil {
			return false, err.Error()
		}
		for _, al := range byNode[drained] {
			if al.ID != system.ID && al.ClientStatus == "running" {
				return true, ""
			}
		}
		return false, describeAllocs(byNode)
	})
	if err := checkDrainLogged(l, drained); err != nil {
		t.Error(err)
	}
}

// checkDrainLogged reads the node's events: the drain's completion is
// recorded there for the operator.
func checkDrainLogged(l *agent, nodeID string) error {
	var n struct {
		Events []struct{ Message, Subsystem string }
	}
	if status, err := l.DoRetry(http.MethodGet, "/v1/node/"+nodeID, nil, &n); err != nil || status != http.StatusOK {
		return fmt.Errorf("GET node %s: %d %v", nodeID, status, err)
	}
	for _, e := range n.Events {
		if e.Message == "Node drain complete" {
			return nil
		}
	}
	return fmt.Errorf("node %s has no \"Node drain complete\" event: %+v", nodeID, n.Events)
}

package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

// benchCluster is three in-process server agents on loopback: real gRPC
// and Raft over TCP with the cluster PKI's mutual TLS, on-disk Raft logs,
// as in production.
type benchCluster struct {
	b     *testing.B
	dir   string
	ports []int
	// join is every server's RPC address, each server's retry_join.
	join []string
	// token is the server join token of the cluster CA that s1 created.
	token  string
	agents []*agent.Agent
}

func serverConfig(dir, name string, rpcPort int, join []string, token string) *agent.Config {
	return &agent.Config{
		NodeName: name, Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, name),
		BindAddr: "127.0.0.1", LogLevel: "ERROR",
		Ports: &agent.Ports{HTTP: 0, RPC: rpcPort},
		Server: &agent.ServerConfig{Enabled: true, BootstrapExpect: len(join),
			ServerJoin: &agent.ServerJoin{RetryJoin: join, RetryInterval: "100ms", Token: token}},
	}
}

// startCluster forms the cluster the way docs/pki.md ("Bootstrap and
// join") tells an operator to: the first server, with no token, creates
// the cluster CA and the join tokens; the other two join with its server
// join token. Authentication stays on.
func startCluster(b *testing.B) *benchCluster {
	c := &benchCluster{b: b, dir: b.TempDir(), agents: make([]*agent.Agent, 3)}
	for i := 0; i < 3; i++ {
		p := freePort(b)
		c.ports = append(c.ports, p)
		c.join = append(c.join, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	c.agents[0] = c.start(0)
	// What `drover operator join-token server` prints. s1 answers it
	// from the CA in its data dir: there is no leader yet.
	tok, err := c.agents[0].Server().PKI().JoinToken("server")
	if err != nil {
		c.shutdown()
		b.Fatalf("s1's server join token: %v", err)
	}
	c.token = tok
	// agent.New returns once the joiner holds its certificate; s1 grants
	// it without a leader, so the joiners can start one after the other.
	for i := 1; i < 3; i++ {
		c.agents[i] = c.start(i)
	}
	c.waitFormed()
	return c
}

// start starts server i from its config: s1 first without a token, the
// others (and every restart) with the server join token. A restarted
// server presents the certificate stored in its data dir and joins no
// more.
func (c *benchCluster) start(i int) *agent.Agent {
	cfg := serverConfig(c.dir, fmt.Sprintf("s%d", i+1), c.ports[i], c.join, c.token)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.b.Fatal(err)
	}
	a, err := agent.New(cfg, agent.Options{
		Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{pluginEnv},
		HeartbeatTTL: time.Hour,
	})
	if err != nil {
		ln.Close()
		c.shutdown()
		c.b.Fatalf("start s%d: %v", i+1, err)
	}
	return a
}

func (c *benchCluster) shutdown() {
	for i, a := range c.agents {
		if a != nil {
			a.Shutdown()
			c.agents[i] = nil
		}
	}
}

// waitFormed waits until a leader accepts writes and every server names
// it and has applied the leader's latest index: all three are in the
// cluster, so a measurement starts from a whole cluster.
func (c *benchCluster) waitFormed() int {
	leader := c.waitLeader(-1)
	testwait.For(c.b, time.Minute, "every server to follow the leader and hold its state", func() bool {
		if !c.agents[leader].Server().IsLeader() {
			leader = c.waitLeader(-1)
		}
		l := c.agents[leader].Server()
		want, addr := l.State().LatestIndex(), l.LeaderAddr()
		for _, a := range c.agents {
			if a.Server().LeaderAddr() != addr || a.Server().State().LatestIndex() < want {
				return false
			}
		}
		return true
	})
	return leader
}

// waitLeader waits until some agent other than skip leads and accepts a
// write, and returns its index.
func (c *benchCluster) waitLeader(skip int) int {
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		for i, a := range c.agents {
			if i == skip || a == nil || !a.Server().IsLeader() {
				continue
			}
			_, err := a.Server().Jobs().Evaluate(context.Background(), "default", "missing-job", structs.EvalOptions{})
			if err == nil || !isNoLeader(err) {
				return i
			}
		}
		<-tick.C
	}
	c.b.Fatal("no leader within a minute")
	return -1
}

func isNoLeader(err error) bool {
	return structs.HTTPStatus(err) == 503
}

// BenchmarkClusterFailover measures the time from the leader dying (its
// Raft stops at once, no leadership transfer, as in a crash) to a new
// leader that accepts writes.
func BenchmarkClusterFailover(b *testing.B) {
	c := startCluster(b)
	defer c.shutdown()
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		leader := c.waitLeader(-1)
		start := time.Now()
		_ = c.agents[leader].Server().Shutdown() // a crash: no handover
		c.waitLeader(leader)
		total += time.Since(start)
		// The old leader comes back with its stored certificate, and the
		// next round starts from a whole cluster again.
		b.StopTimer()
		c.agents[leader].Shutdown()
		c.agents[leader] = nil
		c.agents[leader] = c.start(leader)
		c.waitFormed()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
	fmt.Printf("leader failover (leader killed → new leader accepting writes): %.0f ms\n", float64(total.Microseconds())/float64(b.N)/1000)
}

// registerSimNodes registers n simulated nodes through Raft and returns the
// index of the leader that took the last of them. A leader lost on the way
// (a loaded machine misses a heartbeat) is waited out: registering a node
// again is harmless.
func (c *benchCluster) registerSimNodes(n int) int {
	leader := c.waitLeader(-1)
	for i := 0; i < n; {
		_, err := c.agents[leader].Server().Nodes().Register(context.Background(), simNode(i))
		switch {
		case err == nil:
			i++
		case isNoLeader(err):
			leader = c.waitLeader(-1)
		default:
			c.b.Fatal(err)
		}
	}
	return leader
}

// BenchmarkClusterPlanThroughput measures allocations committed per second
// and plans committed per second on a 3-server cluster: sysbatch jobs over
// 2,000 simulated nodes, one eval and one plan of 2,000 allocations each,
// replicated to all three servers.
func BenchmarkClusterPlanThroughput(b *testing.B) {
	c := startCluster(b)
	defer c.shutdown()
	const nodes = 2000
	s := c.agents[c.registerSimNodes(nodes)].Server()
	runJob(b, s, "warmup", nodes)
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		total += runJob(b, s, fmt.Sprintf("tp-%d", i), nodes)
	}
	perSec := float64(nodes*b.N) / total.Seconds()
	plansPerSec := float64(b.N) / total.Seconds()
	b.ReportMetric(perSec, "allocs/s")
	b.ReportMetric(plansPerSec, "plans/s")
	fmt.Printf("plan throughput on a 3-server cluster: %.2f plans/s, %.0f allocations/s (%d nodes per plan)\n", plansPerSec, perSec, nodes)
}

// BenchmarkClusterCatchUp measures how long a follower that was down takes,
// after it restarts, to hold the leader's state when that state has
// 100,000 allocations.
func BenchmarkClusterCatchUp(b *testing.B) {
	c := startCluster(b)
	defer c.shutdown()
	const nodes = 10000
	leader := c.registerSimNodes(nodes)
	s := c.agents[leader].Server()
	follower := (leader + 1) % 3
	b.ResetTimer()
	var total, boot time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c.agents[follower].Shutdown()
		c.agents[follower] = nil
		for j := 0; j < 10; j++ {
			runJob(b, s, fmt.Sprintf("cu-%d-%d", i, j), nodes)
		}
		target := s.State().LatestIndex()
		b.StartTimer()
		start := time.Now()
		c.agents[follower] = c.start(follower)
		// The agent's own start (its Raft log and snapshot read back from
		// disk, plugins launched) is part of the catch-up; it is shown
		// apart from the rest, the leader's entries or snapshot.
		boot += time.Since(start)
		st := c.agents[follower].Server()
		testwait.For(b, 5*time.Minute, fmt.Sprintf("restarted s%d to apply index %d", follower+1, target), func() bool {
			return st.State().LatestIndex() >= target
		})
		total += time.Since(start)
		allocs, _ := st.State().Allocs(nil)
		if len(allocs) < 100000 {
			b.Fatalf("caught-up follower holds %d allocs", len(allocs))
		}
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/catch-up")
	b.ReportMetric(float64(boot.Milliseconds())/float64(b.N), "ms/agent-start")
	fmt.Printf("catch-up of a restarted follower with 100,000+ allocations: %.0f ms (of which agent start %.0f ms)\n",
		float64(total.Microseconds())/float64(b.N)/1000, float64(boot.Microseconds())/float64(b.N)/1000)
}

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
)

// benchCluster is three in-process server agents on loopback: real gRPC
// and Raft over TCP, on-disk Raft logs, as in production.
type benchCluster struct {
	b      *testing.B
	dir    string
	ports  []int
	agents []*agent.Agent
}

func serverConfig(dir, name string, rpcPort int, join []string) *agent.Config {
	return &agent.Config{
		NodeName: name, Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, name),
		BindAddr: "127.0.0.1", LogLevel: "ERROR",
		Ports: &agent.Ports{HTTP: 0, RPC: rpcPort},
		Server: &agent.ServerConfig{Enabled: true, BootstrapExpect: len(join),
			ServerJoin: &agent.ServerJoin{RetryJoin: join, RetryInterval: "100ms"}},
	}
}

func startCluster(b *testing.B) *benchCluster {
	c := &benchCluster{b: b, dir: b.TempDir()}
	var join []string
	for i := 0; i < 3; i++ {
		p := freePort(b)
		c.ports = append(c.ports, p)
		join = append(join, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	for i := range c.ports {
		c.agents = append(c.agents, c.start(i, join))
	}
	c.waitLeader(-1)
	return c
}

func (c *benchCluster) start(i int, join []string) *agent.Agent {
	cfg := serverConfig(c.dir, fmt.Sprintf("s%d", i+1), c.ports[i], join)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.b.Fatal(err)
	}
	a, err := agent.New(cfg, agent.Options{
		Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{pluginEnv},
		HeartbeatTTL: time.Hour,
	})
	if err != nil {
		c.b.Fatal(err)
	}
	return a
}

func (c *benchCluster) shutdown() {
	for _, a := range c.agents {
		if a != nil {
			a.Shutdown()
		}
	}
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
	var total time.Duration
	for i := 0; i < b.N; i++ {
		leader := c.waitLeader(-1)
		start := time.Now()
		_ = c.agents[leader].Server().Shutdown() // a crash: no handover
		c.waitLeader(leader)
		total += time.Since(start)
		c.agents[leader].Shutdown()
		c.agents[leader] = nil
		var join []string
		for _, p := range c.ports {
			join = append(join, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		}
		c.agents[leader] = c.start(leader, join)
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
// on a 3-server cluster: sysbatch jobs over 5,000 simulated nodes, each
// eval's plan replicated to all three servers.
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
	b.ReportMetric(perSec, "allocs/s")
	fmt.Printf("plan throughput on a 3-server cluster: %.0f allocations/s (%d nodes per plan)\n", perSec, nodes)
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
	var join []string
	for _, p := range c.ports {
		join = append(join, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	b.ResetTimer()
	var total time.Duration
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
		c.agents[follower] = c.start(follower, join)
		st := c.agents[follower].Server()
		tick := time.NewTicker(time.Millisecond)
		deadline := time.Now().Add(5 * time.Minute)
		for st.State().LatestIndex() < target {
			if time.Now().After(deadline) {
				b.Fatal("follower did not catch up within 5 minutes")
			}
			<-tick.C
		}
		tick.Stop()
		total += time.Since(start)
		allocs, _ := st.State().Allocs(nil)
		if len(allocs) < 100000 {
			b.Fatalf("caught-up follower holds %d allocs", len(allocs))
		}
	}
	fmt.Printf("catch-up of a restarted follower with 100,000+ allocations: %.0f ms\n", float64(total.Microseconds())/float64(b.N)/1000)
}

package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/structs"
)

func freePort(b *testing.B) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startDevAgent(b *testing.B) *agent.Agent {
	b.Helper()
	cfg := agent.DevConfig()
	cfg.Ports.RPC = freePort(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	a, err := agent.New(cfg, agent.Options{
		Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{pluginEnv},
	})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// waitReadyNode waits until the agent's own node is ready with raw_exec.
func waitReadyNode(b *testing.B, a *agent.Agent) {
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		nodes, _ := a.Server().State().Nodes(nil)
		for _, n := range nodes {
			if n.Ready() && n.Drivers["raw_exec"] != nil && n.Drivers["raw_exec"].Healthy {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no ready node within 30s")
		}
		<-tick.C
	}
}

// BenchmarkDevAgentStart measures `drover agent -dev` from start to a
// ready node: plugins launched, Raft leader elected, node fingerprinted and
// registered.
func BenchmarkDevAgentStart(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		a := startDevAgent(b)
		waitReadyNode(b, a)
		total += time.Since(start)
		a.Shutdown()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/start")
	fmt.Printf("dev agent start to ready node: %.0f ms\n", float64(total.Microseconds())/float64(b.N)/1000)
}

// BenchmarkJobRunToComplete measures a one-node sysbatch job running
// /bin/true from registration to the job dead with its alloc complete.
func BenchmarkJobRunToComplete(b *testing.B) {
	a := startDevAgent(b)
	defer a.Shutdown()
	waitReadyNode(b, a)
	run := func(id string) time.Duration {
		job := benchJob(id)
		job.Datacenters = []string{"*"}
		start := time.Now()
		if _, err := a.Server().Jobs().Register(context.Background(), job, false, 0); err != nil {
			b.Fatal(err)
		}
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for {
			j, _ := a.Server().State().JobByID(nil, "default", id)
			if j != nil && j.Status == structs.JobStatusDead {
				allocs, _ := a.Server().State().AllocsByJob(nil, "default", id, true)
				if len(allocs) != 1 || allocs[0].ClientStatus != structs.AllocClientStatusComplete {
					b.Fatalf("job %s dead without a complete alloc", id)
				}
				return time.Since(start)
			}
			if time.Now().After(deadline) {
				b.Fatalf("job %s not complete within 30s", id)
			}
			<-tick.C
		}
	}
	run("warmup")
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		total += run(fmt.Sprintf("run-%d", i))
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/job")
	fmt.Printf("one-node sysbatch /bin/true, run to complete: %.0f ms\n", float64(total.Microseconds())/float64(b.N)/1000)
}

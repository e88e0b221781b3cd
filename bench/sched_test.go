package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	"github.com/drover-org/drover/sdk/shared"
)

func startHost(b *testing.B) *pluginhost.Host {
	b.Helper()
	h, err := pluginhost.New(context.Background(), pluginhost.Config{
		Logger:  hclog.NewNullLogger(),
		SelfExe: os.Args[0],
		Builtins: []pluginhost.Builtin{
			{Name: "scheduler-system", Kind: shared.KindScheduler, Env: []string{pluginEnv}},
			{Name: "scheduler-sysbatch", Kind: shared.KindScheduler, Env: []string{pluginEnv}},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close() })
	return h
}

// simNode is a simulated node: registered straight into the state store,
// no process behind it.
func simNode(i int) *structs.Node {
	name := fmt.Sprintf("sim-%05d", i)
	return &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: name, Datacenter: "dc1",
		NodePool: structs.NodePoolDefault, Status: structs.NodeStatusReady,
		SchedulingEligibility: structs.NodeSchedulingEligible, ComputedClass: "v1:sim",
		Attributes: map[string]string{
			"kernel.name": "linux", "cpu.arch": "amd64", "os.name": "debian", "unique.hostname": name,
			"cpu.numcores": "8", "memory.totalbytes": "34359738368", "driver.raw_exec": "1",
		},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 32000}, Memory: structs.NodeMemoryResources{MemoryMB: 32768},
			Disk: structs.NodeDiskResources{DiskMB: 1 << 20},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
	}
}

func benchJob(id string) *structs.Job {
	return &structs.Job{
		ID: id, Type: "sysbatch", Datacenters: []string{"dc*"},
		Constraints: []*structs.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}},
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
				Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
		}},
	}
}

// BenchmarkSysbatchSchedule measures one sysbatch job over N simulated
// nodes, from job registration (eval enqueued) to the eval completed with
// its plan committed through Raft, with the scheduler in process and out
// of process. It prints the plugin/in-process ratio.
func BenchmarkSysbatchSchedule(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		results := map[string]float64{}
		for _, mode := range []string{"in-process", "plugin"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, mode), func(b *testing.B) {
				var router server.SchedulerRouter = builtin.InProcess{}
				if mode == "plugin" {
					router = agent.SchedulerRouter(startHost(b).Schedulers())
				}
				s, err := server.New(server.Config{
					Logger: hclog.NewNullLogger(), DevMode: true, Schedulers: router,
					KnownDrivers: []string{"raw_exec"}, HeartbeatTTL: time.Hour,
				})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Shutdown()
				ctx := context.Background()
				if err := s.WaitForLeader(ctx); err != nil {
					b.Fatal(err)
				}
				for i := 0; i < n; i++ {
					if err := s.State().UpsertNode(1, simNode(i)); err != nil {
						b.Fatal(err)
					}
				}
				// One warm-up run fills caches and starts the plugin's
				// code paths, as on a long-running server.
				runJob(b, s, "warmup", n)
				b.ResetTimer()
				var total time.Duration
				for i := 0; i < b.N; i++ {
					// Collect outside the measured window, so every run
					// starts from the same heap state.
					runtime.GC()
					total += runJob(b, s, fmt.Sprintf("bench-%d", i), n)
				}
				b.StopTimer()
				per := float64(total.Nanoseconds()) / float64(b.N)
				results[mode] = per
				b.ReportMetric(per/1e6, "ms/eval")
			})
		}
		if results["in-process"] > 0 && results["plugin"] > 0 {
			fmt.Printf("sysbatch %d nodes: in-process %.1f ms, plugin %.1f ms, plugin/in-process ratio %.2fx\n",
				n, results["in-process"]/1e6, results["plugin"]/1e6, results["plugin"]/results["in-process"])
		}
	}
}

func runJob(b *testing.B, s *server.Server, id string, nodes int) time.Duration {
	start := time.Now()
	resp, err := s.Jobs().Register(context.Background(), benchJob(id), false, 0)
	if err != nil {
		b.Fatal(err)
	}
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	deadline := time.Now().Add(time.Minute)
	for {
		ev, _ := s.State().EvalByID(nil, resp.EvalID)
		if ev != nil && ev.TerminalStatus() {
			if ev.Status != structs.EvalStatusComplete {
				b.Fatalf("eval %s: %s", ev.Status, ev.StatusDescription)
			}
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("eval did not complete within a minute")
		}
		<-tick.C
	}
	d := time.Since(start)
	allocs, _ := s.State().AllocsByJob(nil, "default", id, true)
	if len(allocs) != nodes {
		b.Fatalf("job %s: %d allocs, want %d", id, len(allocs), nodes)
	}
	return d
}

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/structs"
)

// benchBusybox is the docker image of BenchmarkTaskStart, built locally
// FROM scratch around Debian's busybox-static (no registry is reachable).
const benchBusybox = "drover-bench/busybox:latest"

func buildBenchImage(b *testing.B) {
	b.Helper()
	if err := exec.Command("docker", "version").Run(); err != nil {
		b.Skipf("no docker engine: %v", err)
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		b.Skipf("/bin/busybox is needed for the image (apt-get install busybox-static): %v", err)
	}
	dir := b.TempDir()
	df := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nENV PATH=/bin\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("docker", "build", "-q", "-t", benchBusybox, dir)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("docker build: %v: %s", err, out)
	}
}

// BenchmarkTaskStart measures a task's start latency on the dev agent,
// from job registration to the alloc reported running, for the same
// long-running task (`sleep 1000`) on raw_exec and on docker (image
// present locally: no pull). Each job is stopped, untimed, before the next.
func BenchmarkTaskStart(b *testing.B) {
	results := map[string]float64{}
	for _, drv := range []string{"raw_exec", "docker"} {
		b.Run("driver="+drv, func(b *testing.B) {
			if drv == "docker" {
				buildBenchImage(b)
			}
			a := startDevAgent(b)
			defer a.Shutdown()
			waitReadyNode(b, a)
			waitDriver(b, a, drv)
			run := func(id string) time.Duration {
				job := startJob(id, drv)
				start := time.Now()
				if _, err := a.Server().Jobs().Register(context.Background(), job, false, 0); err != nil {
					b.Fatal(err)
				}
				took := waitAlloc(b, a, id, func(al *structs.Allocation) bool { return al.ClientStatus == structs.AllocClientStatusRunning }).Sub(start)
				if _, err := a.Server().Jobs().Deregister(context.Background(), "default", id, false); err != nil {
					b.Fatal(err)
				}
				waitAlloc(b, a, id, func(al *structs.Allocation) bool { return al.ClientStatus == structs.AllocClientStatusComplete })
				return took
			}
			run("warmup-" + drv)
			b.ResetTimer()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				total += run(fmt.Sprintf("start-%s-%d", drv, i))
			}
			ms := float64(total.Microseconds()) / float64(b.N) / 1000
			b.ReportMetric(ms, "ms/start")
			results[drv] = ms
		})
	}
	if len(results) == 2 {
		fmt.Printf("task start (job register → alloc running), sleep 1000: raw_exec %.0f ms, docker %.0f ms (%.1fx)\n",
			results["raw_exec"], results["docker"], results["docker"]/results["raw_exec"])
	}
}

func startJob(id, drv string) *structs.Job {
	cfg := map[string]any{"command": "/bin/sleep", "args": []any{"1000"}}
	if drv == "docker" {
		cfg = map[string]any{"image": benchBusybox, "command": "sleep", "args": []any{"1000"}}
	}
	return &structs.Job{
		ID: id, Type: "system", Datacenters: []string{"*"},
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: drv, Config: cfg, KillTimeout: time.Second,
				Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
		}},
	}
}

func waitDriver(b *testing.B, a *agent.Agent, drv string) {
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		nodes, _ := a.Server().State().Nodes(nil)
		if len(nodes) == 1 && nodes[0].Drivers[drv] != nil && nodes[0].Drivers[drv].Healthy {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("driver %s not healthy on the node within 30s", drv)
		}
		<-tick.C
	}
}

// waitAlloc polls until the job's one alloc satisfies cond and returns
// the time it saw it do so.
func waitAlloc(b *testing.B, a *agent.Agent, id string, cond func(*structs.Allocation) bool) time.Time {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	for {
		allocs, _ := a.Server().State().AllocsByJob(nil, "default", id, true)
		if len(allocs) == 1 && cond(allocs[0]) {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.Fatalf("job %s: alloc not in the awaited state within 60s: %+v", id, allocs)
		}
		<-tick.C
	}
}

// dispatchCount is how many children BenchmarkDispatch100 dispatches.
const dispatchCount = 100

// BenchmarkDispatch100 dispatches a parameterized sysbatch job of one
// busybox task (`busybox true`) 100 times on the dev agent, one dispatch
// after the other, and measures from the first dispatch to the 100th
// child's alloc complete: the same work on raw_exec (/bin/busybox on the
// host) and on docker (busybox in a FROM scratch image, present locally).
func BenchmarkDispatch100(b *testing.B) {
	results := map[string]float64{}
	for _, drv := range []string{"raw_exec", "docker"} {
		b.Run("driver="+drv, func(b *testing.B) {
			if _, err := os.Stat("/bin/busybox"); err != nil {
				b.Skipf("/bin/busybox is needed (apt-get install busybox-static): %v", err)
			}
			if drv == "docker" {
				buildBenchImage(b)
			}
			a := startDevAgent(b)
			defer a.Shutdown()
			waitReadyNode(b, a)
			waitDriver(b, a, drv)
			run := func(parent string) (total, dispatching time.Duration) {
				if _, err := a.Server().Jobs().Register(context.Background(), dispatchParent(parent, drv), false, 0); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				for i := 0; i < dispatchCount; i++ {
					if _, err := a.Server().Jobs().Dispatch(context.Background(), "default", &structs.JobDispatchRequest{JobID: parent}); err != nil {
						b.Fatalf("dispatch %d of %s: %v", i, parent, err)
					}
				}
				dispatching = time.Since(start)
				waitChildrenComplete(b, a, parent)
				return time.Since(start), dispatching
			}
			run("warmup-" + drv)
			b.ResetTimer()
			var total, dispatching time.Duration
			for i := 0; i < b.N; i++ {
				t, d := run(fmt.Sprintf("dispatch-%s-%d", drv, i))
				total += t
				dispatching += d
			}
			s := total.Seconds() / float64(b.N)
			b.ReportMetric(s, "s/100-dispatches")
			b.ReportMetric(float64(dispatchCount)/s, "children/s")
			b.ReportMetric(float64(dispatching.Milliseconds())/float64(b.N), "ms-dispatching")
			results[drv] = s
		})
	}
	if len(results) == 2 {
		fmt.Printf("100 sysbatch dispatches of busybox true, first dispatch → 100th child complete: raw_exec %.2f s, docker %.2f s (%.1fx)\n",
			results["raw_exec"], results["docker"], results["docker"]/results["raw_exec"])
	}
}

// dispatchParent is a parameterized sysbatch job of one `busybox true`
// task on drv.
func dispatchParent(id, drv string) *structs.Job {
	cfg := map[string]any{"command": "/bin/busybox", "args": []any{"true"}}
	if drv == "docker" {
		cfg = map[string]any{"image": benchBusybox, "command": "true"}
	}
	return &structs.Job{
		ID: id, Type: "sysbatch", Datacenters: []string{"*"},
		ParameterizedJob: &structs.ParameterizedJobConfig{},
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: drv, Config: cfg, KillTimeout: time.Second,
				Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
		}},
	}
}

// waitChildrenComplete polls until every child of parent has its alloc
// complete; a failed child fails the benchmark.
func waitChildrenComplete(b *testing.B, a *agent.Agent, parent string) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	prefix := parent + "/dispatch-"
	for {
		allocs, _ := a.Server().State().Allocs(nil)
		done := 0
		for _, al := range allocs {
			if !strings.HasPrefix(al.JobID, prefix) {
				continue
			}
			switch al.ClientStatus {
			case structs.AllocClientStatusComplete:
				done++
			case structs.AllocClientStatusFailed, structs.AllocClientStatusLost:
				b.Fatalf("child %s: alloc %s %s: %+v", al.JobID, al.ID, al.ClientStatus, al.TaskStates)
			}
		}
		if done == dispatchCount {
			return
		}
		if done > dispatchCount {
			b.Fatalf("%d complete allocs for %d children of %s", done, dispatchCount, parent)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d children of %s complete after 10 minutes", done, dispatchCount, parent)
		}
		<-tick.C
	}
}

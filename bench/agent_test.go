package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
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

// BenchmarkDevAgentProcess runs the drover binary itself, `drover agent
// -dev` as a user starts it, and measures from exec to a ready node with a
// healthy raw_exec (ms/ready, polled every 2 ms), the CPU time of its
// process tree until then (cpu-ms/ready), and, after idleSettle at rest,
// the tree's proportional set size summed over /proc/<pid>/smaps_rollup
// (idle-pss-MB) and its process count (procs). It builds cmd/drover of this
// module; DROVER_BENCH_BASE_DROVER names a second drover binary (a build of
// the base commit) measured the same way in alternate rounds of the same
// run, reported with a base- prefix.
func BenchmarkDevAgentProcess(b *testing.B) {
	bins := []struct{ label, path string }{{"", buildDrover(b)}}
	if base := os.Getenv("DROVER_BENCH_BASE_DROVER"); base != "" {
		bins = append(bins, struct{ label, path string }{"base-", base})
	}
	type sums struct {
		ready, cpu time.Duration
		pss        int64 // kB
		procs      int
	}
	got := make([]sums, len(bins))
	for i := 0; i < b.N; i++ {
		for j, bin := range bins {
			ready, cpu, pss, procs := devProcessRound(b, bin.path)
			got[j].ready += ready
			got[j].cpu += cpu
			got[j].pss += pss
			got[j].procs += procs
		}
	}
	for j, bin := range bins {
		n := float64(b.N)
		s := got[j]
		b.ReportMetric(float64(s.ready.Microseconds())/n/1000, bin.label+"ms/ready")
		b.ReportMetric(float64(s.cpu.Milliseconds())/n, bin.label+"cpu-ms/ready")
		b.ReportMetric(float64(s.pss)/n/1024, bin.label+"idle-pss-MB")
		b.ReportMetric(float64(s.procs)/n, bin.label+"procs")
		fmt.Printf("%sdrover agent -dev (%s): exec to ready node %.0f ms, tree CPU to ready %.0f ms, idle tree PSS %.1f MB in %.1f processes\n",
			bin.label, bin.path, float64(s.ready.Microseconds())/n/1000, float64(s.cpu.Milliseconds())/n,
			float64(s.pss)/n/1024, float64(s.procs)/n)
	}
}

// idleSettle is how long an agent rests after its node is ready before its
// idle memory is measured: part of the measurement (what "idle" means
// here), not a wait for an event.
const idleSettle = 3 * time.Second

// devProcessRound starts `bin agent -dev`, waits for its ready node, and
// returns exec to ready, the tree's CPU time to ready, and its PSS (kB) and
// process count once idle; the agent is stopped again.
func devProcessRound(b *testing.B, bin string) (ready, cpu time.Duration, pssKB int64, procs int) {
	b.Helper()
	httpPort, rpcPort := freePort(b), freePort(b)
	cmd := exec.Command(bin, "agent", "-dev", "-log-level", "warn",
		"-http-port", strconv.Itoa(httpPort), "-rpc-port", strconv.Itoa(rpcPort))
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	d := &devProcess{cmd: cmd, addr: fmt.Sprintf("http://127.0.0.1:%d", httpPort), http: &http.Client{Timeout: 5 * time.Second}}
	testwait.Every(b, 60*time.Second, 2*time.Millisecond, "a ready node with a healthy raw_exec driver", func() bool {
		var nodes []struct {
			Status  string
			Drivers map[string]struct{ Healthy bool }
		}
		if err := d.call("GET", "/v1/nodes?resources=true", nil, &nodes); err != nil {
			return false
		}
		for _, n := range nodes {
			if n.Status == "ready" && n.Drivers["raw_exec"].Healthy {
				return true
			}
		}
		return false
	})
	ready = time.Since(start)
	cpu, _, err := treeCPU(cmd.Process.Pid, os.Getpid(), -1)
	if err != nil {
		b.Fatal(err)
	}
	d.http.CloseIdleConnections()
	<-time.After(idleSettle)
	pssKB, procs, err = treePSS(cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	return ready, cpu, pssKB, procs
}

// treePSS sums the proportional set size (kB) of pid and its live
// descendants from /proc/<p>/smaps_rollup: shared pages (the drover binary
// every plugin maps) count once over the tree, split among its processes.
func treePSS(pid int) (int64, int, error) {
	var total int64
	n := 0
	var walk func(p int) error
	walk = func(p int) error {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					return fmt.Errorf("smaps_rollup of %d: %q: %w", p, line, err)
				}
				total += kb
				n++
				break
			}
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, t := range tasks {
			raw, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(raw)) {
				c, _ := strconv.Atoi(f)
				if err := walk(c); err != nil && c > 0 {
					continue // exited meanwhile
				}
			}
		}
		return nil
	}
	if err := walk(pid); err != nil {
		return 0, 0, err
	}
	return total, n, nil
}

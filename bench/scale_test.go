package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/nodesim"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

// BenchmarkScale10k is drover issue 30: N simulated nodes (env
// DROVER_SCALE_NODES, default 10,000) against three in-process servers on
// loopback, through the real join, RPC and mutual TLS (core/nodesim). It
// reports, once (run it with -benchtime=1x):
//
//   - reg-s: from the simulator's start to every node ready in the
//     leader's state (join with the client join token, Node.Register,
//     first heartbeat);
//   - leader-cpu-%, servers-cpu-%, sim-cpu-%: CPU in % of one core over
//     DROVER_SCALE_STEADY (default 20s) in which only heartbeats (and idle
//     blocking queries) happen. The servers run in this process and the
//     simulator in a child process (its own file table: N connections
//     each side do not fit one process's 20,000 files), so servers-cpu-%
//     is this process's CPU; each server's goroutines carry a pprof label,
//     and a CPU profile of the interval splits that CPU between them:
//     leader-cpu-% is the leader's share;
//   - sysbatch-s: a sysbatch job over all nodes, from submit to every
//     alloc complete; system-s: a system job to running on every node;
//   - failover-leader-ms: the leader crashes (its server stops at once)
//     to a new leader accepting writes; failover-first-hb-ms to the first
//     heartbeat the new leader accepts; failover-hb-ms until heartbeats
//     are re-established (one accepted, and no node's heartbeat failing:
//     every node whose heartbeat fell due reached the new leader; the
//     others are not due yet, and the new leader's failover TTL covers
//     them); nodes-down: nodes marked down since the crash, which must
//     be 0;
//   - catchup-ms: the old leader, down while a sysbatch job ran over all
//     nodes (N allocs placed, N completions), restarts and applies the
//     leader's index.
//
// DROVER_SCALE_PROFILE_DIR names a directory for a CPU profile of each
// phase (register, steady, sysbatch, system, failover, catchup); the
// benchmark profiles itself, so do not pass -cpuprofile.
func BenchmarkScale10k(b *testing.B) {
	n := envInt(b, "DROVER_SCALE_NODES", 10000)
	steady := envDuration(b, "DROVER_SCALE_STEADY", 20*time.Second)
	// DROVER_SCALE_STOP_AFTER ends the run after the named phase
	// (register, steady, sysbatch, system, failover).
	stopAfter := os.Getenv("DROVER_SCALE_STOP_AFTER")
	c := startScaleCluster(b)
	defer c.shutdown()
	leader := c.waitLeader(-1)
	token, err := c.agents[0].Server().PKI().JoinToken("client")
	if err != nil {
		b.Fatal(err)
	}

	// Registration.
	prof := startPhase(b, "register", false)
	start := time.Now()
	sim := startSimChild(b, c.join, token, n)
	defer sim.stop(b)
	simStart := sim.ready
	leader = c.waitLeader(-1)
	testwait.Every(b, 10*time.Minute, 250*time.Millisecond, fmt.Sprintf("%d simulated nodes ready on the leader", n), func() bool {
		return readyNodes(c.leaderServer(&leader)) == n
	})
	reg := time.Since(start)
	prof.stop(b)
	b.ReportMetric(reg.Seconds(), "reg-s")
	fmt.Printf("scale n=%d: registration of all nodes: %.1f s (simulator's Start: %.1f s)\n", n, reg.Seconds(), simStart.Seconds())
	if stopAfter == "register" {
		return
	}

	// Steady state: let the registration's writes and the first
	// heartbeats' burst settle over a TTL, then measure.
	settle := time.NewTimer(10 * time.Second)
	<-settle.C
	st0 := sim.stats(b)
	self0, child0 := selfCPU(), procCPU(b, sim.cmd.Process.Pid)
	prof = startPhase(b, "steady", true)
	t0 := time.Now()
	wait := time.NewTimer(steady)
	<-wait.C
	el := time.Since(t0)
	steadyProf := prof.stop(b)
	self1, child1 := selfCPU(), procCPU(b, sim.cmd.Process.Pid)
	st1 := sim.stats(b)
	serversPct := 100 * (self1 - self0).Seconds() / el.Seconds()
	simPct := 100 * (child1 - child0).Seconds() / el.Seconds()
	shares := cpuByLabel(b, steadyProf, "server")
	var total time.Duration
	for _, d := range shares {
		total += d
	}
	leaderName := fmt.Sprintf("s%d", leader+1)
	leaderPct := 0.0
	if total > 0 {
		leaderPct = serversPct * float64(shares[leaderName]) / float64(total)
	}
	hbRate := float64(st1.Heartbeats-st0.Heartbeats) / el.Seconds()
	b.ReportMetric(leaderPct, "leader-cpu-%")
	b.ReportMetric(serversPct, "servers-cpu-%")
	b.ReportMetric(simPct, "sim-cpu-%")
	b.ReportMetric(hbRate, "heartbeats/s")
	fmt.Printf("scale n=%d: steady heartbeats over %s: %.0f heartbeats/s; CPU (%% of one core): leader %s %.1f, all three servers %.1f (by label %v), simulator %.1f; heartbeat errors %d\n",
		n, el.Round(time.Second), hbRate, leaderName, leaderPct, serversPct, shares, simPct, st1.HeartbeatErrors-st0.HeartbeatErrors)
	if stopAfter == "steady" {
		return
	}

	// A sysbatch job over all nodes, submit to complete.
	prof = startPhase(b, "sysbatch", false)
	d := runScaleJob(b, c, &leader, "scale-sb", "sysbatch", n, structs.AllocClientStatusComplete)
	prof.stop(b)
	b.ReportMetric(d.Seconds(), "sysbatch-s")
	fmt.Printf("scale n=%d: sysbatch job submit → complete on all nodes: %.1f s\n", n, d.Seconds())
	if stopAfter == "sysbatch" {
		return
	}

	// A system job to running on all nodes.
	prof = startPhase(b, "system", false)
	d = runScaleJob(b, c, &leader, "scale-sys", "system", n, structs.AllocClientStatusRunning)
	prof.stop(b)
	b.ReportMetric(d.Seconds(), "system-s")
	fmt.Printf("scale n=%d: system job submit → running on all nodes: %.1f s\n", n, d.Seconds())
	if stopAfter == "system" {
		return
	}

	// Leader failover under the heartbeat load.
	old := leader
	prof = startPhase(b, "failover", false)
	crash := time.Now()
	_ = c.agents[old].Server().Shutdown() // a crash: no handover
	leader = c.waitLeader(old)
	tLeader := time.Since(crash)
	// Heartbeats are re-established once the new leader accepted one and
	// no node's heartbeat is failing: every node whose heartbeat fell due
	// since the crash reached the new leader. The others are not due yet
	// (the TTL grows with the fleet, so that can be minutes), and the new
	// leader's failover TTL covers them.
	var tFirst, tAll time.Duration
	tick := time.NewTicker(50 * time.Millisecond)
	deadline := time.Now().Add(2 * time.Minute)
	heard := 0
	for tAll == 0 {
		<-tick.C
		k := sim.since(b, crash)
		if k > 0 && tFirst == 0 {
			tFirst = time.Since(crash)
		}
		if tFirst > 0 && sim.failing(b) == 0 {
			tAll, heard = time.Since(crash), k
		}
		if time.Now().After(deadline) {
			b.Fatalf("heartbeats not re-established within 2 minutes of the failover: %d nodes heard from, %d failing", k, sim.failing(b))
		}
	}
	tick.Stop()
	prof.stop(b)
	// The new leader's timers give every node a TTL and a grace from its
	// election; a node it marks down, it marks within those.
	grace := time.NewTimer(20 * time.Second)
	<-grace.C
	down := nodesMarkedDownSince(c.leaderServer(&leader), crash)
	b.ReportMetric(float64(tLeader.Milliseconds()), "failover-leader-ms")
	b.ReportMetric(float64(tFirst.Milliseconds()), "failover-first-hb-ms")
	b.ReportMetric(float64(tAll.Milliseconds()), "failover-hb-ms")
	b.ReportMetric(float64(down), "nodes-down")
	fmt.Printf("scale n=%d: failover: new leader s%d in %d ms, first heartbeat accepted %d ms, heartbeats re-established (none failing; %d nodes heard from) %d ms after the crash; %d nodes marked down\n",
		n, leader+1, tLeader.Milliseconds(), tFirst.Milliseconds(), heard, tAll.Milliseconds(), down)
	if down > 0 {
		b.Errorf("%d nodes marked down during the failover", down)
	}
	if stopAfter == "failover" {
		return
	}

	// The old leader is down; a sysbatch job runs over all nodes without
	// it, then it restarts and catches up.
	c.agents[old].Shutdown()
	c.agents[old] = nil
	runScaleJob(b, c, &leader, "scale-cu", "sysbatch", n, structs.AllocClientStatusComplete)
	target := c.leaderServer(&leader).State().LatestIndex()
	prof = startPhase(b, "catchup", false)
	restart := time.Now()
	c.agents[old] = c.startScale(old)
	boot := time.Since(restart)
	fs := c.agents[old].Server()
	testwait.Every(b, 5*time.Minute, 20*time.Millisecond, fmt.Sprintf("restarted s%d to apply index %d", old+1, target), func() bool {
		return fs.State().LatestIndex() >= target
	})
	cu := time.Since(restart)
	prof.stop(b)
	b.ReportMetric(float64(cu.Milliseconds()), "catchup-ms")
	fmt.Printf("scale n=%d: restarted follower s%d caught up (index %d) in %d ms (of which agent start %d ms)\n",
		n, old+1, target, cu.Milliseconds(), boot.Milliseconds())
	st := sim.stats(b)
	fmt.Printf("scale n=%d: simulator totals %+v\n", n, st)
}

// phaseProfile profiles the CPU of one phase of the benchmark. The
// steady phase is always profiled (its labels split the servers' CPU);
// the others only when DROVER_SCALE_PROFILE_DIR names a directory, where
// every phase's profile is written as <phase>.pprof.
type phaseProfile struct {
	name string
	buf  bytes.Buffer
	on   bool
}

func startPhase(b *testing.B, name string, always bool) *phaseProfile {
	p := &phaseProfile{name: name}
	if !always && os.Getenv("DROVER_SCALE_PROFILE_DIR") == "" {
		return p
	}
	if err := pprof.StartCPUProfile(&p.buf); err != nil {
		b.Fatalf("profile %s (is -cpuprofile set? the benchmark profiles its phases itself): %v", name, err)
	}
	p.on = true
	return p
}

// stop ends the profile and returns it (nil when the phase was not
// profiled), after printing the CPU each server's goroutines took.
func (p *phaseProfile) stop(b *testing.B) []byte {
	if !p.on {
		return nil
	}
	pprof.StopCPUProfile()
	fmt.Printf("  profile %s: CPU by server %v\n", p.name, cpuByLabel(b, p.buf.Bytes(), "server"))
	if dir := os.Getenv("DROVER_SCALE_PROFILE_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, p.name+".pprof"), p.buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return p.buf.Bytes()
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		b.Fatalf("%s: %q must be a positive integer", name, s)
	}
	return v
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s: %q must be a positive duration", name, s)
	}
	return v
}

// startScaleCluster is startCluster with the default heartbeat TTL (the
// cluster benchmarks use an hour: they have no live nodes) and each
// server's goroutines labelled server=sN for the CPU profile.
func startScaleCluster(b *testing.B) *benchCluster {
	c := &benchCluster{b: b, dir: b.TempDir(), agents: make([]*agent.Agent, 3)}
	for i := 0; i < 3; i++ {
		p := freePort(b)
		c.ports = append(c.ports, p)
		c.join = append(c.join, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	c.agents[0] = c.startScale(0)
	tok, err := c.agents[0].Server().PKI().JoinToken("server")
	if err != nil {
		c.shutdown()
		b.Fatalf("s1's server join token: %v", err)
	}
	c.token = tok
	for i := 1; i < 3; i++ {
		c.agents[i] = c.startScale(i)
	}
	c.waitFormed()
	return c
}

func (c *benchCluster) startScale(i int) *agent.Agent {
	name := fmt.Sprintf("s%d", i+1)
	cfg := serverConfig(c.dir, name, c.ports[i], c.join, c.token)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.b.Fatal(err)
	}
	var a *agent.Agent
	// Goroutines inherit their creator's labels: everything the agent
	// starts (Raft, the RPC server and each connection's goroutines, the
	// leader's loops) is counted to it.
	pprof.Do(context.Background(), pprof.Labels("server", name), func(context.Context) {
		a, err = agent.New(cfg, agent.Options{
			Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{pluginEnv},
		})
	})
	if err != nil {
		ln.Close()
		c.shutdown()
		c.b.Fatalf("start %s: %v", name, err)
	}
	return a
}

// leaderServer returns the leader's server, waiting for one if the one at
// *leader no longer leads.
func (c *benchCluster) leaderServer(leader *int) *server.Server {
	if a := c.agents[*leader]; a == nil || !a.Server().IsLeader() {
		*leader = c.waitLeader(-1)
	}
	return c.agents[*leader].Server()
}

func readyNodes(s *server.Server) int {
	nodes, _ := s.State().Nodes(nil)
	k := 0
	for _, n := range nodes {
		if n.Ready() {
			k++
		}
	}
	return k
}

// nodesMarkedDownSince counts the nodes a leader marked down (for a missed
// heartbeat) since t.
func nodesMarkedDownSince(s *server.Server, t time.Time) int {
	nodes, _ := s.State().Nodes(nil)
	k := 0
	for _, n := range nodes {
		if !n.Ready() {
			k++
			continue
		}
		for _, ev := range n.Events {
			if ev.Message == "Node heartbeat missed" && ev.Timestamp.After(t) {
				k++
				break
			}
		}
	}
	return k
}

func scaleJob(id, typ string) *structs.Job {
	j := benchJob(id)
	j.Type = typ
	return j
}

// runScaleJob submits a job to the leader and waits until its group's
// summary counts n allocs in status.
func runScaleJob(b *testing.B, c *benchCluster, leader *int, id, typ string, n int, status string) time.Duration {
	start := time.Now()
	for {
		_, err := c.leaderServer(leader).Jobs().Register(context.Background(), scaleJob(id, typ), false, 0)
		if err == nil {
			break
		}
		if !isNoLeader(err) {
			b.Fatal(err)
		}
	}
	testwait.Every(b, 5*time.Minute, 50*time.Millisecond, fmt.Sprintf("%s job %s %s on %d nodes", typ, id, status, n), func() bool {
		sum, _ := c.leaderServer(leader).State().JobSummaryByID(nil, "default", id)
		if sum == nil {
			return false
		}
		g := sum.Summary["g"]
		if status == structs.AllocClientStatusComplete {
			return g.Complete == n
		}
		return g.Running == n
	})
	d := time.Since(start)
	// How many evaluations it took: one per node would be a scheduler
	// pass over all nodes per node.
	evals, _ := c.leaderServer(leader).State().EvalsByJob(nil, "default", id)
	byTrigger := map[string]int{}
	for _, ev := range evals {
		byTrigger[ev.TriggeredBy]++
	}
	fmt.Printf("  job %s: %d evaluations by trigger %v\n", id, len(evals), byTrigger)
	return d
}

// selfCPU is this process's user and system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is a process's user and system CPU time from /proc/<pid>/stat
// (in clock ticks of 1/100 s, USER_HZ on Linux).
func procCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis (state is field 3, utime 14).
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// cpuByLabel sums a CPU profile's samples by the value of one label
// ("" for unlabelled ones), reading the profile's protobuf directly
// (profile.proto: Profile.sample = 2, string_table = 6; Sample.value = 2,
// label = 3; Label.key = 1, str = 2).
func cpuByLabel(b *testing.B, gz []byte, key string) map[string]time.Duration {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	type sample struct {
		ns     int64
		labels map[int64]int64
	}
	var samples []sample
	var strs []string
	fields := func(buf []byte, f func(num protowire.Number, typ protowire.Type, v []byte, u uint64)) {
		for len(buf) > 0 {
			num, typ, n := protowire.ConsumeTag(buf)
			if n < 0 {
				b.Fatal("cpu profile: bad tag")
			}
			buf = buf[n:]
			switch typ {
			case protowire.BytesType:
				v, m := protowire.ConsumeBytes(buf)
				f(num, typ, v, 0)
				buf = buf[m:]
			case protowire.VarintType:
				u, m := protowire.ConsumeVarint(buf)
				f(num, typ, nil, u)
				buf = buf[m:]
			default:
				m := protowire.ConsumeFieldValue(num, typ, buf)
				if m < 0 {
					b.Fatal("cpu profile: bad field")
				}
				buf = buf[m:]
			}
		}
	}
	fields(raw, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) {
		switch num {
		case 6:
			strs = append(strs, string(v))
		case 2:
			s := sample{labels: map[int64]int64{}}
			fields(v, func(num protowire.Number, typ protowire.Type, v []byte, u uint64) {
				switch {
				case num == 2 && typ == protowire.BytesType: // packed values: samples, cpu ns
					for len(v) > 0 {
						x, m := protowire.ConsumeVarint(v)
						s.ns = int64(x)
						v = v[m:]
					}
				case num == 2:
					s.ns = int64(u)
				case num == 3:
					var k, sv int64
					fields(v, func(num protowire.Number, _ protowire.Type, _ []byte, u uint64) {
						switch num {
						case 1:
							k = int64(u)
						case 2:
							sv = int64(u)
						}
					})
					s.labels[k] = sv
				}
			})
			samples = append(samples, s)
		}
	})
	out := map[string]time.Duration{}
	for _, s := range samples {
		name := ""
		for k, v := range s.labels {
			if int(k) < len(strs) && strs[k] == key && int(v) < len(strs) {
				name = strs[v]
			}
		}
		out[name] += time.Duration(s.ns)
	}
	return out
}

// The simulator runs in a child process: this test binary, re-executed
// with simChildEnv set, runs nodesim and answers on stdout one line per
// command read on stdin ("stats": the counters as JSON; "since <unix ns>":
// how many nodes heartbeated since then; "failing": how many nodes' last
// heartbeat failed). EOF on stdin stops it.
const simChildEnv = "DROVER_BENCH_NODESIM"

func init() {
	if os.Getenv(simChildEnv) == "" {
		return
	}
	os.Exit(runSimChild())
}

type simChildConfig struct {
	Servers          []string
	Token            string
	Nodes            int
	StartConcurrency int
}

func runSimChild() int {
	var cfg simChildConfig
	if err := json.Unmarshal([]byte(os.Getenv(simChildEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "nodesim child: config: %v\n", err)
		return 2
	}
	start := time.Now()
	sim, err := nodesim.Start(context.Background(), nodesim.Config{
		Servers: cfg.Servers, JoinToken: cfg.Token, Nodes: cfg.Nodes, LoopbackSources: true, StartConcurrency: cfg.StartConcurrency,
		RunDelay: 100 * time.Millisecond, CompleteDelay: 500 * time.Millisecond,
		CompleteTypes: []string{"batch", "sysbatch"},
		Logger:        hclog.New(&hclog.LoggerOptions{Name: "nodesim", Level: hclog.Warn, Output: os.Stderr}),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodesim child: %v\n", err)
		return 1
	}
	defer sim.Stop()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "ready %d\n", time.Since(start).Nanoseconds())
	out.Flush()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "stats":
			js, _ := json.Marshal(sim.Stats())
			fmt.Fprintf(out, "%s\n", js)
		case "since":
			ns, _ := strconv.ParseInt(arg, 10, 64)
			fmt.Fprintf(out, "%d\n", sim.HeartbeatedSince(time.Unix(0, ns)))
		case "failing":
			fmt.Fprintf(out, "%d\n", sim.HeartbeatsFailing())
		default:
			fmt.Fprintf(out, "unknown command %q\n", cmd)
		}
		out.Flush()
	}
	return 0
}

type simChild struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	mu    sync.Mutex
	ready time.Duration
}

func startSimChild(b *testing.B, servers []string, token string, n int) *simChild {
	// DROVER_SCALE_START_CONCURRENCY bounds the nodes joining and
	// registering at once (nodesim's default, 64, when unset).
	conc := 0
	if os.Getenv("DROVER_SCALE_START_CONCURRENCY") != "" {
		conc = envInt(b, "DROVER_SCALE_START_CONCURRENCY", 64)
	}
	js, _ := json.Marshal(simChildConfig{Servers: servers, Token: token, Nodes: n, StartConcurrency: conc})
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), simChildEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &simChild{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !s.out.Scan() {
		_ = cmd.Wait()
		b.Fatalf("simulator exited before all nodes registered: %v", cmd.ProcessState)
	}
	ns, err := strconv.ParseInt(strings.TrimPrefix(s.out.Text(), "ready "), 10, 64)
	if err != nil {
		b.Fatalf("simulator: %q", s.out.Text())
	}
	s.ready = time.Duration(ns)
	return s
}

func (s *simChild) ask(b *testing.B, line string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintln(s.in, line); err != nil {
		b.Fatalf("simulator: %v", err)
	}
	if !s.out.Scan() {
		b.Fatalf("simulator exited: %v", s.out.Err())
	}
	return s.out.Text()
}

func (s *simChild) stats(b *testing.B) nodesim.Stats {
	var st nodesim.Stats
	if err := json.Unmarshal([]byte(s.ask(b, "stats")), &st); err != nil {
		b.Fatalf("simulator stats: %v", err)
	}
	return st
}

func (s *simChild) since(b *testing.B, t time.Time) int {
	k, err := strconv.Atoi(s.ask(b, fmt.Sprintf("since %d", t.UnixNano())))
	if err != nil {
		b.Fatalf("simulator: %v", err)
	}
	return k
}

func (s *simChild) failing(b *testing.B) int {
	k, err := strconv.Atoi(s.ask(b, "failing"))
	if err != nil {
		b.Fatalf("simulator: %v", err)
	}
	return k
}

// stop closes the child's stdin (it stops its nodes and exits) and waits.
func (s *simChild) stop(b *testing.B) {
	_ = s.in.Close()
	if err := s.cmd.Wait(); err != nil {
		b.Errorf("simulator: %v", err)
	}
}

package server

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/server/gcengine"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	"github.com/drover-org/drover/plugins/gc"
	sdkgc "github.com/drover-org/drover/sdk/gc"
)

// The GC benchmarks (make bench): a backlog of terminal evals and allocs of
// finished sysbatch jobs, seeded through Raft in large entries outside the
// timer, then reaped by ForceGC with the default plugin and the default
// pacing (gcengine.DefaultPacing).
//
// -gcbench.objects sets the backlog (evals plus allocs).

var (
	gcBenchObjects    = flag.Int("gcbench.objects", 100_000, "GC benchmarks: evals plus allocs in the backlog")
	gcBenchBatch      = flag.Int("gcbench.batch", 0, "GC benchmarks: objects per GCReap entry (0: the default pacing's)")
	gcBenchShare      = flag.Float64("gcbench.share", 0, "GC benchmarks: pacing Share (0: the default pacing's)")
	gcBenchTarget     = flag.Duration("gcbench.target", 0, "GC benchmarks: pacing EntryTarget, the time one reap entry holds the state machine (0: the default pacing's)")
	gcBenchMin        = flag.Int("gcbench.minbatch", 0, "GC benchmarks: pacing MinBatch, the fewest objects in a reap entry (0: the default pacing's)")
	gcBenchPage       = flag.Int("gcbench.page", 0, "GC benchmarks: objects a page is filled to (0: the default pacing's)")
	gcBenchMark       = flag.Duration("gcbench.markwait", -1, "GC benchmarks: pacing MarkWait, the longest a step waits for Go's mark phase to end (0: never waits; negative: the default pacing's)")
	gcBenchIdleAfter  = flag.Duration("gcbench.idleafter", 0, "GC benchmarks: pacing IdleAfter, the quiet after which the cluster counts idle (0: the default pacing's; negative: never idle)")
	gcBenchIdleTarget = flag.Duration("gcbench.idletarget", 0, "GC benchmarks: pacing IdleEntryTarget (0: the default pacing's)")
	gcBenchInFlight   = flag.Int("gcbench.inflight", 0, "GC benchmarks: pacing IdleInFlight (0: the default pacing's)")
	gcBenchTrace      = flag.String("gcbench.trace", "", "GC latency benchmark: write every sample and GC step, with its start in ms since the process started, to this file (to line up with GODEBUG=gctrace=1)")
	gcBenchProfile    = flag.String("gcbench.cpuprofile", "", "GC backlog benchmark: write a CPU profile of ForceGC's runs alone (not the seeding) to this file")
	gcBenchSnapAt     = flag.Uint64("gcbench.snapshot-threshold", 0, "GC benchmarks: Raft SnapshotThreshold, log entries between snapshots (0: Raft's default)")
)

// gcBenchPacing is the default pacing with the flags' overrides, nil
// without any.
func gcBenchPacing() *gcengine.Pacing {
	if *gcBenchBatch == 0 && *gcBenchShare == 0 && *gcBenchTarget == 0 && *gcBenchMin == 0 && *gcBenchPage == 0 && *gcBenchMark < 0 &&
		*gcBenchIdleAfter == 0 && *gcBenchIdleTarget == 0 && *gcBenchInFlight == 0 {
		return nil
	}
	p := gcengine.DefaultPacing()
	if *gcBenchBatch > 0 {
		p.BatchObjects = *gcBenchBatch
	}
	if *gcBenchShare > 0 {
		p.Share = *gcBenchShare
	}
	if *gcBenchTarget > 0 {
		p.EntryTarget = *gcBenchTarget
	}
	if *gcBenchMin > 0 {
		p.MinBatch = *gcBenchMin
	}
	if *gcBenchPage > 0 {
		p.Limits.Fill = *gcBenchPage
	}
	if *gcBenchMark >= 0 {
		p.MarkWait = *gcBenchMark
	}
	if *gcBenchIdleAfter != 0 {
		p.IdleAfter = max(*gcBenchIdleAfter, 0)
	}
	if *gcBenchIdleTarget > 0 {
		p.IdleEntryTarget = *gcBenchIdleTarget
	}
	if *gcBenchInFlight > 0 {
		p.IdleInFlight = *gcBenchInFlight
	}
	return &p
}

// gcBenchEvalsPerJob: each finished job of the backlog has this many
// complete evals, each with one complete alloc.
const gcBenchEvalsPerJob = 100

// benchWriter logs a server's warnings through the benchmark.
type benchWriter struct{ b *testing.B }

func (w benchWriter) Write(p []byte) (int, error) { w.b.Log(string(p)); return len(p), nil }

// gcBenchServer is testServer for a benchmark: a dev server whose GC is the
// default plugin, with the default pacing and jobs that run only when
// forced.
func gcBenchServer(b *testing.B, pacing *gcengine.Pacing) *Server {
	b.Helper()
	s, err := New(Config{
		Logger:            hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: benchWriter{b}}),
		DevMode:           true,
		Schedulers:        builtin.InProcess{},
		KnownDrivers:      []string{"raw_exec"},
		HeartbeatTTL:      time.Hour,
		GC:                &gcRouter{col: gc.New()},
		GCConfig:          GCConfig{JobGCInterval: time.Hour, CSIVolumeClaimGCInterval: time.Hour},
		gcPacing:          pacing,
		gcTrace:           benchTrace.step,
		SnapshotThreshold: *gcBenchSnapAt,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitForLeader(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}

// seedGCBacklog commits objects/2 complete evals and as many complete
// allocs, in dead sysbatch jobs of gcBenchEvalsPerJob evals each, through
// Raft: per job one registration (no eval, so no scheduler runs), one plan
// result with its allocs and one eval update. The allocs are on nodes that
// are gone (never registered): the backlog is not in the way of the
// scheduler's node reads. It returns the objects seeded.
func seedGCBacklog(b *testing.B, s *Server, objects int) int {
	b.Helper()
	jobs := max(1, objects/(2*gcBenchEvalsPerJob))
	gone := make([]string, 16)
	for i := range gone {
		gone[i] = uuid.NewString()
	}
	for j := 0; j < jobs; j++ {
		job := testJob(fmt.Sprintf("backlog-%d", j), "sysbatch")
		job.Canonicalize()
		if _, err := s.raftApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Namespace: job.Namespace, JobID: job.ID}); err != nil {
			b.Fatal(err)
		}
		stored, err := s.State().JobByID(nil, job.Namespace, job.ID)
		if err != nil || stored == nil {
			b.Fatalf("job %s not stored: %v", job.ID, err)
		}
		evals := make([]*structs.Evaluation, gcBenchEvalsPerJob)
		allocs := make([]*structs.Allocation, gcBenchEvalsPerJob)
		for i := range evals {
			evals[i] = &structs.Evaluation{ID: uuid.NewString(), Namespace: job.Namespace, JobID: job.ID, Type: job.Type,
				Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete}
			a := newPlanAlloc(stored, gone[i%len(gone)], 100, 64)
			a.EvalID = evals[i].ID
			a.ClientStatus = structs.AllocClientStatusComplete
			allocs[i] = a
		}
		if _, err := s.raftApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: stored, AllocsUpdated: allocs}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals}); err != nil {
			b.Fatal(err)
		}
	}
	n := gcBacklogLeft(b, s)
	if want := jobs * 2 * gcBenchEvalsPerJob; n != want {
		b.Fatalf("seeded %d objects, want %d", n, want)
	}
	if st := jobStatus(s, "backlog-0"); st != structs.JobStatusDead {
		b.Fatalf("backlog job %s, want dead", st)
	}
	return n
}

// gcBacklogLeft counts the evals and allocs in state.
func gcBacklogLeft(b *testing.B, s *Server) int {
	b.Helper()
	evals, err := s.State().Evals(nil)
	if err != nil {
		b.Fatal(err)
	}
	allocs, err := s.State().Allocs(nil)
	if err != nil {
		b.Fatal(err)
	}
	return len(evals) + len(allocs)
}

// BenchmarkGCBacklog: objects reaped per second by ForceGC on a backlog of
// -gcbench.objects terminal evals and allocs.
func BenchmarkGCBacklog(b *testing.B) {
	n := *gcBenchObjects
	var reaped int
	var took, cpu time.Duration
	var profile bytes.Buffer
	if *gcBenchProfile != "" {
		defer func() {
			if err := os.WriteFile(*gcBenchProfile, profile.Bytes(), 0o644); err != nil {
				b.Error(err)
			}
		}()
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := gcBenchServer(b, gcBenchPacing())
		seedStart := time.Now()
		seeded := seedGCBacklog(b, s, n)
		b.Logf("seeded %d objects in %v", seeded, time.Since(seedStart))
		// Force GC reaps what is older than sdk/gc.ForceThreshold, by the
		// times the leader stamped on the entries (all before now): let
		// the last one age past it.
		for seeded := time.Now(); time.Since(seeded) <= sdkgc.ForceThreshold; {
			runtime.Gosched()
		}
		if *gcBenchProfile != "" && i == 0 {
			if err := pprof.StartCPUProfile(&profile); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		start, cpu0 := time.Now(), processCPU(b)
		if err := s.ForceGC(context.Background()); err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
		cpu += processCPU(b) - cpu0
		b.StopTimer()
		if *gcBenchProfile != "" && i == 0 {
			pprof.StopCPUProfile()
		}
		if left := gcBacklogLeft(b, s); left != 0 {
			b.Fatalf("%d of %d objects left after ForceGC", left, seeded)
		}
		reaped += seeded
		_ = s.Shutdown()
	}
	benchTrace.write(b)
	b.ReportMetric(float64(reaped)/took.Seconds(), "objects/s")
	// The CPU the process spent per object reaped (every goroutine: the
	// engine, the plugin in process, Raft, the FSM, Go's collector): on a
	// shared machine objects/s follows the CPU the process is given, and
	// this does not.
	b.ReportMetric(float64(cpu.Microseconds())/float64(reaped), "cpu-us/object")
	b.ReportMetric(float64(n), "backlog")
}

// placeOne registers a one-alloc batch job and returns how long it took
// from the submission until its alloc is in state (a state watch, no
// polling). The client then reports the alloc complete, so that the node
// holds no more live allocs from one sample to the next.
func placeOne(b *testing.B, s *Server, node *structs.Node, id string) time.Duration {
	b.Helper()
	job := testJob(id, "batch")
	start := time.Now()
	if _, err := s.Jobs().Register(context.Background(), job, false, 0); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		ws := memdb.NewWatchSet()
		allocs, err := s.State().AllocsByJob(ws, structs.DefaultNamespace, id, true)
		if err != nil {
			b.Fatal(err)
		}
		if len(allocs) > 0 {
			d := time.Since(start)
			u := allocs[0].Copy()
			u.ClientStatus = structs.AllocClientStatusComplete
			if err := s.Nodes().UpdateAllocs(context.Background(), node.ID, node.SecretID, []*structs.Allocation{u}); err != nil {
				b.Fatal(err)
			}
			return d
		}
		if err := ws.WatchCtx(ctx); err != nil {
			evals, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, id)
			for _, e := range evals {
				b.Logf("eval %s: %s %s", e.ID, e.Status, e.StatusDescription)
			}
			b.Fatalf("job %s (%s) not placed: %v", id, jobStatus(s, id), err)
		}
	}
}

// percentile of sorted durations.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d)-1) * p)
	return d[i]
}

// gcLatencySamples is how many jobs the idle phase of the latency
// benchmark places, and how many the GC phase places on one node.
var gcLatencySamples = flag.Int("gcbench.samples", 2000, "GC latency benchmark: jobs placed with GC idle, and on each node with GC running")

// gcLatencyIdleFor, when set, runs the idle phase for that long instead of
// for -gcbench.samples jobs. A p99 is only comparable between windows of
// about the same length: scheduling's own garbage makes Go collect its
// heap every so often, and a short idle window (2,000 jobs at 50 a second
// is 40 s) sees none of those cycles where a GC phase of minutes sees
// several. For a large backlog, set it to about ForceGC's duration.
var gcLatencyIdleFor = flag.Duration("gcbench.idle", 0, "GC latency benchmark: how long the idle phase places jobs (0: -gcbench.samples jobs)")

// gcLatencyInterval is the arrival rate of the latency benchmark's jobs:
// one submitted every interval (or as soon as the previous one is placed,
// when that took longer). 0 submits back to back, the worst case for GC:
// scheduling is then never quiet and every GC step waits its MaxYield, so
// a large backlog takes hours to reap.
var gcLatencyInterval = flag.Duration("gcbench.interval", 20*time.Millisecond, "GC latency benchmark: time between job submissions in both phases (0: back to back)")

// arrivals paces the latency benchmark's submissions at
// gcLatencyInterval.
type arrivals struct {
	every time.Duration
	next  time.Time
}

func newArrivals() *arrivals { return &arrivals{every: *gcLatencyInterval, next: time.Now()} }

// wait returns when the next job is due.
func (a *arrivals) wait() {
	if a.every <= 0 {
		return
	}
	now := time.Now()
	if d := a.next.Sub(now); d > 0 {
		t := time.NewTimer(d)
		<-t.C
		now = a.next
	}
	a.next = now.Add(a.every)
}

// gcLatencyServer is a GC bench server with the backlog of objects seeded,
// then a Raft snapshot taken and Go's heap collected, so that neither
// phase pays for the seeding: the snapshot that the seeding's entries make
// due, and the garbage that they leave.
func gcLatencyServer(b *testing.B, pacing *gcengine.Pacing, objects int) *Server {
	b.Helper()
	b.StopTimer()
	s := gcBenchServer(b, pacing)
	seedGCBacklog(b, s, objects)
	if err := s.raft.Snapshot().Error(); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("backlog %d seeded: Go heap %d MB in use after a collection", objects, ms.HeapAlloc>>20)
	return s
}

// latencyNode registers a ready node, roomy enough for every sample.
func latencyNode(b *testing.B, s *Server, name string) *structs.Node {
	b.Helper()
	node := testNode(name)
	node.NodeResources.Cpu.CpuShares = 1 << 30
	node.NodeResources.Memory.MemoryMB = 1 << 30
	node.NodeResources.Disk.DiskMB = 1 << 40
	if _, err := s.Nodes().Register(context.Background(), node); err != nil {
		b.Fatal(err)
	}
	return node
}

// freshNode makes node ineligible and registers a new one named name in
// its place.
func freshNode(b *testing.B, s *Server, node *structs.Node, name string) *structs.Node {
	b.Helper()
	if _, err := s.Nodes().UpdateEligibility(context.Background(), node.ID, structs.NodeSchedulingIneligible); err != nil {
		b.Fatal(err)
	}
	return latencyNode(b, s, name)
}

// BenchmarkGCSchedulingLatency: the p50 and p99 of job submission →
// placement with GC idle, then while ForceGC reaps a backlog of
// -gcbench.objects terminal evals and allocs, and the ratio of the p99s.
//
// Both phases run on one server, one after the other, so that both see the
// same backlog in state (the GC phase sees less and less of it) and the
// same Go heap; the seeding's Raft snapshot and garbage are done with
// before either starts (gcLatencyServer). Jobs are submitted one at a
// time, each placed on the one eligible node before the next.
//
// Jobs arrive one every -gcbench.interval in both phases (20 ms: 50 jobs a
// second, a busy cluster), so that scheduling has quiet gaps for the GC
// to step in, as it does outside a load test; -gcbench.interval=0 submits
// back to back, which leaves the GC one step per MaxYield.
//
// The idle phase places -gcbench.samples jobs, or places jobs for
// -gcbench.idle. The GC phase places jobs
// from ForceGC's start until it returns, so that its samples cover the
// whole run (only samples taken entirely while it ran count). Placement
// slows as placed (terminal) allocs pile up on the node, so every
// -gcbench.samples placements go to a fresh node (the previous one is made
// ineligible), the idle phase's included: both phases place on nodes
// holding 0 to -gcbench.samples allocs.
func BenchmarkGCSchedulingLatency(b *testing.B) {
	gcSchedulingLatency(b, gcBenchPacing())
}

func gcSchedulingLatency(b *testing.B, pacing *gcengine.Pacing) {
	n := *gcBenchObjects
	m := max(1, *gcLatencySamples)
	var idle, busy []time.Duration
	var gcTook time.Duration
	// Go's own garbage collector, per phase: the reaping allocates (memdb
	// copies radix nodes on every delete), and each collection cycle slows
	// whatever runs meanwhile.
	var busyCycles, idleCycles uint32
	var busyTime, idleTime time.Duration
	var busyCPU, idleCPU cpuClasses
	for i := 0; i < b.N; i++ {
		s := gcLatencyServer(b, pacing, n)
		b.StartTimer()

		// GC idle.
		node := latencyNode(b, s, "idle")
		placeOne(b, s, node, "warm-idle")
		var idleRun []time.Duration
		c0, t0, u0 := numGC(), time.Now(), readCPUClasses()
		arrive := newArrivals()
		for k := 0; idleMore(k, m, t0); k++ {
			arrive.wait()
			if k > 0 && k%m == 0 {
				node = freshNode(b, s, node, fmt.Sprintf("idle-%d", k/m))
			}
			at := time.Now()
			d := placeOne(b, s, node, fmt.Sprintf("idle-%d", k))
			benchTrace.sample("idle", at, d)
			idleRun = append(idleRun, d)
		}
		idleCycles += numGC() - c0
		idleTime += time.Since(t0)
		idleCPU = idleCPU.add(readCPUClasses().sub(u0))
		if _, err := s.Nodes().UpdateEligibility(context.Background(), node.ID, structs.NodeSchedulingIneligible); err != nil {
			b.Fatal(err)
		}

		// GC running: submit until ForceGC returns, on a fresh node every
		// m placements.
		node = latencyNode(b, s, "busy-0")
		placeOne(b, s, node, "warm-busy")
		var running atomic.Bool
		running.Store(true)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			err := s.ForceGC(context.Background())
			running.Store(false)
			done <- err
		}()
		c0, t0, u0 = numGC(), time.Now(), readCPUClasses()
		arrive = newArrivals()
		for k := 0; running.Load(); k++ {
			arrive.wait()
			if k > 0 && k%m == 0 {
				node = freshNode(b, s, node, fmt.Sprintf("busy-%d", k/m))
			}
			at := time.Now()
			d := placeOne(b, s, node, fmt.Sprintf("busy-%d", k))
			if !running.Load() {
				break
			}
			benchTrace.sample("busy", at, d)
			busy = append(busy, d)
		}
		busyCycles += numGC() - c0
		busyTime += time.Since(t0)
		busyCPU = busyCPU.add(readCPUClasses().sub(u0))
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		gcTook += time.Since(start)
		b.StopTimer()
		idle = append(idle, idleRun...)
		// The placed jobs' allocs are not the backlog's: only it goes.
		allocs, err := s.State().Allocs(nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range allocs {
			if strings.HasPrefix(a.JobID, "backlog-") {
				b.Fatalf("backlog alloc %s left after ForceGC", a.ID)
			}
		}
		_ = s.Shutdown()
	}
	benchTrace.write(b)
	if len(busy) == 0 {
		b.Fatal("ForceGC finished before the first placement: no samples with GC running (raise -gcbench.objects)")
	}
	slices.Sort(idle)
	slices.Sort(busy)
	ip50, ip99 := percentile(idle, 0.50), percentile(idle, 0.99)
	bp50, bp99 := percentile(busy, 0.50), percentile(busy, 0.99)
	b.Logf("backlog %d: idle n=%d p50=%v p99=%v max=%v (%d Go GC cycles in %v); gc running n=%d p50=%v p99=%v max=%v (%d Go GC cycles in %v); ForceGC took %v",
		n, len(idle), ip50, ip99, idle[len(idle)-1], idleCycles, idleTime.Round(time.Millisecond), len(busy), bp50, bp99, busy[len(busy)-1], busyCycles,
		busyTime.Round(time.Millisecond), gcTook/time.Duration(b.N))
	b.Logf("CPU per second of each phase: idle %s; gc running %s", idleCPU.per(idleTime), busyCPU.per(busyTime))
	b.ReportMetric(float64(ip50.Microseconds())/1000, "idle-p50-ms")
	b.ReportMetric(float64(ip99.Microseconds())/1000, "idle-p99-ms")
	b.ReportMetric(float64(bp50.Microseconds())/1000, "gc-p50-ms")
	b.ReportMetric(float64(bp99.Microseconds())/1000, "gc-p99-ms")
	b.ReportMetric(float64(bp99)/float64(ip99), "p99-ratio")
	b.ReportMetric(float64(len(busy)), "gc-samples")
	b.ReportMetric(float64(idleCycles)/idleTime.Seconds(), "idle-gocycles/s")
	b.ReportMetric(float64(busyCycles)/busyTime.Seconds(), "gc-gocycles/s")
}

// idleMore says whether the idle phase, started at start, places its k-th
// job: k < m, or for -gcbench.idle when that is set.
func idleMore(k, m int, start time.Time) bool {
	if *gcLatencyIdleFor > 0 {
		return time.Since(start) < *gcLatencyIdleFor
	}
	return k < m
}

// cpuClasses is the process's CPU time by runtime/metrics class.
type cpuClasses struct{ gc, user, scavenge, idle float64 }

func readCPUClasses() cpuClasses {
	samples := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/user:cpu-seconds"},
		{Name: "/cpu/classes/scavenge/total:cpu-seconds"},
		{Name: "/cpu/classes/idle:cpu-seconds"},
	}
	metrics.Read(samples)
	f := func(i int) float64 {
		if samples[i].Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return samples[i].Value.Float64()
	}
	return cpuClasses{gc: f(0), user: f(1), scavenge: f(2), idle: f(3)}
}

func (c cpuClasses) sub(o cpuClasses) cpuClasses {
	return cpuClasses{c.gc - o.gc, c.user - o.user, c.scavenge - o.scavenge, c.idle - o.idle}
}

func (c cpuClasses) add(o cpuClasses) cpuClasses {
	return cpuClasses{c.gc + o.gc, c.user + o.user, c.scavenge + o.scavenge, c.idle + o.idle}
}

// per formats the CPU seconds spent per second of d, by class.
func (c cpuClasses) per(d time.Duration) string {
	s := d.Seconds()
	if s <= 0 {
		return "-"
	}
	return fmt.Sprintf("go-gc %.3f, user %.3f, scavenge %.3f, idle %.3f", c.gc/s, c.user/s, c.scavenge/s, c.idle/s)
}

// procStart approximates the process's start, the origin of gctrace's
// times.
var procStart = time.Now()

// traceLog keeps what -gcbench.trace writes; the nil log keeps nothing.
type traceLog struct {
	mu    sync.Mutex
	lines []string
}

var benchTrace = &traceLog{}

func sinceStart(t time.Time) float64 { return float64(t.Sub(procStart).Microseconds()) / 1000 }

func (l *traceLog) add(format string, args ...any) {
	if *gcBenchTrace == "" {
		return
	}
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *traceLog) step(step string, start time.Time, d time.Duration) {
	l.add("step %s %.3f %d", step, sinceStart(start), d.Microseconds())
}

func (l *traceLog) sample(phase string, start time.Time, d time.Duration) {
	l.add("sample %s %.3f %d", phase, sinceStart(start), d.Microseconds())
}

func (l *traceLog) write(b *testing.B) {
	if *gcBenchTrace == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.WriteFile(*gcBenchTrace, []byte(strings.Join(l.lines, "\n")+"\n"), 0o644); err != nil {
		b.Error(err)
	}
}

// processCPU is the process's user plus system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// numGC is the number of Go garbage collection cycles completed so far.
func numGC() uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.NumGC
}

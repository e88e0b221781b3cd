package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/testwait"
)

// The dispatch benchmark drives the real `drover agent -dev` binary over
// its HTTP API only, so that the same file measures any commit of the
// tree: copy it into an older worktree's bench/ and run it there.

const (
	dispatch16Count = 200
	dispatchClients = 16
	dispatchJobHCL  = `
job "disp" {
  type        = "sysbatch"
  datacenters = ["*"]
  parameterized {}
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`
)

// buildDrover builds cmd/drover of the module the benchmark runs in.
func buildDrover(b *testing.B) string {
	b.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		b.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(b.TempDir(), "drover")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/drover")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build drover: %v\n%s", err, out)
	}
	return bin
}

// devProcess is a `drover agent -dev` child process and its HTTP address.
type devProcess struct {
	cmd  *exec.Cmd
	addr string
	http *http.Client
}

func startDevProcess(b *testing.B, bin string) *devProcess {
	b.Helper()
	httpPort, rpcPort := freePort(b), freePort(b)
	cmd := exec.Command(bin, "agent", "-dev", "-log-level", "warn",
		"-http-port", strconv.Itoa(httpPort), "-rpc-port", strconv.Itoa(rpcPort))
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	d := &devProcess{cmd: cmd, addr: fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: dispatchClients * 2}}}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return d
}

// call sends a JSON request and decodes a JSON answer into out (if set).
func (d *devProcess) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		buf, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, d.addr+path, body)
	if err != nil {
		return err
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// waitRawExecNode waits until the agent's node is ready with a healthy
// raw_exec driver.
func (d *devProcess) waitRawExecNode(b *testing.B) {
	b.Helper()
	testwait.Every(b, 60*time.Second, 50*time.Millisecond, "a ready node with a healthy raw_exec driver", func() bool {
		var nodes []struct{ ID, Status string }
		if err := d.call("GET", "/v1/nodes", nil, &nodes); err != nil {
			return false
		}
		for _, n := range nodes {
			var node struct {
				Status  string
				Drivers map[string]struct{ Healthy bool }
			}
			if n.Status == "ready" && d.call("GET", "/v1/node/"+n.ID, nil, &node) == nil && node.Drivers["raw_exec"].Healthy {
				return true
			}
		}
		return false
	})
}

// deadChildren is the parent job's count of dead (finished) dispatched
// children.
func (d *devProcess) deadChildren(job string) (int, error) {
	var s struct {
		Children *struct{ Pending, Running, Dead int }
	}
	if err := d.call("GET", "/v1/job/"+job+"/summary", nil, &s); err != nil {
		return 0, err
	}
	if s.Children == nil {
		return 0, nil
	}
	return s.Children.Dead, nil
}

// adoptOrphans makes this process the reaper of its orphaned descendants
// (PR_SET_CHILD_SUBREAPER), so that a process the agent's tree detaches
// (a double fork, a parent that exits first) is still counted by treeCPU
// rather than lost to init. It returns the undo, which also reaps the
// orphans left as zombies.
func adoptOrphans(b *testing.B) func() {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		b.Fatalf("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	return func() {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		reapOrphans(0)
	}
}

// reapOrphans waits for every exited child of this process but keep (the
// agent, which its exec.Cmd waits for).
func reapOrphans(keep int) {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == keep {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(raw, ')')
		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 2 || f[0] != "Z" || f[1] != strconv.Itoa(self) {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(p, &ws, unix.WNOHANG, nil)
	}
}

// procLabel names a process by its command line's first words, for the
// per-process breakdown.
func procLabel(p int) string {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if len(args) > 3 {
		args = args[:3]
	}
	if len(args) > 0 {
		args[0] = filepath.Base(args[0])
	}
	return strings.Join(args, " ")
}

// treeCPU is the CPU time used so far by pid and every live descendant,
// with the children each has reaped (cutime, cstime): the /bin/true tasks,
// reaped by the task supervisor, and exited plugins count too. Orphans
// adopted by this process (see adoptOrphans), zombies included, count as
// the agent's: nothing else here forks during a measured round.
// It returns each counted process's share too, by procLabel.
func treeCPU(pid int, self int, skip int) (time.Duration, map[string]time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	type stat struct {
		ppid  int
		ticks int64
	}
	procs := map[int]stat{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// The command name is in parentheses and may hold spaces: the
		// fields start after its last ')'.
		i := bytes.LastIndexByte(raw, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(raw[i+1:]))
		// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		var ticks int64
		for _, k := range f[11:15] {
			n, _ := strconv.ParseInt(k, 10, 64)
			ticks += n
		}
		procs[p] = stat{ppid: ppid, ticks: ticks}
	}
	if _, ok := procs[pid]; !ok {
		return 0, nil, fmt.Errorf("process %d is gone", pid)
	}
	var total int64
	by := map[string]time.Duration{}
	for p, s := range procs {
		for q := p; q > 1; q = procs[q].ppid {
			if q == skip {
				break
			}
			if q == pid || procs[q].ppid == self {
				total += s.ticks
				by[procLabel(p)] += time.Duration(s.ticks) * 10 * time.Millisecond
				break
			}
			if _, ok := procs[q]; !ok {
				break
			}
		}
	}
	// USER_HZ is 100 on every Linux the project builds for.
	return time.Duration(total) * 10 * time.Millisecond, by, nil
}

// treePids lists pid and its live descendants.
func treePids(pid int) []string {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(raw, ')')
		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 2 {
			continue
		}
		parent[p], _ = strconv.Atoi(f[1])
	}
	var out []string
	for p := range parent {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, strconv.Itoa(p))
				break
			}
		}
	}
	return out
}

// perfRecorder runs `perf record` on the agent's process tree (the agent,
// its plugins and the task supervisor started in the warm-up round, and
// what they start from now on) while DROVER_BENCH_PERF names an output
// file, for profiling the measured section.
func perfRecorder(b *testing.B, pid int, perfPid *int) func() {
	out := os.Getenv("DROVER_BENCH_PERF")
	if out == "" {
		return func() {}
	}
	cmd := exec.Command("perf", "record", "-F", "499", "-g", "--inherit", "-o", out, "-p", strings.Join(treePids(pid), ","))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		b.Fatalf("perf: %v", err)
	}
	*perfPid = cmd.Process.Pid
	return func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	}
}

// BenchmarkDispatch16Clients measures the load: 200 dispatches of
// a parameterized sysbatch job running /bin/true under raw_exec, sent by
// 16 concurrent HTTP clients to a `drover agent -dev` process, from the
// first dispatch until every dispatched child is dead. It reports the
// allocations completed per second and the CPU the agent's whole process
// tree (agent, plugins, task supervisor, tasks) spent per allocation.
func BenchmarkDispatch16Clients(b *testing.B) {
	bin := buildDrover(b)
	// Registered first, undone last: after the agent has stopped.
	b.Cleanup(adoptOrphans(b))
	d := startDevProcess(b, bin)
	self, agentPid := os.Getpid(), d.cmd.Process.Pid
	perfPid := 0
	d.waitRawExecNode(b)
	var parsed json.RawMessage
	if err := d.call("POST", "/v1/jobs/parse", map[string]any{"JobHCL": dispatchJobHCL, "Canonicalize": true}, &parsed); err != nil {
		b.Fatal(err)
	}
	if err := d.call("POST", "/v1/jobs", map[string]any{"Job": parsed}, nil); err != nil {
		b.Fatal(err)
	}
	dead := 0
	round := func(n int) (time.Duration, time.Duration) {
		reapOrphans(agentPid)
		cpu0, by0, err := treeCPU(agentPid, self, perfPid)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var left atomic.Int64
		left.Store(int64(n))
		var wg sync.WaitGroup
		errs := make(chan error, dispatchClients)
		for c := 0; c < dispatchClients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					if err := d.call("PUT", "/v1/job/disp/dispatch", map[string]any{"Meta": map[string]string{}}, nil); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		want := dead + n
		// Polled every 20 ms: more often would weigh on the agent's CPU
		// that is measured.
		testwait.Every(b, 5*time.Minute, 20*time.Millisecond, fmt.Sprintf("%d dispatched jobs dead", n), func() bool {
			got, err := d.deadChildren("disp")
			if err != nil {
				b.Fatal(err)
			}
			if got >= want {
				dead = got
				return true
			}
			return false
		})
		elapsed := time.Since(start)
		cpu1, by1, err := treeCPU(agentPid, self, perfPid)
		if err != nil {
			b.Fatal(err)
		}
		if os.Getenv("DROVER_BENCH_TREE") != "" {
			for l, c := range by1 {
				if c -= by0[l]; c > 0 {
					fmt.Printf("  %-50s %6.2f ms/alloc\n", l, float64(c.Microseconds())/1000/float64(n))
				}
			}
		}
		return elapsed, cpu1 - cpu0
	}
	round(dispatchClients) // warm up: the supervisor, connections, caches
	stopPerf := perfRecorder(b, agentPid, &perfPid)
	b.ResetTimer()
	var elapsed, cpu time.Duration
	for i := 0; i < b.N; i++ {
		e, c := round(dispatch16Count)
		elapsed += e
		cpu += c
	}
	b.StopTimer()
	stopPerf()
	allocs := float64(b.N * dispatch16Count)
	var stubs []struct{ JobID, ClientStatus string }
	if err := d.call("GET", "/v1/allocations", nil, &stubs); err != nil {
		b.Fatal(err)
	}
	complete := 0
	for _, a := range stubs {
		if strings.HasPrefix(a.JobID, "disp/dispatch-") && a.ClientStatus == "complete" {
			complete++
		}
	}
	if complete < int(allocs) {
		b.Fatalf("%d dispatched allocs complete, want at least %.0f", complete, allocs)
	}
	b.ReportMetric(allocs/elapsed.Seconds(), "allocs/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/allocs, "cpu-ms/alloc")
}

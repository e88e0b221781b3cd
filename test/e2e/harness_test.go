package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Deadlines are generous: the machine is small and shared, and a deadline
// only bounds a failure, never slows a pass.
const (
	agentReadyTimeout = 60 * time.Second
	agentExitTimeout  = 45 * time.Second
	// leftoverTimeout is how long processes may take to go away after the
	// agent exited (a shim writes its exit file after its task dies).
	leftoverTimeout = 15 * time.Second
	waitTimeout     = 60 * time.Second
	cliTimeout      = 2 * time.Minute
)

// testAgent is one `drover agent -dev` process and what the test needs to
// reach it and clean up after it.
type testAgent struct {
	t       *testing.T
	Addr    string // host:port of the HTTP API
	DataDir string
	logPath string

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been waited for
	http   *http.Client

	interruptOnce    sync.Once
	left             []proc // what interrupt found still running
	graceful         bool   // the agent exited by itself after SIGINT
	leftoversChecked bool   // the test asserted on left itself
	stopOnce         sync.Once
}

// startAgent starts a dev agent on free ports with a data dir of its own and
// waits until its node is ready. Cleanup stops it (SIGINT, then SIGKILL),
// removes every process it left, and prints its log if the test failed.
func startAgent(t *testing.T) *testAgent {
	t.Helper()
	dataDir := t.TempDir()
	logDir := t.TempDir()
	for attempt := 1; ; attempt++ {
		a := launchAgent(t, dataDir, filepath.Join(logDir, fmt.Sprintf("agent-%d.log", attempt)))
		err := a.waitReady()
		if err == nil {
			return a
		}
		// Free ports are found by listening and closing, so another
		// process can take one in between: retry on that alone.
		portTaken := strings.Contains(a.log(), "address already in use")
		a.stop()
		if portTaken && attempt < 3 {
			t.Logf("agent attempt %d: port taken; retrying", attempt)
			continue
		}
		t.Fatalf("agent did not become ready: %v\n--- agent log ---\n%s", err, a.log())
	}
}

func launchAgent(t *testing.T, dataDir, logPath string) *testAgent {
	t.Helper()
	ports := freePorts(t, 2)
	a := &testAgent{
		t:       t,
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		DataDir: dataDir,
		logPath: logPath,
		exited:  make(chan struct{}),
		http:    &http.Client{Transport: &http.Transport{}, Timeout: cliTimeout},
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	a.cmd = exec.Command(droverBin, "agent", "-dev",
		"-http-port", strconv.Itoa(ports[0]), "-rpc-port", strconv.Itoa(ports[1]),
		"-data-dir", dataDir, "-log-level", "debug")
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	// If the test binary dies (a panic, a timeout), the agent dies too
	// instead of holding its ports and tasks.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start agent: %v", err)
	}
	go func() {
		_ = a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(a.stop)
	return a
}

// freePorts reserves n distinct free TCP ports on the loopback address.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// PID is the agent process's pid.
func (a *testAgent) PID() int { return a.cmd.Process.Pid }

// waitReady waits until GET /v1/nodes lists a ready node whose raw_exec
// driver is healthy, or the agent exits, or the deadline passes.
func (a *testAgent) waitReady() error {
	deadline := time.Now().Add(agentReadyTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		var nodes []nodeStub
		status, err := a.do(http.MethodGet, "/v1/nodes", nil, &nodes)
		switch {
		case err != nil:
			last = err.Error()
		case status != http.StatusOK:
			last = fmt.Sprintf("status %d", status)
		default:
			for _, n := range nodes {
				if n.Status == "ready" && n.Drivers["raw_exec"].Healthy {
					return nil
				}
			}
			last = fmt.Sprintf("nodes: %+v", nodes)
		}
		select {
		case <-a.exited:
			return fmt.Errorf("agent exited (%v) before it was ready", a.cmd.ProcessState)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s; last: %s", agentReadyTimeout, last)
		}
	}
}

// NodeID is the ID of the agent's (only) node.
func (a *testAgent) NodeID() string {
	a.t.Helper()
	var nodes []nodeStub
	a.mustGet("/v1/nodes", &nodes)
	if len(nodes) != 1 {
		a.t.Fatalf("want one node, got %+v", nodes)
	}
	return nodes[0].ID
}

func (a *testAgent) log() string {
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read agent log: %v)", err)
	}
	return string(b)
}

// interrupt ends the agent as a user would (Ctrl-C) and returns what it
// left running: its plugins, shims and tasks that are still alive
// leftoverTimeout after it exited. graceful is false when the agent had
// already died or had to be killed. Later calls return the first result.
func (a *testAgent) interrupt() (left []proc, graceful bool) {
	a.interruptOnce.Do(func() {
		t := a.t
		// Taken before the signal: once the agent is gone, its plugins
		// and shims are orphans that no longer point back to it.
		tracked := descendants(a.PID())
		a.graceful = true
		select {
		case <-a.exited:
			a.graceful = false // it died on its own; the test reports that
		default:
			_ = a.cmd.Process.Signal(os.Interrupt)
			select {
			case <-a.exited:
				if !a.cmd.ProcessState.Success() {
					t.Errorf("agent exited with %v after SIGINT", a.cmd.ProcessState)
				}
			case <-time.After(agentExitTimeout):
				t.Errorf("agent still running %s after SIGINT; killing it", agentExitTimeout)
				_ = a.cmd.Process.Kill()
				<-a.exited
				a.graceful = false
			}
		}
		a.left = a.leftovers(tracked)
	})
	return a.left, a.graceful
}

// stop is the cleanup: interrupt, then kill whatever is left. A dev agent
// stops its tasks when it shuts down, so after a graceful exit anything
// left behind is reported as a bug (unless the test already checked).
func (a *testAgent) stop() {
	a.stopOnce.Do(func() {
		t := a.t
		defer a.http.CloseIdleConnections()
		checked := a.leftoversChecked
		left, graceful := a.interrupt()
		if len(left) > 0 {
			if graceful && !checked {
				t.Errorf("processes still running %s after the agent's shutdown: %v", leftoverTimeout, left)
			}
			killAll(left)
			if still := a.leftovers(left); len(still) > 0 {
				t.Errorf("could not kill %v", still)
			}
		}
		if t.Failed() {
			t.Logf("--- agent log (%s) ---\n%s", a.Addr, a.log())
		}
	})
}

// leftovers waits up to leftoverTimeout for tracked processes and every
// process under the data dir to end, and returns those that did not.
func (a *testAgent) leftovers(tracked []proc) []proc {
	deadline := time.Now().Add(leftoverTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		left := stillAlive(tracked)
		for _, p := range procsUnder(a.DataDir) {
			if !containsPID(left, p.PID) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		<-tick.C
	}
}

func containsPID(ps []proc, pid int) bool {
	for _, p := range ps {
		if p.PID == pid {
			return true
		}
	}
	return false
}

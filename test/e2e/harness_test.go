package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// Deadlines are generous: the machine is small and shared, and a deadline
// only bounds a failure, never slows a pass.
const (
	agentReadyTimeout = 60 * time.Second
	agentExitTimeout  = 45 * time.Second
	// leftoverTimeout is how long processes may take to go away after the
	// agent exited (a shim writes its exit file after its task dies).
	leftoverTimeout = 15 * time.Second
	waitTimeout     = harness.WaitTimeout
)

// testAgent is one `drover agent -dev` process and what the test needs to
// reach it and clean up after it.
type testAgent struct {
	*harness.API
	t       *testing.T
	DataDir string
	proc    *harness.Process

	interruptOnce    sync.Once
	left             []harness.Proc // what interrupt found still running
	graceful         bool           // the agent exited by itself after SIGINT
	leftoversChecked bool           // the test asserted on left itself
	stopOnce         sync.Once
}

// startAgent starts a dev agent on free ports with a data dir of its own and
// waits until its node is ready. Cleanup stops it (SIGINT, then SIGKILL),
// removes every process it left, and prints its log if the test failed.
// extra are more `drover agent` arguments (say -config).
func startAgent(t *testing.T, extra ...string) *testAgent {
	t.Helper()
	dataDir := t.TempDir()
	logDir := t.TempDir()
	for attempt := 1; ; attempt++ {
		a := launchAgent(t, dataDir, filepath.Join(logDir, fmt.Sprintf("agent-%d.log", attempt)), extra...)
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

func launchAgent(t *testing.T, dataDir, logPath string, extra ...string) *testAgent {
	t.Helper()
	ports := harness.FreePorts(t, 2)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	a := &testAgent{API: harness.NewAPI(t, addr, droverBin, repoRoot), t: t, DataDir: dataDir}
	proc, err := harness.Start(droverBin, append([]string{"agent", "-dev",
		"-http-port", strconv.Itoa(ports[0]), "-rpc-port", strconv.Itoa(ports[1]),
		"-data-dir", dataDir, "-log-level", "debug"}, extra...), logPath)
	if err != nil {
		t.Fatalf("start agent: %v", err)
	}
	a.proc = proc
	// The agent's port stays closed once it exited: no retries then.
	a.Alive = proc.Running
	t.Cleanup(a.stop)
	return a
}

// PID is the agent process's pid.
func (a *testAgent) PID() int { return a.proc.PID() }

// waitReady waits until GET /v1/nodes lists a ready node whose raw_exec
// driver is healthy, or the agent exits, or the deadline passes.
func (a *testAgent) waitReady() error {
	deadline := time.Now().Add(agentReadyTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		var nodes []nodeStub
		status, err := a.Do(http.MethodGet, "/v1/nodes", nil, &nodes)
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
		case <-a.proc.Exited():
			return fmt.Errorf("agent exited (%v) before it was ready", a.proc.Cmd.ProcessState)
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
	a.MustGet("/v1/nodes", &nodes)
	if len(nodes) != 1 {
		a.t.Fatalf("want one node, got %+v", nodes)
	}
	return nodes[0].ID
}

func (a *testAgent) log() string { return a.proc.Log() }

// interrupt ends the agent as a user would (Ctrl-C) and returns what it
// left running: its plugins, shims and tasks that are still alive
// leftoverTimeout after it exited. graceful is false when the agent had
// already died or had to be killed. Later calls return the first result.
func (a *testAgent) interrupt() (left []harness.Proc, graceful bool) {
	a.interruptOnce.Do(func() {
		// Taken before the signal: once the agent is gone, its plugins
		// and shims are orphans that no longer point back to it.
		tracked := harness.Descendants(a.PID())
		if a.proc.Running() {
			var err error
			if a.graceful, err = a.proc.Stop(os.Interrupt, agentExitTimeout); err != nil {
				a.t.Errorf("agent shutdown: %v", err)
			}
		}
		// else it died on its own; the test reports that.
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
		defer a.HTTP.CloseIdleConnections()
		checked := a.leftoversChecked
		left, graceful := a.interrupt()
		if len(left) > 0 {
			if graceful && !checked {
				t.Errorf("processes still running %s after the agent's shutdown: %v", leftoverTimeout, left)
			}
			harness.KillAll(left)
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
func (a *testAgent) leftovers(tracked []harness.Proc) []harness.Proc {
	deadline := time.Now().Add(leftoverTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		left := harness.StillAlive(tracked)
		for _, p := range harness.ProcsUnder(a.DataDir, droverBin) {
			if !harness.ContainsPID(left, p.PID) {
				left = append(left, p)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		<-tick.C
	}
}

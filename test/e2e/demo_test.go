package e2e

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// demoTimeout bounds one run of scripts/demo.sh (make demo).
const demoTimeout = 5 * time.Minute

// runDemo runs scripts/demo.sh with the suite's binary against addr.
func runDemo(t *testing.T, addr string) (out string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "scripts", "demo.sh"))
	cmd.Env = append(os.Environ(), "DROVER="+droverBin, "DROVER_ADDR=http://"+addr, "DEMO_TIMEOUT=120")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("demo did not end within %s:\n%s", demoTimeout, buf.String())
	}
	if exit, ok := err.(*exec.ExitError); ok {
		return buf.String(), exit.ExitCode()
	} else if err != nil {
		t.Fatalf("demo: %v", err)
	}
	return buf.String(), 0
}

// The demo's own agent cannot start because something else holds its port,
// here a stand-in for another agent that says its node is ready. The demo
// must stop with the agent's error and send that other listener nothing
// but reads: no job may be run against an agent the demo did not start.
func TestDemoStopsWhenItsAgentCannotStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var writes []string
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			mu.Lock()
			writes = append(writes, r.Method+" "+r.URL.Path)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/nodes" {
			_, _ = w.Write([]byte(`[{"ID":"0ther","Name":"other","Datacenter":"dc1","Status":"ready","SchedulingEligibility":"eligible"}]`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = other.Serve(ln)
	}()
	defer func() {
		_ = other.Close()
		<-served
	}()

	out, code := runDemo(t, ln.Addr().String())
	if code == 0 {
		t.Errorf("make demo exited 0 while its agent could not listen on %s:\n%s", ln.Addr(), out)
	}
	if !strings.Contains(out, "address already in use") {
		t.Errorf("make demo did not print its agent's error (address already in use):\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(writes) > 0 {
		t.Errorf("make demo sent %v to the other listener on %s; it must not use an agent it did not start:\n%s", writes, ln.Addr(), out)
	}
}

// The demo end to end on a free port: its agent starts, every example job
// runs, and it exits 0 having stopped its agent.
func TestDemoRuns(t *testing.T) {
	port := harness.FreePorts(t, 1)[0]
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	out, code := runDemo(t, addr)
	if code != 0 || !strings.Contains(out, "Demo finished") {
		t.Fatalf("make demo on %s: exit %d:\n%s", addr, code, out)
	}
	for _, want := range []string{"hello-sysbatch", "Dispatched Job ID", "drover job stop -purge sleeper"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	if left := harness.ProcsOf(droverBin); len(left) > 0 {
		// The agent's cleanup waits for it; what runs now is another
		// test's, unless it names the demo's port.
		for _, p := range left {
			if strings.Contains(p.Cmd, "-http-port "+strconv.Itoa(port)) {
				t.Errorf("the demo left its agent running: %v", p)
			}
		}
	}
}

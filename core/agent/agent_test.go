package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/plugins/builtin"
	execdriver "github.com/drover-org/drover/plugins/driver-exec"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

// testPluginEnv marks the test binary's re-executions as plugins.
const testPluginEnv = "DROVER_AGENT_TEST_PLUGIN"

// TestMain lets the test binary stand in for the drover binary: the agent
// re-executes SelfExe (this binary) as `<exe> __plugin <name>` with
// testPluginEnv in the environment, and the raw_exec driver re-executes the
// plugin's command line as its task shim, with rawexec.ShimEnvVar set but
// without the plugin's environment. Either way, serve the plugin (or shim)
// instead of running the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == pluginhost.ServeCommand && (os.Getenv(testPluginEnv) != "" || os.Getenv(rawexec.ShimEnvVar) != "" ||
		os.Getenv(execdriver.InitEnvVar) != "") { // an exec task's init: started by raw_exec's supervisor too
		if serve, ok := testPlugins[os.Args[2]]; ok {
			serve()
			os.Exit(0)
		}
		p, ok := builtin.Lookup(os.Args[2])
		if !ok {
			fmt.Fprintf(os.Stderr, "no built-in plugin %q\n", os.Args[2])
			os.Exit(1)
		}
		p.Serve()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const testTimeout = 60 * time.Second

// lockedBuffer collects the agent's log; plugins log from their own
// goroutines while the test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testAPI is a small client of the agent's HTTP API.
type testAPI struct {
	t    *testing.T
	base string
	http *http.Client
}

// call sends a request and returns the status, the body and X-Nomad-Index.
func (c *testAPI) call(ctx context.Context, method, path string, in any) (int, []byte, uint64) {
	c.t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			c.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	index, _ := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	return resp.StatusCode, b, index
}

// get reads path into out, failing the test unless the answer is 200, and
// returns the index.
func (c *testAPI) get(path string, out any) uint64 {
	c.t.Helper()
	status, body, index := c.call(context.Background(), http.MethodGet, path, nil)
	if status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			c.t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	}
	return index
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", testTimeout, what, last)
		}
		<-tick.C
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type allocStub struct {
	ID, JobID, ClientStatus string
}

// The dev agent, in process, with its built-in plugins out of process (this
// test binary re-executed): a node becomes ready, the example sysbatch job
// runs to completion, blocking queries wake on changes, the task's log is
// served, and Shutdown leaves neither goroutines (TestMain checks) nor
// processes behind.
func TestDevAgentRunsSysbatchJob(t *testing.T) {
	testtier.Agent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.HTTP = ln.Addr().(*net.TCPAddr).Port
	cfg.Ports.RPC = freePort(t)
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "agent", Level: hclog.Debug, Output: logs})
	a, err := New(cfg, Options{
		Logger:       logger,
		HTTPListener: ln,
		PluginEnv:    []string{testPluginEnv + "=1"},
		SelfExe:      os.Args[0],
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var shutdownOnce sync.Once
	shutdown := func() { shutdownOnce.Do(a.Shutdown) }
	t.Cleanup(func() {
		shutdown()
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", logs)
		}
	})
	if a.HTTPAddr() != ln.Addr().String() {
		t.Errorf("HTTPAddr = %s; want the listener's %s", a.HTTPAddr(), ln.Addr())
	}
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	api := &testAPI{t: t, base: "http://" + a.HTTPAddr(), http: &http.Client{Transport: transport, Timeout: testTimeout}}

	waitFor(t, "a ready node", func() (bool, string) {
		var nodes []struct{ ID, Status string }
		api.get("/v1/nodes", &nodes)
		return len(nodes) == 1 && nodes[0].Status == "ready", fmt.Sprintf("%+v", nodes)
	})

	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "jobs", "sysbatch.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	status, jobJSON, _ := api.call(context.Background(), http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": string(src)})
	if status != http.StatusOK {
		t.Fatalf("parse: %d %s", status, jobJSON)
	}
	const jobID = "hello-sysbatch"
	allocsPath := "/v1/job/" + jobID + "/allocations"

	// A blocking query at the current index waits out its wait when
	// nothing changes: nothing can, no job being registered yet. An empty
	// table answers index 0, as Nomad's, and ?index=0 does not block, so
	// the query then waits at index 1.
	var none []allocStub
	before := api.get(allocsPath, &none)
	waitIdx := max(before, 1)
	start := time.Now()
	status, body, index := api.call(context.Background(), http.MethodGet, allocsPath+"?index="+strconv.FormatUint(waitIdx, 10)+"&wait=300ms", nil)
	if waited := time.Since(start); status != http.StatusOK || index != before || waited < 300*time.Millisecond {
		t.Errorf("idle blocking query: status %d, index %d (was %d), returned after %s; want 200, same index, ≥300ms: %s",
			status, index, before, waited, body)
	}

	// The same query, sent before the job is registered, returns when the
	// job's allocation appears, well before its wait.
	type blockResult struct {
		status int
		body   []byte
		index  uint64
		took   time.Duration
	}
	sent := make(chan struct{})
	var sentOnce sync.Once // a retried request is written again
	done := make(chan blockResult, 1)
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { sentOnce.Do(func() { close(sent) }) },
	})
	go func() {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.base+allocsPath+"?index="+strconv.FormatUint(waitIdx, 10)+"&wait=5s", nil)
		resp, err := api.http.Do(req)
		if err != nil {
			done <- blockResult{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		idx, _ := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
		done <- blockResult{resp.StatusCode, b, idx, time.Since(start)}
	}()
	select {
	case <-sent:
	case r := <-done:
		t.Fatalf("blocking query ended before the job was registered: %d %s", r.status, r.body)
	}

	var reg struct{ EvalID string }
	status, body, _ = api.call(context.Background(), http.MethodPut, "/v1/jobs", map[string]any{"Job": json.RawMessage(jobJSON)})
	if status != http.StatusOK {
		t.Fatalf("register: %d %s", status, body)
	}
	if err := json.Unmarshal(body, &reg); err != nil || reg.EvalID == "" {
		t.Fatalf("register answer %s: %v", body, err)
	}

	var r blockResult
	select {
	case r = <-done:
	case <-time.After(testTimeout):
		t.Fatal("blocking query did not return")
	}
	var woke []allocStub
	if r.status != http.StatusOK || json.Unmarshal(r.body, &woke) != nil {
		t.Fatalf("blocking query: %d %s", r.status, r.body)
	}
	if r.index <= waitIdx || len(woke) != 1 || woke[0].JobID != jobID || r.took >= 5*time.Second {
		t.Errorf("blocking query returned index %d (was %d) after %s with %+v; want a higher index and the job's alloc before the wait",
			r.index, before, r.took, woke)
	}

	var alloc allocStub
	waitFor(t, "the job dead with a complete alloc", func() (bool, string) {
		var job struct{ Status string }
		api.get("/v1/job/"+jobID, &job)
		var allocs []allocStub
		api.get(allocsPath, &allocs)
		if job.Status != "dead" || len(allocs) != 1 || allocs[0].ClientStatus != "complete" {
			return false, fmt.Sprintf("job %s, allocs %+v", job.Status, allocs)
		}
		alloc = allocs[0]
		return true, ""
	})
	var eval struct{ Status string }
	if api.get("/v1/evaluation/"+reg.EvalID, &eval); eval.Status != "complete" {
		t.Errorf("eval %s is %s; want complete", reg.EvalID, eval.Status)
	}

	status, body, _ = api.call(context.Background(), http.MethodGet,
		"/v1/client/fs/logs/"+alloc.ID+"?task=hello&type=stdout&plain=true", nil)
	if status != http.StatusOK || !strings.Contains(string(body), "hello from hello-sysbatch.hello[0]") {
		t.Errorf("task log: %d %q", status, body)
	}

	transport.CloseIdleConnections()
	shutdown()
	// The plugins are this binary's children; Shutdown must have ended and
	// reaped them.
	if kids := childProcesses(t); len(kids) > 0 {
		t.Errorf("child processes left after Shutdown: %v", kids)
	}
}

// childProcesses lists this process's live children (zombies included:
// an unreaped child is a leak too).
func childProcesses(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		end := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[end+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(self) {
			out = append(out, fmt.Sprintf("%d %s", pid, stat[:end+1]))
		}
	}
	return out
}

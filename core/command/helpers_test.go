package command

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"go.uber.org/goleak"
)

// testMain is the TestMain of every command test package: cmds is the
// command table runCLI dispatches over.
func testMain(m *testing.M, cmds func(*UI) map[string]Command) {
	testCommands = cmds
	// Timestamps print in local time; pin it so that expectations hold on
	// any machine. Set before any test goroutine starts.
	time.Local = time.UTC
	goleak.VerifyTestMain(m)
}

// testCommands is the command table of the package under test.
var testCommands func(*UI) map[string]Command

// testNow is the clock of every command test.
var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// recorded is one request the fake agent received.
type recorded struct {
	Method, Path, Query, Token string
	Body                       []byte
}

// fakeAgent serves canned answers keyed by "METHOD /escaped/path".
type fakeAgent struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string]http.HandlerFunc
	reqs   []recorded
}

func newFakeAgent(t *testing.T) *fakeAgent {
	t.Helper()
	f := &fakeAgent{t: t, routes: map[string]http.HandlerFunc{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Method + " " + r.URL.EscapedPath()
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Token: r.Header.Get("X-Nomad-Token"), Body: body})
	h := f.routes[key]
	f.mu.Unlock()
	if h == nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("not found"))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h(w, r)
}

// json answers key with v as JSON (and an index header).
func (f *fakeAgent) json(key string, v any) {
	f.handle(key, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Nomad-Index", "7")
		_ = json.NewEncoder(w).Encode(v)
	})
}

func (f *fakeAgent) handle(key string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[key] = h
}

// fail answers key with a status and a plain-text message.
func (f *fakeAgent) fail(key string, code int, msg string) {
	f.handle(key, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(msg))
	})
}

// request returns the last request to key, failing when there was none.
func (f *fakeAgent) request(key string) recorded {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.reqs) - 1; i >= 0; i-- {
		if f.reqs[i].Method+" "+f.reqs[i].Path == key {
			return f.reqs[i]
		}
	}
	f.t.Fatalf("no request %s; got %v", key, f.reqs)
	return recorded{}
}

// result is what a command run produced.
type result struct {
	code        int
	out, errOut string
}

// run runs the CLI against the fake agent (reached through DROVER_ADDR).
func (f *fakeAgent) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runCLI(t, map[string]string{"DROVER_ADDR": f.srv.URL}, stdin, nil, args...)
}

func runCLI(t *testing.T, env map[string]string, stdin string, extra map[string]Command, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	ui := &UI{
		Out: &out, Err: &errOut, In: strings.NewReader(stdin),
		Getenv: func(k string) string { return env[k] },
		Environ: func() []string {
			var out []string
			for k, v := range env {
				out = append(out, k+"="+v)
			}
			return out
		},
		Now: func() time.Time { return testNow },
	}
	cmds := testCommands(ui)
	maps.Copy(cmds, extra)
	code := dispatch(ui, args, cmds)
	return result{code: code, out: out.String(), errOut: errOut.String()}
}

func wantContains(t *testing.T, what, got string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(got, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, got)
		}
	}
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.errOut)
	}
}

const allocID = "8ba85cef-1111-2222-3333-444455556666"

func testAlloc(tasks ...string) *structs.Allocation {
	tg := &structs.TaskGroup{Name: "g"}
	states := map[string]*structs.TaskState{}
	for _, name := range tasks {
		tg.Tasks = append(tg.Tasks, &structs.Task{Name: name})
		states[name] = &structs.TaskState{
			State: "running", StartedAt: testNow.Add(-time.Minute),
			Events: []*structs.TaskEvent{
				{Type: "Received", Time: ns(testNow.Add(-3 * time.Minute)), DisplayMessage: "Task received by client"},
				{Type: "Task Setup", Time: ns(testNow.Add(-2 * time.Minute)), DisplayMessage: "Building Task Directory"},
				{Type: "Started", Time: ns(testNow.Add(-time.Minute)), DisplayMessage: "Task started by client"},
			},
		}
	}
	return &structs.Allocation{
		ID: allocID, EvalID: evalID, Name: "web.g[0]", NodeID: "171a583b-0000", NodeName: "client-1", JobID: "web",
		Job: &structs.Job{ID: "web", Version: 3, TaskGroups: []*structs.TaskGroup{tg}}, TaskGroup: "g",
		DesiredStatus: "run", ClientStatus: "running", ClientDescription: "Tasks are running",
		CreateTime: ns(testNow.Add(-5 * time.Minute)), ModifyTime: ns(testNow.Add(-time.Minute)),
		AllocatedResources: &structs.AllocatedResources{
			Tasks:  map[string]*structs.AllocatedTaskResources{"t": {Cpu: structs.AllocatedCpuResources{CpuShares: 500}, Memory: structs.AllocatedMemoryResources{MemoryMB: 256}}},
			Shared: structs.AllocatedSharedResources{DiskMB: 300},
		},
		TaskStates: states,
	}
}

func serveAlloc(f *fakeAgent, a *structs.Allocation) {
	f.json("GET /v1/allocations", []*structs.AllocListStub{a.Stub()})
	f.json("GET /v1/allocation/"+a.ID, a)
}

// serveLogs answers the log endpoint with the given text, plain or framed
// (in frames of frameSize bytes), and records the query.
func serveLogs(f *fakeAgent, text string, frameSize int) {
	f.handle("GET /v1/client/fs/logs/"+allocID, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("plain") == "true" {
			_, _ = w.Write([]byte(text))
			return
		}
		enc := json.NewEncoder(w)
		_ = enc.Encode(map[string]any{}) // a heartbeat first
		for off := 0; off < len(text); off += frameSize {
			end := min(off+frameSize, len(text))
			_ = enc.Encode(map[string]any{"Offset": end, "Data": []byte(text[off:end]), "File": "alloc/logs/t.stdout.0"})
		}
	})
}

const batchHCL = `job "web" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`

const evalID = "4f6c9e5e-1111-2222-3333-444455556666"

// serveEval answers the monitor: the eval and its allocations.
func serveEval(f *fakeAgent, eval *structs.Evaluation, allocs []*structs.AllocListStub) {
	f.json("GET /v1/evaluation/"+eval.ID, eval)
	f.json("GET /v1/evaluation/"+eval.ID+"/allocations", allocs)
}

func writeJobFile(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const nodeID = "f7476465-aaaa-bbbb-cccc-ddddeeeeffff"

func testNode() *structs.Node {
	return &structs.Node{
		ID: nodeID, Name: "client-1", Datacenter: "dc1", NodePool: "default", Status: "ready", SchedulingEligibility: "eligible",
		NodeResources: &structs.NodeResources{Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192}, Disk: structs.NodeDiskResources{DiskMB: 40960}},
		Drivers:       map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}, "docker": {Detected: false}},
		Events:        []*structs.NodeEvent{{Message: "Node registered", Subsystem: "Cluster", Timestamp: testNow.Add(-time.Hour)}},
	}
}

func ns(t time.Time) int64 { return t.UnixNano() }

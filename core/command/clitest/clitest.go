// Package clitest is the harness of the command tests: a fake agent
// serving canned answers, RunCLI to run a command table against it, and
// fixtures several areas' tests share.
package clitest

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

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
	"go.uber.org/goleak"
)

// Main is the TestMain of every command test package: cmds is the command
// table of the package under test, the one RunCLI dispatches over.
func Main(m *testing.M, cmds func(*cli.UI) map[string]cli.Command) {
	Commands = cmds
	// Timestamps print in local time; pin it so that expectations hold on
	// any machine. Set before any test goroutine starts.
	time.Local = time.UTC
	goleak.VerifyTestMain(m)
}

// Commands is the command table of the package under test (set by Main).
var Commands func(*cli.UI) map[string]cli.Command

// TestNow is the clock of every command test.
var TestNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// recorded is one request the fake agent received.
type recorded struct {
	Method, Path, Query, Token string
	Body                       []byte
}

// FakeAgent serves canned answers keyed by "METHOD /escaped/path".
type FakeAgent struct {
	t      *testing.T
	Srv    *httptest.Server
	Mu     sync.Mutex
	Routes map[string]http.HandlerFunc
	Reqs   []recorded
}

func NewFakeAgent(t *testing.T) *FakeAgent {
	t.Helper()
	f := &FakeAgent{t: t, Routes: map[string]http.HandlerFunc{}}
	f.Srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Srv.Close)
	return f
}

func (f *FakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Method + " " + r.URL.EscapedPath()
	f.Mu.Lock()
	f.Reqs = append(f.Reqs, recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Token: r.Header.Get("X-Nomad-Token"), Body: body})
	h := f.Routes[key]
	f.Mu.Unlock()
	if h == nil {
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("not found"))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h(w, r)
}

// JSON answers key with v as JSON (and an index header).
func (f *FakeAgent) JSON(key string, v any) {
	f.Handle(key, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Nomad-Index", "7")
		_ = json.NewEncoder(w).Encode(v)
	})
}

func (f *FakeAgent) Handle(key string, h http.HandlerFunc) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Routes[key] = h
}

// Fail answers key with a status and a plain-text message.
func (f *FakeAgent) Fail(key string, code int, msg string) {
	f.Handle(key, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(msg))
	})
}

// Request returns the last request to key, failing when there was none.
func (f *FakeAgent) Request(key string) recorded {
	f.t.Helper()
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for i := len(f.Reqs) - 1; i >= 0; i-- {
		if f.Reqs[i].Method+" "+f.Reqs[i].Path == key {
			return f.Reqs[i]
		}
	}
	f.t.Fatalf("no request %s; got %v", key, f.Reqs)
	return recorded{}
}

// Result is what a command run produced.
type Result struct {
	Code        int
	Out, ErrOut string
}

// Run runs the CLI against the fake agent (reached through DROVER_ADDR).
func (f *FakeAgent) Run(t *testing.T, stdin string, args ...string) Result {
	t.Helper()
	return RunCLI(t, map[string]string{"DROVER_ADDR": f.Srv.URL}, stdin, nil, args...)
}

// RunCLI runs args over Commands and extra, as drover would with the
// given environment and standard input.
func RunCLI(t *testing.T, env map[string]string, stdin string, extra map[string]cli.Command, args ...string) Result {
	t.Helper()
	var out, errOut bytes.Buffer
	ui := &cli.UI{
		Out: &out, Err: &errOut, In: strings.NewReader(stdin),
		Getenv: func(k string) string { return env[k] },
		Environ: func() []string {
			var out []string
			for k, v := range env {
				out = append(out, k+"="+v)
			}
			return out
		},
		Now: func() time.Time { return TestNow },
	}
	cmds := Commands(ui)
	maps.Copy(cmds, extra)
	code := cli.Dispatch(ui, args, cmds)
	return Result{Code: code, Out: out.String(), ErrOut: errOut.String()}
}

func WantContains(t *testing.T, what, got string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(got, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, got)
		}
	}
}

func WantCode(t *testing.T, r Result, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.Code, code, r.Out, r.ErrOut)
	}
}

const AllocID = "8ba85cef-1111-2222-3333-444455556666"

func TestAlloc(tasks ...string) *structs.Allocation {
	tg := &structs.TaskGroup{Name: "g"}
	states := map[string]*structs.TaskState{}
	for _, name := range tasks {
		tg.Tasks = append(tg.Tasks, &structs.Task{Name: name})
		states[name] = &structs.TaskState{
			State: "running", StartedAt: TestNow.Add(-time.Minute),
			Events: []*structs.TaskEvent{
				{Type: "Received", Time: Ns(TestNow.Add(-3 * time.Minute)), DisplayMessage: "Task received by client"},
				{Type: "Task Setup", Time: Ns(TestNow.Add(-2 * time.Minute)), DisplayMessage: "Building Task Directory"},
				{Type: "Started", Time: Ns(TestNow.Add(-time.Minute)), DisplayMessage: "Task started by client"},
			},
		}
	}
	return &structs.Allocation{
		ID: AllocID, EvalID: EvalID, Name: "web.g[0]", NodeID: "171a583b-0000", NodeName: "client-1", JobID: "web",
		Job: &structs.Job{ID: "web", Version: 3, TaskGroups: []*structs.TaskGroup{tg}}, TaskGroup: "g",
		DesiredStatus: "run", ClientStatus: "running", ClientDescription: "Tasks are running",
		CreateTime: Ns(TestNow.Add(-5 * time.Minute)), ModifyTime: Ns(TestNow.Add(-time.Minute)),
		AllocatedResources: &structs.AllocatedResources{
			Tasks:  map[string]*structs.AllocatedTaskResources{"t": {Cpu: structs.AllocatedCpuResources{CpuShares: 500}, Memory: structs.AllocatedMemoryResources{MemoryMB: 256}}},
			Shared: structs.AllocatedSharedResources{DiskMB: 300},
		},
		TaskStates: states,
	}
}

func ServeAlloc(f *FakeAgent, a *structs.Allocation) {
	f.JSON("GET /v1/allocations", []*structs.AllocListStub{a.Stub()})
	f.JSON("GET /v1/allocation/"+a.ID, a)
}

// ServeLogs answers the log endpoint with the given text, plain or framed
// (in frames of frameSize bytes), and records the query.
func ServeLogs(f *FakeAgent, text string, frameSize int) {
	f.Handle("GET /v1/client/fs/logs/"+AllocID, func(w http.ResponseWriter, r *http.Request) {
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

const BatchHCL = `job "web" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`

const EvalID = "4f6c9e5e-1111-2222-3333-444455556666"

// ServeEval answers the monitor: the eval and its allocations.
func ServeEval(f *FakeAgent, eval *structs.Evaluation, allocs []*structs.AllocListStub) {
	f.JSON("GET /v1/evaluation/"+eval.ID, eval)
	f.JSON("GET /v1/evaluation/"+eval.ID+"/allocations", allocs)
}

func WriteJobFile(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const NodeID = "f7476465-aaaa-bbbb-cccc-ddddeeeeffff"

func TestNode() *structs.Node {
	return &structs.Node{
		ID: NodeID, Name: "client-1", Datacenter: "dc1", NodePool: "default", Status: "ready", SchedulingEligibility: "eligible",
		NodeResources: &structs.NodeResources{Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192}, Disk: structs.NodeDiskResources{DiskMB: 40960}},
		Drivers:       map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}, "docker": {Detected: false}},
		Events:        []*structs.NodeEvent{{Message: "Node registered", Subsystem: "Cluster", Timestamp: TestNow.Add(-time.Hour)}},
	}
}

func Ns(t time.Time) int64 { return t.UnixNano() }

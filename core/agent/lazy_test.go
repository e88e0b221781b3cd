package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/sdk/csibridge"
)

// A dev agent is ready without a single plugin process: every built-in is
// listed idle, raw_exec is fingerprinted in process, docker (no engine on
// its socket) is undetected with the reason, and an engine appearing and
// going away is seen by the in-process fingerprint. Each plugin then starts
// when first needed and only then: a scheduler at the first eval of its
// type, raw_exec at its first task, docker when a docker task call arrives
// (TestDockerTaskStartsIdleDriver), csi-bridge at its first CSI call, gc at
// its first collection.
func TestDevAgentStartsPluginsWhenFirstNeeded(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	cfg.Client.FingerprintInterval = "100ms"
	a := startTestAgent(t, cfg, hclog.Warn)
	waitFor(t, "a ready node with raw_exec healthy", func() (bool, string) {
		nodes, _ := a.Server().State().Nodes(nil)
		if len(nodes) != 1 || !nodes[0].Ready() || nodes[0].Drivers["raw_exec"] == nil {
			return false, fmt.Sprint(len(nodes))
		}
		return nodes[0].Drivers["raw_exec"].Healthy, nodes[0].Drivers["raw_exec"].HealthDescription
	})
	node, _ := a.Server().State().Nodes(nil)
	if d := node[0].Drivers["docker"]; d == nil || d.Detected || !strings.Contains(d.HealthDescription, "Failed to connect to the docker engine at unix://"+sock) {
		t.Errorf("docker without an engine: %+v, want undetected with the reason", d)
	}
	if kids := childProcesses(t); len(kids) != 0 {
		t.Errorf("plugin processes at a ready idle node: %v", kids)
	}
	health := func() map[string]string {
		out := map[string]string{}
		for _, p := range a.PluginsStatus() {
			out[p.Name] = p.Health
			if (p.Health == structs.AgentPluginIdle) != (p.PID == 0) {
				t.Errorf("plugin %+v: idle exactly when it has no process", p)
			}
		}
		return out
	}
	for name, h := range health() {
		if h != structs.AgentPluginIdle {
			t.Errorf("plugin %s is %s at a ready idle node, want %s", name, h, structs.AgentPluginIdle)
		}
	}
	if p, err := a.PluginStatus("scheduler-sysbatch"); err != nil || len(p.JobTypes) != 1 || p.JobTypes[0].Name != "sysbatch" || p.Version == "" {
		t.Errorf("idle scheduler-sysbatch listed as %+v (%v), want its declaration", p, err)
	}
	// The HTTP API lists them too, with their state.
	code, body := httpDo(t, a, http.MethodGet, "/v1/agent/plugins")
	if code != http.StatusOK || strings.Count(body, `"Health":"idle"`) != len(builtinPlugins) {
		t.Errorf("GET /v1/agent/plugins: HTTP %d %s", code, body)
	}

	declared, ok := a.Plugins().Schedulers().JobType("sysbatch")
	if !ok {
		t.Fatal("job type sysbatch is not routed while its plugin is idle")
	}

	// The first sysbatch eval starts its scheduler, the task raw_exec.
	job := &structs.Job{ID: "first", Type: "sysbatch", TaskGroups: []*structs.TaskGroup{{
		Name: "g", Count: 1,
		Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
			Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
	}}}
	r, err := a.Server().Jobs().Register(context.Background(), job, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first job's alloc to complete", func() (bool, string) {
		allocs, _ := a.Server().State().AllocsByEval(nil, r.EvalID)
		if len(allocs) != 1 {
			return false, fmt.Sprintf("%d allocs", len(allocs))
		}
		return allocs[0].ClientStatus == structs.AllocClientStatusComplete, allocs[0].ClientStatus
	})
	// The process declares what the in-process code declared.
	if launched, _ := a.Plugins().Schedulers().JobType("sysbatch"); !reflect.DeepEqual(launched, declared) {
		t.Errorf("sysbatch as its process declares it:\n%+v\nas declared in process:\n%+v", launched, declared)
	}
	h := health()
	for name, want := range map[string]string{
		"scheduler-sysbatch": structs.AgentPluginHealthy, "driver-rawexec": structs.AgentPluginHealthy,
		"scheduler-system": structs.AgentPluginIdle, "scheduler-batch": structs.AgentPluginIdle,
		"scheduler-service": structs.AgentPluginIdle, "driver-docker": structs.AgentPluginIdle,
		"csi-bridge": structs.AgentPluginIdle, "gc": structs.AgentPluginIdle,
	} {
		if h[name] != want {
			t.Errorf("after a sysbatch job %s is %s, want %s", name, h[name], want)
		}
	}

	// A docker engine appears on the socket: the next fingerprint, still
	// in the agent's process, finds it (ping, version, info) and the node
	// reports docker healthy with the engine's attributes; the plugin
	// stays idle until a docker task.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	engine := &http.Server{Handler: fakeDockerEngine()}
	go func() { _ = engine.Serve(ln) }()
	defer engine.Close()
	waitFor(t, "docker healthy once its engine answers", func() (bool, string) {
		nodes, _ := a.Server().State().Nodes(nil)
		if len(nodes) != 1 || nodes[0].Drivers["docker"] == nil {
			return false, fmt.Sprint(len(nodes))
		}
		d := nodes[0].Drivers["docker"]
		return d.Detected && d.Healthy && nodes[0].Attributes["driver.docker.version"] == "99.0-fake",
			fmt.Sprintf("%+v %q", d, nodes[0].Attributes["driver.docker.version"])
	})
	if st, _ := a.PluginStatus("driver-docker"); st.Health != structs.AgentPluginIdle || st.PID != 0 {
		t.Errorf("driver-docker after its engine appeared: %+v, want idle (fingerprinted in process)", st)
	}
	// The engine goes away: the node says so, with the reason.
	_ = engine.Close()
	_ = os.Remove(sock)
	waitFor(t, "docker undetected once its engine is gone", func() (bool, string) {
		nodes, _ := a.Server().State().Nodes(nil)
		d := nodes[0].Drivers["docker"]
		return !d.Detected && !d.Healthy && strings.Contains(d.HealthDescription, "unix://"+sock), fmt.Sprintf("%+v", d)
	})

	// A CSI call (the client's when a CSI plugin registers) starts the
	// bridge; its answer is the bridge's own.
	_, err = a.Plugins().CSIBridge().Fingerprint(context.Background(), csibridge.FingerprintRequest{Socket: filepath.Join(t.TempDir(), "none.sock")})
	if err == nil {
		t.Error("the bridge fingerprinted a socket that does not exist")
	}
	if st, _ := a.PluginStatus("csi-bridge"); st.Health != structs.AgentPluginHealthy || st.PID == 0 {
		t.Errorf("csi-bridge after its first call: %+v", st)
	}

	// A forced collection starts gc.
	if code, body := httpDo(t, a, http.MethodPut, "/v1/system/gc"); code != http.StatusOK {
		t.Fatalf("system gc: HTTP %d %s", code, body)
	}
	waitFor(t, "gc to start at its first collection", func() (bool, string) {
		st, _ := a.PluginStatus("gc")
		return st.Health == structs.AgentPluginHealthy, st.Health
	})
	for _, name := range []string{"scheduler-system", "scheduler-batch", "scheduler-service"} {
		if st, _ := a.PluginStatus(name); st.Health != structs.AgentPluginIdle {
			t.Errorf("%s, never needed, is %s", name, st.Health)
		}
	}
}

// A docker task call to an idle docker driver starts it, whatever the
// engine: the plugin answers the call.
func TestDockerTaskStartsIdleDriver(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "docker.sock"))
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	a := startTestAgent(t, cfg, hclog.Warn)
	if st, _ := a.PluginStatus("driver-docker"); st.Health != structs.AgentPluginIdle {
		t.Fatalf("driver-docker without an engine: %+v, want idle", st)
	}
	d, err := a.drivers.Driver("docker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectTask(context.Background(), "no-such-task"); err == nil {
		t.Error("InspectTask of an unknown task succeeded")
	}
	if st, _ := a.PluginStatus("driver-docker"); st.Health != structs.AgentPluginHealthy || st.PID == 0 {
		t.Errorf("driver-docker after a task call: %+v, want running", st)
	}
}

// A plugin whose start on first need fails (here its binary exits at
// once) fails the work that needed it and is reported: the agent starts,
// its node is ready (raw_exec fingerprinted in process), and the first
// sysbatch eval leaves the scheduler plugin failed with the launch's error,
// while the eval is handed back, not lost.
func TestPluginStartFailureOnFirstNeedSurfaced(t *testing.T) {
	testtier.Agent(t)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "docker.sock"))
	broken := filepath.Join(t.TempDir(), "drover")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho this drover is broken >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	a, err := New(cfg, Options{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: logs}),
		SelfExe: broken, HTTPListener: ln})
	if err != nil {
		t.Fatalf("New with lazy plugins and a broken binary: %v\n%s", err, logs)
	}
	t.Cleanup(a.Shutdown)
	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _ := a.Server().State().Nodes(nil)
		return len(nodes) == 1 && nodes[0].Ready() && nodes[0].Drivers["raw_exec"].Healthy, fmt.Sprint(len(nodes))
	})
	job := &structs.Job{ID: "needs-sysbatch", Type: "sysbatch", TaskGroups: []*structs.TaskGroup{{
		Name: "g", Count: 1,
		Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
			Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
	}}}
	r, err := a.Server().Jobs().Register(context.Background(), job, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "scheduler-sysbatch reported failed", func() (bool, string) {
		st, _ := a.PluginStatus("scheduler-sysbatch")
		return st.Health == structs.AgentPluginFailed && st.PID == 0 && strings.Contains(st.LastError, `launch plugin "scheduler-sysbatch"`), fmt.Sprintf("%+v", st)
	})
	ev, err := a.Server().State().EvalByID(nil, r.EvalID)
	if err != nil || ev == nil || ev.Status == structs.EvalStatusComplete {
		t.Fatalf("the eval that needed the failed plugin: %+v (%v), want it not complete", ev, err)
	}
	if st, _ := a.PluginStatus("scheduler-system"); st.Health != structs.AgentPluginIdle {
		t.Errorf("a plugin nothing needed is %s, want idle", st.Health)
	}
}

// fakeDockerEngine answers the three calls of the docker driver's
// fingerprint (ping, version, info) as an engine speaking API 1.41 would.
func fakeDockerEngine() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			_, _ = w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/version"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"Version":"99.0-fake","ApiVersion":"1.41","Os":"linux"}`))
		case strings.HasSuffix(r.URL.Path, "/info"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"OSType":"linux","Runtimes":{"runc":{}}}`))
		default:
			http.NotFound(w, r)
		}
	})
}

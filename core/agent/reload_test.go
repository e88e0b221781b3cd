package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

func httpDo(t *testing.T, a *Agent, method, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+a.HTTPAddr()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = fmt.Fprint(&b, readAll(t, resp))
	return resp.StatusCode, b.String()
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

func pluginPids(a *Agent) map[string]int {
	out := map[string]int{}
	for _, p := range a.Plugins().Status() {
		out[p.Name] = p.Pid
	}
	return out
}

// The whole-agent reload relaunches only changed plugins (none here), and
// a reload of the driver by name returns at once though a task runs: the
// task's wait does not hold the old driver process for the drain timeout.
// The task survives, and scheduling goes on through the new processes.
func TestReloadPluginsThroughAPI(t *testing.T) {
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	a := startTestAgent(t, cfg, hclog.Warn)
	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _ := a.Server().State().Nodes(nil)
		return len(nodes) == 1 && nodes[0].Ready(), fmt.Sprint(len(nodes))
	})
	runJob := func(id, command string, args ...string) string {
		t.Helper()
		job := &structs.Job{ID: id, Type: "sysbatch", TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": command, "args": args},
				Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
		}}}
		r, err := a.Server().Jobs().Register(context.Background(), job, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		return r.EvalID
	}
	allocStatus := func(evalID string) (string, string) {
		allocs, _ := a.Server().State().AllocsByEval(nil, evalID)
		if len(allocs) != 1 {
			return "", fmt.Sprintf("%d allocs", len(allocs))
		}
		return allocs[0].ClientStatus, allocs[0].ClientStatus
	}
	long := runJob("long", "/bin/sleep", "300")
	waitFor(t, "the long task to run", func() (bool, string) {
		s, last := allocStatus(long)
		return s == structs.AllocClientStatusRunning, last
	})

	before := pluginPids(a)
	if code, body := httpDo(t, a, http.MethodPut, "/v1/agent/plugins/reload"); code != http.StatusOK {
		t.Fatalf("reload: HTTP %d %s", code, body)
	}
	if after := pluginPids(a); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a reload with nothing changed relaunched plugins: %v → %v", before, after)
	}

	start := time.Now()
	code, body := httpDo(t, a, http.MethodPut, "/v1/agent/plugins/reload?name=driver-rawexec")
	if code != http.StatusOK {
		t.Fatalf("reload driver-rawexec: HTTP %d %s", code, body)
	}
	// The drain timeout is 30 s; a driver call other than the task's wait
	// takes milliseconds.
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("reloading the driver with a task running took %s", d)
	}
	var resp struct {
		Reloaded bool
		Plugin   structs.AgentPlugin
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || !resp.Reloaded || resp.Plugin.PID == before["driver-rawexec"] {
		t.Errorf("reload answer %s (%v), want a new pid", body, err)
	}
	after := pluginPids(a)
	for name, pid := range before {
		if changed := after[name] != pid; changed != (name == "driver-rawexec") {
			t.Errorf("%s: pid %d → %d", name, pid, after[name])
		}
	}
	if code, body := httpDo(t, a, http.MethodPut, "/v1/agent/plugins/reload?name=nope"); code != http.StatusNotFound || !strings.Contains(body, `"nope"`) {
		t.Errorf("reload of an unknown plugin: HTTP %d %s", code, body)
	}

	done := runJob("after-reload", "/bin/true")
	waitFor(t, "the job's alloc to complete through the reloaded plugins", func() (bool, string) {
		s, last := allocStatus(done)
		return s == structs.AllocClientStatusComplete, last
	})
	if s, _ := allocStatus(long); s != structs.AllocClientStatusRunning {
		t.Errorf("the long task after the driver's reload: %s, want still running", s)
	}
}

// The standalone system scheduler, built and dropped in plugin_dir under a
// stanza, takes the system job type over from the built-in, and the API
// lists it with its declaration.
func TestStandaloneSchedulerTakesOverBuiltin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	pluginDir := filepath.Join(dir, "plugins")
	if err := os.Mkdir(pluginDir, 0o700); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "my-system"),
		"github.com/drover-org/drover/plugins/scheduler-system/cmd/drover-scheduler-system")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := DevConfig()
	cfg.DataDir = dir
	cfg.Ports.RPC = freePort(t)
	cfg.PluginDir = pluginDir
	cfg.Plugins = []*PluginConfig{{Name: "my-system"}}
	a := startTestAgent(t, cfg, hclog.Warn)

	if info, ok := a.Plugins().Schedulers().JobType("system"); !ok || info.Plugin != "my-system" {
		t.Fatalf("system is served by %+v, %v; want my-system", info, ok)
	}
	code, body := httpDo(t, a, http.MethodGet, "/v1/agent/plugins/my-system")
	if code != http.StatusOK {
		t.Fatalf("GET plugin: HTTP %d %s", code, body)
	}
	var p structs.AgentPlugin
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if p.Builtin || p.Path != filepath.Join(pluginDir, "my-system") || p.Kind != "scheduler" || p.PID == 0 ||
		p.Health != structs.AgentPluginHealthy || len(p.JobTypes) != 1 || p.JobTypes[0].Name != "system" ||
		!p.JobTypes[0].Behavior.PerNode {
		t.Errorf("plugin = %+v", p)
	}
	code, body = httpDo(t, a, http.MethodGet, "/v1/agent/plugins")
	var list struct{ Plugins []structs.AgentPlugin }
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET plugins: HTTP %d %s", code, body)
	}
	var names []string
	for _, p := range list.Plugins {
		names = append(names, p.Name)
	}
	if want := "scheduler-system,scheduler-sysbatch,scheduler-batch,scheduler-service,driver-rawexec,driver-docker,driver-exec,driver-mock,csi-bridge,gc,my-system"; strings.Join(names, ",") != want {
		t.Errorf("plugins = %v, want %s", names, want)
	}
	if code, body := httpDo(t, a, http.MethodGet, "/v1/agent/plugin?name=ghost"); code != http.StatusNotFound || !strings.Contains(body, `"ghost"`) {
		t.Errorf("GET unknown plugin: HTTP %d %s", code, body)
	}

	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _ := a.Server().State().Nodes(nil)
		return len(nodes) == 1 && nodes[0].Ready(), fmt.Sprint(len(nodes))
	})
	job := &structs.Job{ID: "sys", Type: "system", TaskGroups: []*structs.TaskGroup{{
		Name: "g", Count: 1,
		Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/sleep", "args": []string{"300"}},
			Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
	}}}
	r, err := a.Server().Jobs().Register(context.Background(), job, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the standalone scheduler to place the system job", func() (bool, string) {
		allocs, _ := a.Server().State().AllocsByEval(nil, r.EvalID)
		return len(allocs) == 1, fmt.Sprintf("%d allocs", len(allocs))
	})
}

package agent

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// PUT /v1/agent/plugins/reload swaps every plugin process of a running dev
// agent; scheduling goes on through the new processes.
func TestReloadPluginsThroughAPI(t *testing.T) {
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	a := startTestAgent(t, cfg, hclog.Warn)
	before := map[string]int{}
	for _, p := range a.Plugins().Status() {
		before[p.Name] = p.Pid
	}
	req, _ := http.NewRequest(http.MethodPut, "http://"+a.HTTPAddr()+"/v1/agent/plugins/reload", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reload: HTTP %d", resp.StatusCode)
	}
	for _, p := range a.Plugins().Status() {
		if !p.Running || p.Pid == before[p.Name] {
			t.Fatalf("plugin %s after reload: running=%v pid %d (was %d)", p.Name, p.Running, p.Pid, before[p.Name])
		}
	}
	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _ := a.Server().State().Nodes(nil)
		return len(nodes) == 1 && nodes[0].Ready(), fmt.Sprint(len(nodes))
	})
	job := &structs.Job{ID: "after-reload", Type: "sysbatch", TaskGroups: []*structs.TaskGroup{{
		Name: "g", Count: 1,
		Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
			Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
	}}}
	r, err := a.Server().RegisterJob(context.Background(), job, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job's alloc to complete through the reloaded plugins", func() (bool, string) {
		allocs, _ := a.Server().State().AllocsByEval(nil, r.EvalID)
		if len(allocs) != 1 {
			return false, fmt.Sprintf("%d allocs", len(allocs))
		}
		return allocs[0].ClientStatus == structs.AllocClientStatusComplete, allocs[0].ClientStatus
	})
}

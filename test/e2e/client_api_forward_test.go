package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/test/internal/harness"
)

// startAgentProc starts `drover agent -config cfg` as a testAgent whose
// cleanup stops it and kills the tasks a non-dev client leaves.
func startAgentProc(t *testing.T, name, dataDir, cfg string, httpPort int) *testAgent {
	t.Helper()
	proc, err := harness.Start(droverBin, []string{"agent", "-config", cfg}, filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	a := &testAgent{
		API: harness.NewAPI(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)), droverBin, repoRoot),
		t:   t, DataDir: dataDir, proc: proc, leftoversChecked: true,
	}
	a.Alive = proc.Running
	t.Cleanup(func() {
		a.stop()
		harness.RemoveTaskCgroups(dataDir)
	})
	return a
}

// TestClientAPIForwardedByServer: a server-only agent, asked about an
// allocation that runs on another agent's client, forwards the client-side
// API to that node's HTTP address; the client agent answers it itself.
func TestClientAPIForwardedByServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srvPorts := harness.FreePorts(t, 2)
	srvData := filepath.Join(dir, "server")
	srv := startAgentProc(t, "server", srvData, loneServerConfig(t, srvData, srvPorts, "client {\n  enabled = false\n}\n"), srvPorts[0])
	_, clientToken, err := srv.JoinTokens(agentReadyTimeout, srv.proc.Running)
	if err != nil {
		t.Fatalf("join tokens: %v\n%s", err, srv.log())
	}

	cliPort := harness.FreePorts(t, 1)[0]
	cliData := filepath.Join(dir, "client")
	if err := os.MkdirAll(cliData, 0o755); err != nil {
		t.Fatal(err)
	}
	cliCfg := harness.WriteFile(t, "client.hcl", fmt.Sprintf(`
name      = "e2e-client"
data_dir  = %q
bind_addr = "127.0.0.1"
ports {
  http = %d
}
client {
  enabled    = true
  servers    = ["127.0.0.1:%d"]
  join_token = %q
}
plugin "raw_exec" {
  config {
    enabled           = true
    denied_host_users = []
  }
}
`, cliData, cliPort, srvPorts[1], clientToken))
	cli := startAgentProc(t, "client", cliData, cliCfg, cliPort)
	harness.WaitFor(t, agentReadyTimeout, "the client's node is ready", func() (bool, string) {
		if !cli.proc.Running() {
			t.Fatalf("client agent exited:\n%s", cli.log())
		}
		var nodes []nodeStub
		status, err := srv.Do(http.MethodGet, "/v1/nodes", nil, &nodes)
		return err == nil && status == 200 && len(nodes) == 1 && nodes[0].Status == "ready" && nodes[0].Drivers["raw_exec"].Healthy,
			fmt.Sprintf("%d %v %+v", status, err, nodes)
	})

	nc := srv.nomadClient()
	job := nomadapi.NewServiceJob("e2e-clientapi-fwd", "e2e-clientapi-fwd", "global", 50)
	job.Datacenters = []string{"*"}
	job.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(nomadapi.NewTask("t", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", `echo hello > "$NOMAD_ALLOC_DIR/data/hello.txt"; while true; do sleep 1; done`}).
		Require(&nomadapi.Resources{CPU: clientAPIInt(20), MemoryMB: clientAPIInt(32)})))
	if _, _, err := nc.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	var allocID, nodeID string
	clientAPIWait(t, "the alloc runs on the client", func() (bool, string) {
		stubs, _, err := nc.Jobs().Allocations("e2e-clientapi-fwd", false, nil)
		if err != nil || len(stubs) == 0 || stubs[0].ClientStatus != "running" {
			return false, fmt.Sprint(stubs, err)
		}
		allocID, nodeID = stubs[0].ID, stubs[0].NodeID
		status, _, err := srv.Raw(http.MethodGet, "/v1/client/fs/stat/"+allocID+"?path=alloc/data/hello.txt", nil)
		return err == nil && status == 200, fmt.Sprint(status, err)
	})

	// Asked of the server (no client there): forwarded to the node.
	for _, a := range []*testAgent{srv, cli} {
		status, body, err := a.Raw(http.MethodGet, "/v1/client/fs/cat/"+allocID+"?path=alloc/data/hello.txt", nil)
		if err != nil || status != 200 || string(body) != "hello\n" {
			t.Errorf("cat via %s: %d %q %v", a.Addr, status, body, err)
		}
		status, body, err = a.Raw(http.MethodGet, "/v1/client/fs/cat/"+allocID+"?path=../../server", nil)
		if err != nil || status != http.StatusBadRequest {
			t.Errorf("cat of .. via %s: %d %q %v; want 400", a.Addr, status, body, err)
		}
		var host nomadapi.HostStats
		if status, err := a.Do(http.MethodGet, "/v1/client/stats?node_id="+nodeID, nil, &host); err != nil || status != 200 || host.Memory == nil || host.Memory.Total == 0 {
			t.Errorf("node stats via %s: %d %+v %v", a.Addr, status, host, err)
		}
		var usage nomadapi.AllocResourceUsage
		if status, err := a.Do(http.MethodGet, "/v1/client/allocation/"+allocID+"/stats", nil, &usage); err != nil || status != 200 || usage.Tasks["t"] == nil {
			t.Errorf("alloc stats via %s: %d %+v %v", a.Addr, status, usage, err)
		}
	}
	status, _, err := srv.Raw(http.MethodGet, "/v1/client/fs/ls/4b4e1e4c-0000-4000-8000-000000000000?path=/", nil)
	if err != nil || status != http.StatusNotFound {
		t.Errorf("ls of an unknown alloc via the server: %d %v; want 404", status, err)
	}
	// Writes too: a restart and node meta, through the server.
	status, body, err := srv.Raw(http.MethodPut, "/v1/client/allocation/"+allocID+"/restart", map[string]string{"TaskName": "t"})
	if err != nil || status != 200 {
		t.Fatalf("restart via the server: %d %q %v", status, body, err)
	}
	v := "green"
	if _, err := nc.Nodes().Meta().Apply(&nomadapi.NodeMetaApplyRequest{NodeID: nodeID, Meta: map[string]*string{"color": &v}}, nil); err != nil {
		t.Fatalf("meta apply via the server: %v", err)
	}
	clientAPIWait(t, "the restart and the meta reach the cluster", func() (bool, string) {
		al, _, err := nc.Allocations().Info(allocID, nil)
		if err != nil {
			return false, err.Error()
		}
		n, _, err := nc.Nodes().Info(nodeID, nil)
		if err != nil {
			return false, err.Error()
		}
		ts := al.TaskStates["t"]
		return ts != nil && ts.Restarts == 1 && ts.State == "running" && n.Meta["color"] == "green",
			fmt.Sprintf("task %+v meta %v", ts, n.Meta)
	})
}

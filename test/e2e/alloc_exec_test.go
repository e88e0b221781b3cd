package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/test/internal/harness"
)

// TestAllocExec: `nomad alloc exec` against real agents. A server-only
// agent forwards the session (a websocket) to the client agent that runs
// a raw_exec task; Nomad's api package and drover's CLI run commands in
// the task with stdin, output, exit codes and a tty; closing the socket
// kills the command.
func TestAllocExec(t *testing.T) {
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
	cli := startAgentProc(t, "client", cliData, harness.WriteFile(t, "client.hcl", fmt.Sprintf(`
name      = "e2e-exec-client"
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
`, cliData, cliPort, srvPorts[1], clientToken)), cliPort)
	harness.WaitFor(t, agentReadyTimeout, "the client's node is ready", func() (bool, string) {
		if !cli.proc.Running() {
			t.Fatalf("client agent exited:\n%s", cli.log())
		}
		var nodes []nodeStub
		status, err := srv.Do(http.MethodGet, "/v1/nodes", nil, &nodes)
		return err == nil && status == 200 && len(nodes) == 1 && nodes[0].Status == "ready" && nodes[0].Drivers["raw_exec"].Healthy,
			fmt.Sprintf("%d %v %+v", status, err, nodes)
	})

	// Exec needs a client with its own transport (for the websocket).
	nc, err := nomadapi.NewClient(&nomadapi.Config{Address: "http://" + srv.Addr,
		HttpClient: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}})
	if err != nil {
		t.Fatal(err)
	}
	job := nomadapi.NewServiceJob("e2e-exec", "e2e-exec", "global", 50)
	job.Datacenters = []string{"*"}
	task := nomadapi.NewTask("t", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", "while true; do sleep 1; done"}).
		Require(&nomadapi.Resources{CPU: clientAPIInt(20), MemoryMB: clientAPIInt(32)})
	task.Env = map[string]string{"EXEC_MARK": "from-the-task"}
	job.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(task))
	if _, _, err := nc.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	var alloc *nomadapi.Allocation
	clientAPIWait(t, "the alloc runs on the client", func() (bool, string) {
		stubs, _, err := nc.Jobs().Allocations("e2e-exec", false, nil)
		if err != nil || len(stubs) == 0 || stubs[0].ClientStatus != "running" || stubs[0].TaskStates["t"] == nil ||
			stubs[0].TaskStates["t"].State != "running" {
			return false, fmt.Sprint(stubs, err)
		}
		alloc, _, err = nc.Allocations().Info(stubs[0].ID, nil)
		return err == nil, fmt.Sprint(err)
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	// Nomad's api package: stdin in, stdout and stderr out, exit code, the
	// task's environment.
	var stdout, stderr bytes.Buffer
	code, err := nc.Allocations().Exec(ctx, alloc, "t", false,
		[]string{"/bin/sh", "-c", `cat; echo "$EXEC_MARK" >&2; exit 3`},
		strings.NewReader("typed into stdin\n"), &stdout, &stderr, nil, nil)
	if err != nil || code != 3 || stdout.String() != "typed into stdin\n" || stderr.String() != "from-the-task\n" {
		t.Fatalf("Exec = %d, %v; stdout %q stderr %q", code, err, stdout.String(), stderr.String())
	}
	// A tty, sized by the caller.
	sizes := make(chan nomadapi.TerminalSize, 1)
	sizes <- nomadapi.TerminalSize{Height: 30, Width: 90}
	stdout.Reset()
	code, err = nc.Allocations().Exec(ctx, alloc, "t", true,
		[]string{"/bin/sh", "-c", `i=0; while [ "$(stty size)" != "30 90" ]; do i=$((i+1)); [ $i -gt 400 ] && exit 9; sleep 0.05; done; tty >/dev/null && echo on-a-tty`},
		strings.NewReader(""), &stdout, &stderr, sizes, nil)
	if err != nil || code != 0 || !strings.Contains(stdout.String(), "on-a-tty") {
		t.Fatalf("Exec(tty) = %d, %v; stdout %q", code, err, stdout.String())
	}
	// An unknown task is refused with Nomad's message.
	if _, err := nc.Allocations().Exec(ctx, alloc, "nope", false, []string{"true"}, strings.NewReader(""), &stdout, &stderr, nil, nil); err == nil ||
		err.Error() != fmt.Sprintf("Unknown task %q in allocation %q", "nope", alloc.ID) {
		t.Fatalf("Exec(unknown task) = %v", err)
	}

	// drover's CLI, through the server: the command's exit code is the
	// CLI's.
	res := srv.CLI("alloc", "exec", alloc.ID[:8], "/bin/sh", "-c", `echo "task=$NOMAD_TASK_NAME"; exit 4`)
	if res.Code != 4 || res.Stdout != "task=t\n" {
		t.Fatalf("drover alloc exec: %s", res)
	}

	// Closing the socket kills the command.
	q := url.Values{"task": {"t"}, "command": {`["/bin/sh","-c","echo $$ > \"$NOMAD_TASK_DIR/exec.pid\"; exec sleep 600"]`}}
	conn, resp, err := websocket.DefaultDialer.Dial("ws://"+srv.Addr+"/v1/client/allocation/"+alloc.ID+"/exec?"+q.Encode(), nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	if resp != nil && resp.Body != nil {
		defer resp.Body.Close()
	}
	var pid int
	clientAPIWait(t, "the exec'd command writes its pid", func() (bool, string) {
		status, body, err := srv.Raw(http.MethodGet, "/v1/client/fs/cat/"+alloc.ID+"?path=t/local/exec.pid", nil)
		if err != nil || status != 200 || !bytes.HasSuffix(body, []byte("\n")) {
			return false, fmt.Sprint(status, string(body), err)
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(body)))
		return err == nil && pid > 0, string(body)
	})
	if _, ok := harness.ReadProc(pid); !ok {
		t.Fatalf("exec'd command %d is not running", pid)
	}
	_ = conn.Close()
	clientAPIWait(t, "the exec'd command dies with its session", func() (bool, string) {
		p, ok := harness.ReadProc(pid)
		return !ok || p.State == 'Z', fmt.Sprint(p)
	})
}

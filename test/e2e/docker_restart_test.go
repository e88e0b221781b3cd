package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// persistentAgent is a non-dev agent (server and client in one process)
// whose config and data dir outlive its process, so that it can be
// SIGKILLed and started again as the same node.
type persistentAgent struct {
	*harness.API
	t       *testing.T
	config  string
	dataDir string
	logDir  string
	proc    *harness.Process
	runs    int
}

// startPersistentAgent writes the agent's config (a one-server cluster
// with a client, the docker driver keeping images; extra is appended as
// is) and starts its first run. Cleanup stops it and removes whatever
// containers the test's allocs left.
func startPersistentAgent(t *testing.T, extra string) *persistentAgent {
	t.Helper()
	ports := harness.FreePorts(t, 2)
	a := &persistentAgent{t: t, dataDir: t.TempDir(), logDir: t.TempDir()}
	a.API = harness.NewAPI(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), droverBin, repoRoot)
	a.Alive = func() bool { return a.proc != nil && a.proc.Running() }
	a.config = harness.WriteFile(t, "agent.hcl", fmt.Sprintf(`
data_dir  = %q
bind_addr = "127.0.0.1"
log_level = "DEBUG"
ports {
  http = %d
  rpc  = %d
}
server {
  enabled          = true
  bootstrap_expect = 1
}
client {
  enabled = true
}
plugin "docker" {
  config {
    gc {
      image = false
    }
  }
}
`, a.dataDir, ports[0], ports[1])+extra)
	t.Cleanup(a.cleanup)
	a.launch()
	return a
}

// launch starts a run of the agent from its config and waits until its
// node is ready with a healthy docker driver.
func (a *persistentAgent) launch() {
	t := a.t
	t.Helper()
	a.runs++
	p, err := harness.Start(droverBin, []string{"agent", "-config", a.config}, filepath.Join(a.logDir, fmt.Sprintf("run%d.log", a.runs)))
	if err != nil {
		t.Fatalf("start agent: %v", err)
	}
	a.proc = p
	harness.WaitFor(t, agentReadyTimeout, "the node to be ready with a healthy docker driver", func() (bool, string) {
		if !p.Running() {
			t.Fatalf("agent exited (%v):\n%s", p.Cmd.ProcessState, p.Log())
		}
		var nodes []harness.NodeStub
		status, err := a.Do(http.MethodGet, "/v1/nodes", nil, &nodes)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("status %d, %v", status, err)
		}
		return len(nodes) == 1 && nodes[0].Status == "ready" && nodes[0].Drivers["docker"].Healthy, fmt.Sprintf("%+v", nodes)
	})
}

// crash SIGKILLs the agent and its plugins at once; containers stay.
func (a *persistentAgent) crash() {
	tree := harness.Descendants(a.proc.PID())
	a.proc.Kill()
	harness.KillAll(tree)
	harness.Poll(leftoverTimeout, 50*time.Millisecond, func() (bool, string) {
		return len(harness.StillAlive(tree)) == 0, ""
	})
	if left := harness.StillAlive(tree); len(left) > 0 {
		a.t.Fatalf("could not kill the agent's processes: %v", left)
	}
	a.HTTP.CloseIdleConnections()
}

func (a *persistentAgent) cleanup() {
	t := a.t
	if a.proc != nil && a.proc.Running() {
		tree := harness.Descendants(a.proc.PID())
		if _, err := a.proc.Stop(os.Interrupt, agentExitTimeout); err != nil {
			t.Errorf("agent shutdown: %v", err)
		}
		harness.KillAll(harness.StillAlive(tree))
	}
	harness.KillAll(harness.ProcsUnder(a.dataDir, droverBin))
	a.HTTP.CloseIdleConnections()
	if t.Failed() {
		for i := 1; i <= a.runs; i++ {
			b, _ := os.ReadFile(filepath.Join(a.logDir, fmt.Sprintf("run%d.log", i)))
			t.Logf("--- agent log, run %d ---\n%s", i, b)
		}
	}
}

// removeContainersOf removes, at cleanup, every container of the alloc.
func removeContainersOf(t *testing.T, allocID string) {
	t.Cleanup(func() {
		for _, id := range containersLabelled(t, "com.drover.alloc_id", allocID) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
	})
}

// containerState is `docker inspect`'s running flag and exit code.
func containerState(t *testing.T, id string) (running bool, exitCode int) {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", id).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", id, err)
	}
	f := strings.Fields(string(out))
	code, _ := strconv.Atoi(f[1])
	return f[0] == "true", code
}

// The client is SIGKILLed (agent, plugins, shims) while two docker tasks
// run, and one of them exits while it is down. Started again on the same
// data dir, it reattaches the running task's container (same ID, no second
// one), still reads its logs and copies its later output, and reports the
// task that exited meanwhile with the exit code the engine recorded.
func TestDockerTasksSurviveClientRestart(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startPersistentAgent(t, "")
	keeper := writeJobFile(t, `job "docker-keeper" {
  type        = "service"
  datacenters = ["*"]
  group "g" {
    task "keeper" {
      driver       = "docker"
      kill_timeout = "1s"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "echo first; while [ ! -f /local/go ]; do sleep 0.05; done; echo second; sleep 1000"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`)
	// The quitter exits 3 on SIGTERM: an exit code no kill produces, so
	// seeing it proves it was read from the engine.
	quitter := writeJobFile(t, `job "docker-quitter" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "quitter" {
      driver = "docker"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "trap 'echo got-term; exit 3' TERM; echo waiting; sleep 1000 & wait"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`)
	a.MustCLI("job", "run", "-detach", keeper)
	a.MustCLI("job", "run", "-detach", quitter)
	var keepAlloc, quitAlloc harness.Alloc
	harness.WaitFor(t, waitTimeout, "both docker tasks to run and log", func() (bool, string) {
		k, q := a.AllocsOf("docker-keeper"), a.AllocsOf("docker-quitter")
		if len(k) != 1 || len(q) != 1 || k[0].ClientStatus != "running" || q[0].ClientStatus != "running" {
			return false, fmt.Sprintf("keeper %+v, quitter %+v", k, q)
		}
		keepAlloc, quitAlloc = k[0], q[0]
		kl, ql := a.CLI("alloc", "logs", k[0].ID), a.CLI("alloc", "logs", q[0].ID)
		return kl.Stdout == "first\n" && ql.Stdout == "waiting\n", kl.String() + ql.String()
	})
	removeContainersOf(t, keepAlloc.ID)
	removeContainersOf(t, quitAlloc.ID)
	keepBefore := containersLabelled(t, "com.drover.alloc_id", keepAlloc.ID)
	quitBefore := containersLabelled(t, "com.drover.alloc_id", quitAlloc.ID)
	if len(keepBefore) != 1 || len(quitBefore) != 1 {
		t.Fatalf("containers before the crash: keeper %v, quitter %v", keepBefore, quitBefore)
	}

	a.crash()
	// With the client dead, the quitter is stopped behind its back.
	if out, err := exec.Command("docker", "stop", "-t", "30", quitBefore[0]).CombinedOutput(); err != nil {
		t.Fatalf("docker stop: %v: %s", err, out)
	}
	if running, code := containerState(t, quitBefore[0]); running || code != 3 {
		t.Fatalf("quitter after docker stop: running %v, exit code %d; want exited 3", running, code)
	}
	if running, _ := containerState(t, keepBefore[0]); !running {
		t.Fatalf("the keeper's container died with the client")
	}

	a.launch()
	harness.WaitFor(t, waitTimeout, "the quitter to be reported failed", func() (bool, string) {
		q := a.AllocsOf("docker-quitter")
		return len(q) == 1 && q[0].ClientStatus == "failed", fmt.Sprintf("%+v", q)
	})
	var sawExit bool
	events := taskEvents(t, &testAgent{API: a.API, t: t}, quitAlloc.ID, "quitter")
	for _, ev := range events {
		if ev.Type == "Terminated" && strings.Contains(ev.DisplayMessage+ev.Message, "Exit Code: 3") {
			sawExit = true
		}
		if ev.Type == "Started" && sawExit {
			t.Errorf("the quitter was started again after it exited: %+v", events)
		}
	}
	if !sawExit {
		t.Errorf("quitter events %+v: no Terminated event with Exit Code: 3", events)
	}
	// The failed task is destroyed, which removes its container (gc
	// container = true): none may be left, and none created anew.
	harness.WaitFor(t, waitTimeout, "the quitter's container to be removed", func() (bool, string) {
		got := containersLabelled(t, "com.drover.alloc_id", quitAlloc.ID)
		return len(got) == 0, fmt.Sprint(got)
	})

	// The keeper's container is the same one, watched again: its later
	// output reaches the logs after the earlier output, once.
	if logs := a.MustCLI("alloc", "logs", keepAlloc.ID); logs.Stdout != "first\n" {
		t.Errorf("keeper logs after the restart = %q", logs.Stdout)
	}
	out, err := exec.Command("docker", "inspect", "-f", `{{range .Mounts}}{{if eq .Destination "/local"}}{{.Source}}{{end}}{{end}}`, keepBefore[0]).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("the keeper's /local source: %q, %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, waitTimeout, "the reattached task's later output", func() (bool, string) {
		logs := a.CLI("alloc", "logs", keepAlloc.ID)
		return logs.Stdout == "first\nsecond\n", logs.String()
	})
	if got := containersLabelled(t, "com.drover.alloc_id", keepAlloc.ID); len(got) != 1 || got[0] != keepBefore[0] {
		t.Errorf("keeper containers after the restart: %v, want only %v", got, keepBefore)
	}
	if k := a.AllocsOf("docker-keeper"); len(k) != 1 || k[0].ID != keepAlloc.ID || k[0].ClientStatus != "running" {
		t.Errorf("keeper allocs after the restart: %+v", k)
	}

	a.MustCLI("job", "stop", "docker-keeper")
	harness.WaitFor(t, waitTimeout, "the keeper's container to be removed", func() (bool, string) {
		ids := containersLabelled(t, "com.drover.alloc_id", keepAlloc.ID)
		return len(ids) == 0, fmt.Sprint(ids)
	})
}

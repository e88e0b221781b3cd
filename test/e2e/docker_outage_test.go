package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/plugins/driver-docker/dockerproxy"
	"github.com/drover-org/drover/test/internal/harness"
)

// A running docker task through an engine outage. The agent reaches the
// engine through a socket proxy; stopping the proxy is the engine gone for
// drover while the container keeps running in the engine, which the test
// still reaches on the engine's own socket (docker CLI).

// startOutageAgent starts a dev agent whose docker driver goes through a
// fresh proxy and is fingerprinted every fingerprintPeriod.
// extra lines go into the plugin's config block.
func startOutageAgent(t *testing.T, extra ...string) (*testAgent, *dockerproxy.Proxy) {
	t.Helper()
	proxy := dockerproxy.New(t)
	cfg := filepath.Join(t.TempDir(), "docker.hcl")
	src := fmt.Sprintf("client {\n  fingerprint_interval = %q\n}\nplugin \"docker\" {\n  config {\n    endpoint = %q\n    gc {\n      image = false\n    }\n%s  }\n}\n",
		fingerprintPeriod.String(), proxy.Endpoint(), strings.Join(extra, ""))
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, "-config", cfg)
	harness.WaitFor(t, waitTimeout, "a healthy docker driver through the proxy", func() (bool, string) {
		var node struct {
			Drivers map[string]struct{ Healthy bool }
		}
		a.MustGet("/v1/node/"+a.NodeID(), &node)
		return node.Drivers["docker"].Healthy, fmt.Sprintf("%+v", node)
	})
	return a, proxy
}

// allocTask is an alloc's client status and one task's state.
func allocTask(t *testing.T, a *testAgent, allocID, task string) (clientStatus, state string, failed bool) {
	t.Helper()
	var alloc struct {
		ClientStatus string
		TaskStates   map[string]struct {
			State  string
			Failed bool
		}
	}
	a.MustGet("/v1/allocation/"+allocID, &alloc)
	ts := alloc.TaskStates[task]
	return alloc.ClientStatus, ts.State, ts.Failed
}

// staysRunningInDrover polls the alloc every 100 ms for the window and
// fails the test the first time drover reports it or its task other than
// running.
func staysRunningInDrover(t *testing.T, a *testAgent, allocID, task string, window time.Duration) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(window)
	polls := 0
	for ; time.Now().Before(end); polls++ {
		if cs, st, failed := allocTask(t, a, allocID, task); cs != "running" || st != "running" || failed {
			t.Fatalf("poll %d, engine away: alloc %s, task %s (failed %v); want both running", polls, cs, st, failed)
		}
		<-tick.C
	}
	t.Logf("task running in drover over %d polls (%v) with the engine away", polls, window)
}

// outageJob is a batch job of one busybox task running sh -c script,
// never restarted nor rescheduled, so each test sees its one task's fate.
func outageJob(id, script string) string {
	return fmt.Sprintf(`job %q {
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
    task "t" {
      driver = "docker"
      config {
        image   = %q
        command = "sh"
        args    = ["-c", %q]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`, id, e2eBusybox, script)
}

// outageServiceJob is a service job of one busybox task running sh -c
// script, killed 1s after its stop signal.
func outageServiceJob(id, script string) string {
	return fmt.Sprintf(`job %q {
  type        = "service"
  datacenters = ["*"]
  group "g" {
    task "t" {
      driver       = "docker"
      kill_timeout = "1s"
      config {
        image   = %q
        command = "sh"
        args    = ["-c", %q]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`, id, e2eBusybox, script)
}

// runningDockerTask runs a one-task docker job and waits for its alloc to
// run and the task's first output; it returns the alloc and the container.
func runningDockerTask(t *testing.T, a *testAgent, jobID, src, firstLog string) (alloc harness.Alloc, container string) {
	t.Helper()
	a.MustCLI("job", "run", "-detach", writeJobFile(t, src))
	harness.WaitFor(t, waitTimeout, "the docker task to run and log", func() (bool, string) {
		allocs := a.AllocsOf(jobID)
		if len(allocs) != 1 || allocs[0].ClientStatus != "running" {
			return false, fmt.Sprintf("%+v", allocs)
		}
		alloc = allocs[0]
		logs := a.CLI("alloc", "logs", alloc.ID)
		return strings.HasPrefix(logs.Stdout, firstLog), logs.String()
	})
	ids := containersLabelled(t, "com.drover.alloc_id", alloc.ID)
	if len(ids) != 1 {
		t.Fatalf("containers of alloc %s: %v, want 1", alloc.ID, ids)
	}
	removeContainersOf(t, alloc.ID)
	return alloc, ids[0]
}

// The engine goes away under a running service task: drover keeps the
// task running (the container still runs), and once the engine is back
// the task's logs continue and `job stop` stops and removes the container,
// the task dead with the kill's exit (busybox sh as PID 1 ignores SIGTERM:
// killed after kill_timeout, exit code 137, signal 9).
func TestDockerEngineOutageThenStop(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a, proxy := startOutageAgent(t)
	alloc, container := runningDockerTask(t, a, "docker-outage-stop", outageServiceJob("docker-outage-stop", `echo ready; i=0; while true; do sleep 0.2; i=$((i+1)); echo tick $i; done`), "ready\n")

	proxy.Stop()
	staysRunningInDrover(t, a, alloc.ID, "t", 5*time.Second)
	if running, _ := containerState(t, container); !running {
		t.Fatal("the container stopped with the engine's socket")
	}
	// The driver is unhealthy meanwhile; the task is untouched by that.
	harness.WaitFor(t, fingerprintPeriod+20*time.Second, "the docker driver to turn unhealthy", func() (bool, string) {
		var node struct {
			Drivers map[string]struct{ Healthy bool }
		}
		a.MustGet("/v1/node/"+a.NodeID(), &node)
		return !node.Drivers["docker"].Healthy, fmt.Sprintf("%+v", node)
	})
	staysRunningInDrover(t, a, alloc.ID, "t", time.Second)
	before := strings.Count(a.MustCLI("alloc", "logs", alloc.ID).Stdout, "tick")

	proxy.Start()
	// The log copy resumes: ticks written during and after the outage
	// reach `alloc logs`, each once, in order.
	harness.WaitFor(t, waitTimeout, "the task's logs to continue", func() (bool, string) {
		logs := a.CLI("alloc", "logs", alloc.ID)
		return strings.Count(logs.Stdout, "tick") > before+10, logs.String()
	})
	logs := a.MustCLI("alloc", "logs", alloc.ID).Stdout
	lines := strings.Split(strings.TrimSuffix(logs, "\n"), "\n")
	if lines[0] != "ready" {
		t.Fatalf("first log line %q, want ready", lines[0])
	}
	for i, l := range lines[1:] {
		if want := fmt.Sprintf("tick %d", i+1); l != want {
			t.Fatalf("log line %d = %q, want %q (lost or repeated output across the outage)\n%s", i+1, l, want, logs)
		}
	}

	a.MustCLI("job", "stop", "docker-outage-stop")
	harness.WaitFor(t, waitTimeout, "the task to be dead and the alloc complete", func() (bool, string) {
		cs, st, failed := allocTask(t, a, alloc.ID, "t")
		return cs == "complete" && st == "dead" && !failed, fmt.Sprintf("alloc %s, task %s, failed %v", cs, st, failed)
	})
	var sawKill bool
	events := taskEvents(t, a, alloc.ID, "t")
	for _, ev := range events {
		if ev.Type == "Terminated" && strings.Contains(ev.DisplayMessage+ev.Message, "Exit Code: 137, Signal: 9") {
			sawKill = true
		}
	}
	if !sawKill {
		t.Errorf("task events %+v: no Terminated event with the kill's exit (Exit Code: 137, Signal: 9)", events)
	}
	harness.WaitFor(t, waitTimeout, "the container to be removed", func() (bool, string) {
		ids := containersLabelled(t, "com.drover.alloc_id", alloc.ID)
		return len(ids) == 0, fmt.Sprint(ids)
	})
}

// The container of a running batch task exits with code 7 while the
// engine is away from drover (told so with `docker exec` on the engine's
// own socket): drover still reports the task running, since it cannot
// know; once the engine is back it reports the real exit code 7, the
// output written during the outage is in the logs, and the task is not
// started again.
func TestDockerEngineOutageExitCode(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a, proxy := startOutageAgent(t)
	alloc, container := runningDockerTask(t, a, "docker-outage-exit", outageJob("docker-outage-exit", `echo before; while [ ! -f /local/go ]; do sleep 0.05; done; echo during; exit 7`), "before\n")

	proxy.Stop()
	staysRunningInDrover(t, a, alloc.ID, "t", 2*time.Second)
	if out, err := exec.Command("docker", "exec", container, "touch", "/local/go").CombinedOutput(); err != nil {
		t.Fatalf("docker exec: %v: %s", err, out)
	}
	harness.WaitFor(t, waitTimeout, "the container to exit 7 on the engine", func() (bool, string) {
		running, code := containerState(t, container)
		return !running && code == 7, fmt.Sprintf("running %v, exit code %d", running, code)
	})
	staysRunningInDrover(t, a, alloc.ID, "t", 5*time.Second)

	proxy.Start()
	harness.WaitFor(t, waitTimeout, "the task to be reported failed with the container's exit", func() (bool, string) {
		cs, st, failed := allocTask(t, a, alloc.ID, "t")
		return cs == "failed" && st == "dead" && failed, fmt.Sprintf("alloc %s, task %s, failed %v", cs, st, failed)
	})
	events := taskEvents(t, a, alloc.ID, "t")
	var terminated []string
	for _, ev := range events {
		switch ev.Type {
		case "Terminated":
			terminated = append(terminated, ev.DisplayMessage)
		case "Started":
			if len(terminated) > 0 {
				t.Errorf("the task was started again after it exited: %+v", events)
			}
		}
	}
	if len(terminated) != 1 || !strings.HasPrefix(terminated[0], "Exit Code: 7") || strings.Contains(terminated[0], "Exit Message") {
		t.Errorf("Terminated events %q, want one with Exit Code: 7 and no error (events %+v)", terminated, events)
	}
	if logs := a.MustCLI("alloc", "logs", alloc.ID); logs.Stdout != "before\nduring\n" {
		t.Errorf("alloc logs = %q, want the output of before and during the outage, once", logs.Stdout)
	}
}

// `job stop` while the engine is away: drover cannot reach the container,
// so the task stays running (the stop is pending, not forgotten); when the
// engine is back the stop reaches the container, which is killed and
// removed, and the task is dead.
func TestDockerEngineOutageStopDuringOutage(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a, proxy := startOutageAgent(t)
	alloc, container := runningDockerTask(t, a, "docker-outage-stop-during", outageServiceJob("docker-outage-stop-during", `echo ready; sleep 1000 & wait`), "ready\n")

	proxy.Stop()
	a.MustCLI("job", "stop", "-detach", "docker-outage-stop-during")
	harness.WaitFor(t, waitTimeout, "the alloc to be told to stop", func() (bool, string) {
		allocs := a.AllocsOf("docker-outage-stop-during")
		return len(allocs) == 1 && allocs[0].DesiredStatus == "stop", fmt.Sprintf("%+v", allocs)
	})
	staysRunningInDrover(t, a, alloc.ID, "t", 3*time.Second)
	if running, _ := containerState(t, container); !running {
		t.Fatal("the container stopped while the engine was away from drover")
	}

	proxy.Start()
	harness.WaitFor(t, waitTimeout, "the task to be dead and the alloc complete", func() (bool, string) {
		cs, st, failed := allocTask(t, a, alloc.ID, "t")
		return cs == "complete" && st == "dead" && !failed, fmt.Sprintf("alloc %s, task %s, failed %v", cs, st, failed)
	})
	harness.WaitFor(t, waitTimeout, "the container to be removed", func() (bool, string) {
		ids := containersLabelled(t, "com.drover.alloc_id", alloc.ID)
		return len(ids) == 0, fmt.Sprint(ids)
	})
}

// An engine away for longer than engine_outage_timeout (3s here) ends the
// task with an event that names the outage, and with no restart left the
// alloc fails (so a reschedule policy could move it); the container, still
// running in the engine, is removed once the engine answers again.
func TestDockerEngineOutageTimeout(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a, proxy := startOutageAgent(t, "    engine_outage_timeout = \"3s\"\n")
	alloc, container := runningDockerTask(t, a, "docker-outage-timeout", outageJob("docker-outage-timeout", `echo ready; sleep 1000 & wait`), "ready\n")

	proxy.Stop()
	harness.WaitFor(t, waitTimeout, "the task to fail on the outage", func() (bool, string) {
		cs, st, failed := allocTask(t, a, alloc.ID, "t")
		return cs == "failed" && st == "dead" && failed, fmt.Sprintf("alloc %s, task %s, failed %v", cs, st, failed)
	})
	var msg string
	for _, ev := range taskEvents(t, a, alloc.ID, "t") {
		if ev.Type == "Terminated" {
			msg = ev.DisplayMessage
		}
	}
	if !strings.Contains(msg, "docker engine unreachable for") || !strings.Contains(msg, "engine_outage_timeout 3s") {
		t.Errorf("Terminated event = %q, want the outage named", msg)
	}
	if running, _ := containerState(t, container); !running {
		t.Fatal("the container stopped; the test needs it running through the outage")
	}

	proxy.Start()
	harness.WaitFor(t, waitTimeout, "the container to be removed once the engine answers", func() (bool, string) {
		ids := containersLabelled(t, "com.drover.alloc_id", alloc.ID)
		return len(ids) == 0, fmt.Sprint(ids)
	})
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// The docker driver's end-to-end tests need a Docker engine and Debian's
// busybox-static; without them they skip with the reason. The image is
// built locally (no registry is reachable): FROM scratch around busybox.
const e2eBusybox = "drover-e2e/busybox:latest"

var (
	dockerImageOnce sync.Once
	dockerImageErr  error
)

func needDockerImage(t *testing.T) {
	t.Helper()
	dockerImageOnce.Do(func() {
		if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
			dockerImageErr = fmt.Errorf("no docker engine: %v: %s", err, strings.TrimSpace(string(out)))
			return
		}
		bb, err := os.ReadFile("/bin/busybox")
		if err != nil {
			dockerImageErr = fmt.Errorf("/bin/busybox is needed for the test image (apt-get install busybox-static): %v", err)
			return
		}
		dir, err := os.MkdirTemp("", "drover-e2e-image")
		if err != nil {
			dockerImageErr = err
			return
		}
		defer os.RemoveAll(dir)
		df := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nENV PATH=/bin\n"
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
			dockerImageErr = err
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
			dockerImageErr = err
			return
		}
		cmd := exec.Command("docker", "build", "-q", "-t", e2eBusybox, dir)
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			dockerImageErr = fmt.Errorf("docker build: %v: %s", err, out)
		}
	})
	if dockerImageErr != nil {
		t.Skipf("skipping docker driver test: %v", dockerImageErr)
	}
}

// startDockerAgent starts a dev agent whose docker driver keeps images:
// the shared test image must survive any one test's agent.
func startDockerAgent(t *testing.T) *testAgent {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "docker.hcl")
	if err := os.WriteFile(cfg, []byte("plugin \"docker\" {\n  config {\n    gc {\n      image = false\n    }\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return startAgent(t, "-config", cfg)
}

func writeJobFile(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// containersLabelled lists the engine's containers (running or not) whose
// label key=value, as `docker ps` ids.
func containersLabelled(t *testing.T, key, value string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+key+"="+value).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// A sysbatch job of a docker task runs to completion on the node, and its
// output is read with `drover alloc logs` like any task's.
func TestDockerSysbatchJob(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startDockerAgent(t)
	job := writeJobFile(t, `job "docker-sysbatch" {
  type        = "sysbatch"
  datacenters = ["*"]
  group "g" {
    task "hello" {
      driver = "docker"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "echo hello from docker $NOMAD_ALLOC_NAME in $NOMAD_ALLOC_DIR; echo to-stderr >&2"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`)
	a.MustCLI("job", "run", job)
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the docker alloc to complete", func() (bool, string) {
		allocs = a.AllocsOf("docker-sysbatch")
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	logs := a.MustCLI("alloc", "logs", allocs[0].ID)
	if want := "hello from docker docker-sysbatch.g[0] in /alloc"; !strings.Contains(logs.Stdout, want) {
		t.Errorf("alloc logs = %s; want %q", logs, want)
	}
	if errs := a.MustCLI("alloc", "logs", "-stderr", allocs[0].ID); !strings.Contains(errs.Stdout, "to-stderr") {
		t.Errorf("alloc logs -stderr = %s", errs)
	}
}

// A system job of a long-running docker task stays running, in one
// labelled container, and `job stop` stops it and removes the container.
func TestDockerSystemJobStop(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startDockerAgent(t)
	job := writeJobFile(t, `job "docker-system" {
  type        = "system"
  datacenters = ["*"]
  group "g" {
    task "sleeper" {
      driver       = "docker"
      kill_timeout = "2s"
      config {
        image   = "`+e2eBusybox+`"
        command = "sleep"
        args    = ["1000"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`)
	a.MustCLI("job", "run", job)
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the docker alloc to run", func() (bool, string) {
		allocs = a.AllocsOf("docker-system")
		return len(allocs) == 1 && allocs[0].ClientStatus == "running", fmt.Sprintf("%+v", allocs)
	})
	allocID := allocs[0].ID
	t.Cleanup(func() {
		for _, id := range containersLabelled(t, "com.drover.alloc_id", allocID) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
	})
	if ids := containersLabelled(t, "com.drover.alloc_id", allocID); len(ids) != 1 {
		t.Fatalf("containers of alloc %s: %v, want 1", allocID, ids)
	}
	// Still running later: a system job's task does not finish.
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.Running}} {{index .Config.Labels \"com.drover.task_name\"}}",
		containersLabelled(t, "com.drover.alloc_id", allocID)[0]).Output()
	if err != nil || strings.TrimSpace(string(out)) != "true sleeper" {
		t.Fatalf("container state = %q, %v", out, err)
	}

	a.MustCLI("job", "stop", "docker-system")
	harness.WaitFor(t, waitTimeout, "the alloc to stop and its container to be removed", func() (bool, string) {
		allocs = a.AllocsOf("docker-system")
		ids := containersLabelled(t, "com.drover.alloc_id", allocID)
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete" && len(ids) == 0,
			fmt.Sprintf("allocs %+v, containers %v", allocs, ids)
	})
}

// The node reports the docker driver's health from the engine, and the
// scheduler places docker tasks only where it is healthy.
func TestDockerDriverHealth(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startDockerAgent(t)
	var nodes []harness.NodeStub
	harness.WaitFor(t, waitTimeout, "the node to report a healthy docker driver", func() (bool, string) {
		a.MustGet("/v1/nodes", &nodes)
		return len(nodes) == 1 && nodes[0].Drivers["docker"].Healthy && nodes[0].Drivers["docker"].Detected, fmt.Sprintf("%+v", nodes)
	})

	// An agent whose docker endpoint is a missing socket: the driver is
	// undetected, and a docker job is not placed (a raw_exec one is).
	cfg := filepath.Join(t.TempDir(), "docker.hcl")
	if err := os.WriteFile(cfg, []byte("plugin \"docker\" {\n  config {\n    endpoint = \"unix://"+t.TempDir()+"/gone.sock\"\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startAgent(t, "-config", cfg)
	harness.WaitFor(t, waitTimeout, "the node to report docker undetected", func() (bool, string) {
		b.MustGet("/v1/nodes", &nodes)
		d, ok := nodes[0].Drivers["docker"]
		return len(nodes) == 1 && ok && !d.Detected && !d.Healthy && nodes[0].Drivers["raw_exec"].Healthy, fmt.Sprintf("%+v", nodes)
	})
	job := writeJobFile(t, `job "docker-nowhere" {
  type        = "sysbatch"
  datacenters = ["*"]
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image = "`+e2eBusybox+`"
      }
    }
  }
}
`)
	run := b.CLI("job", "run", job)
	if !strings.Contains(run.Stdout+run.Stderr, "missing drivers") {
		t.Errorf("job run on a node without docker did not report the placement failure:\n%s", run)
	}
	if allocs := b.AllocsOf("docker-nowhere"); len(allocs) != 0 {
		t.Errorf("allocs placed on a node without a healthy docker driver: %+v", allocs)
	}
}

// taskEvents reads the alloc's task events for one task.
func taskEvents(t *testing.T, a *testAgent, allocID, task string) []struct{ Type, DisplayMessage, Message string } {
	t.Helper()
	var alloc struct {
		TaskStates map[string]struct {
			State  string
			Events []struct{ Type, DisplayMessage, Message string }
		}
	}
	a.MustGet("/v1/allocation/"+allocID, &alloc)
	return alloc.TaskStates[task].Events
}

// A docker task over its memory limit is OOM killed, which the user sees
// as a task event; an image that cannot be pulled fails the task with an
// event that says so.
func TestDockerTaskEvents(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startDockerAgent(t)
	job := writeJobFile(t, `job "docker-events" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "hog" {
      driver = "docker"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        # A 256 MB shell variable in a 32 MB container.
        args    = ["-c", "x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo survived $${#x}"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
  # A group of its own: a failed sibling would kill the hog before its
  # memory ran out.
  group "p" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "nopull" {
      driver = "docker"
      config {
        image = "drover-e2e/no-such-image:nope"
      }
    }
  }
}
`)
	if run := a.CLI("job", "run", job); !strings.Contains(run.Stdout, "Allocation") {
		t.Fatalf("job run:\n%s", run)
	}
	var allocs []harness.Alloc
	byTask := map[string]string{} // task -> its alloc
	harness.WaitFor(t, waitTimeout, "both tasks to fail", func() (bool, string) {
		allocs = a.AllocsOf("docker-events")
		for _, al := range allocs {
			for name, st := range al.TaskStates {
				if st != nil && st.State == "dead" {
					byTask[name] = al.ID
				}
			}
		}
		return byTask["hog"] != "" && byTask["nopull"] != "", fmt.Sprintf("%+v", allocs)
	})
	var sawOOM bool
	hogEvents := taskEvents(t, a, byTask["hog"], "hog")
	for _, ev := range hogEvents {
		if ev.Type == "Terminated" && strings.Contains(ev.DisplayMessage+ev.Message, "OOM Killed") {
			sawOOM = true
		}
	}
	if !sawOOM {
		t.Errorf("hog events %+v: no Terminated event saying OOM Killed", hogEvents)
	}
	var sawPull bool
	pullEvents := taskEvents(t, a, byTask["nopull"], "nopull")
	for _, ev := range pullEvents {
		if ev.Type == "Driver Failure" && strings.Contains(ev.DisplayMessage+ev.Message, `failed to pull image "drover-e2e/no-such-image:nope"`) {
			sawPull = true
		}
	}
	if !sawPull {
		t.Errorf("nopull events %+v: no Driver Failure naming the image pull", pullEvents)
	}
}

// The docker plugin process is SIGKILLed while a system job's container
// runs: the agent restarts the plugin, the client recovers the task on
// it, and the container neither stops nor doubles; the recovered task
// still logs and is stopped by `job stop`.
func TestDockerTaskSurvivesPluginKill(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startDockerAgent(t)
	job := writeJobFile(t, `job "docker-survivor" {
  type        = "system"
  datacenters = ["*"]
  group "g" {
    task "survivor" {
      driver       = "docker"
      kill_timeout = "1s"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "echo first; while [ ! -f /local/go ]; do sleep 0.05; done; echo second; sleep 1000"]
      }
    }
  }
}
`)
	a.MustCLI("job", "run", job)
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the docker alloc to run and log", func() (bool, string) {
		allocs = a.AllocsOf("docker-survivor")
		if len(allocs) != 1 || allocs[0].ClientStatus != "running" {
			return false, fmt.Sprintf("%+v", allocs)
		}
		logs := a.CLI("alloc", "logs", allocs[0].ID)
		return logs.Stdout == "first\n", logs.String()
	})
	allocID := allocs[0].ID
	t.Cleanup(func() {
		for _, id := range containersLabelled(t, "com.drover.alloc_id", allocID) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
	})
	before := containersLabelled(t, "com.drover.alloc_id", allocID)
	if len(before) != 1 {
		t.Fatalf("containers before the kill: %v", before)
	}
	plug, ok := harness.ChildPlugin(a.PID(), "driver-docker")
	if !ok {
		t.Fatalf("no driver-docker plugin under agent %d", a.PID())
	}
	if err := syscall.Kill(plug.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, waitTimeout, "the docker plugin to come back", func() (bool, string) {
		p, ok := harness.ChildPlugin(a.PID(), "driver-docker")
		return ok && p.PID != plug.PID, fmt.Sprintf("plugin: %v (killed %d)", p, plug.PID)
	})

	// Release the task: its later output reaches the logs through the new
	// plugin process, once.
	out, err := exec.Command("docker", "inspect", "-f", `{{range .Mounts}}{{if eq .Destination "/local"}}{{.Source}}{{end}}{{end}}`, before[0]).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("the container's /local source: %q, %v", out, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, waitTimeout, "the recovered task's later output", func() (bool, string) {
		logs := a.CLI("alloc", "logs", allocID)
		return logs.Stdout == "first\nsecond\n", logs.String()
	})
	if after := containersLabelled(t, "com.drover.alloc_id", allocID); len(after) != 1 || after[0] != before[0] {
		t.Fatalf("containers after the plugin restart: %v, want the same one %v", after, before)
	}
	if allocs = a.AllocsOf("docker-survivor"); len(allocs) != 1 || allocs[0].ClientStatus != "running" {
		t.Fatalf("alloc after the plugin restart: %+v", allocs)
	}

	a.MustCLI("job", "stop", "docker-survivor")
	harness.WaitFor(t, waitTimeout, "the container to be removed", func() (bool, string) {
		ids := containersLabelled(t, "com.drover.alloc_id", allocID)
		return len(ids) == 0, fmt.Sprint(ids)
	})
}

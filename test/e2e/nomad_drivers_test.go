package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// The drivers Nomad's own tests and users' job files name, through the
// built binary: exec on a cluster agent, mock_driver in -dev, and the
// docker job `nomad job init` writes.

// hostMountsUnder lists the mount points of this (the host's) mount
// namespace beneath dir.
func hostMountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir) {
			out = append(out, fields[4])
		}
	}
	return out
}

// An exec job on a non-dev agent (exec needs no enabling, as Nomad's):
// the task runs as nobody in its own root and PID namespace, writes the
// allocation's shared data dir, and leaves no mount behind.
func TestExecDriverJob(t *testing.T) {
	t.Parallel()
	a := startClusterAgent(t, "")
	var nodes []struct{ ID string }
	a.MustGet("/v1/nodes", &nodes)
	var node struct {
		Drivers map[string]struct {
			Detected, Healthy bool
			HealthDescription string
		}
	}
	a.MustGet("/v1/node/"+nodes[0].ID, &node)
	if d := node.Drivers["exec"]; !d.Healthy {
		t.Skipf("exec is not usable on this host: %+v", d)
	}
	job := writeJobFile(t, `job "isolated" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    restart {
      attempts = 0
    }
    reschedule {
      attempts = 0
    }
    task "e" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo uid=$(id -u) procs=$(ls /proc | grep -c '^[0-9]') dir=$NOMAD_TASK_DIR; test -e /work || echo no-host-root; echo shared > /alloc/data/out; touch /etc/x 2>/dev/null || echo etc-read-only"]
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
`)
	a.MustCLI("job", "run", job)
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the exec alloc to complete", func() (bool, string) {
		allocs = a.AllocsOf("isolated")
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	logs := a.MustCLI("alloc", "logs", allocs[0].ID)
	for _, want := range []string{"uid=65534 ", "dir=/local", "no-host-root", "etc-read-only"} {
		if !strings.Contains(logs.Stdout, want) {
			t.Errorf("alloc logs lack %q: %s", want, logs)
		}
	}
	for _, f := range strings.Fields(logs.Stdout) {
		if n, ok := strings.CutPrefix(f, "procs="); ok && len(n) != 1 {
			t.Errorf("the task sees %s processes: not its own PID namespace", n)
		}
	}
	if m := hostMountsUnder(t, a.DataDir); len(m) != 0 {
		t.Errorf("mounts left beneath the agent's data dir: %v", m)
	}
}

// In -dev, a job written for Nomad's tests runs on mock_driver unchanged.
func TestMockDriverJob(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	job := writeJobFile(t, `job "mock" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    task "t" {
      driver = "mock_driver"
      config {
        run_for                = "200ms"
        exit_code              = 0
        stdout_string          = "mock says hi\n"
        stdout_repeat          = 2
        stdout_repeat_duration = "10ms"
      }
    }
  }
}
`)
	a.MustCLI("job", "run", job)
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the mock alloc to complete", func() (bool, string) {
		allocs = a.AllocsOf("mock")
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	if logs := a.MustCLI("alloc", "logs", allocs[0].ID); strings.Count(logs.Stdout, "mock says hi\n") != 3 {
		t.Errorf("alloc logs = %s; want the string three times", logs)
	}
}

// The job `nomad job init -short` writes (Nomad 1.6) is accepted as it
// stands; with no registry reachable its task fails on the image pull,
// which the task's events say, not on its config.
func TestNomadJobInitJob(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	if exec.Command("docker", "image", "inspect", "redis:7").Run() == nil {
		t.Skip("redis:7 is in this engine: the pull whose failure this test checks is not tried")
	}
	a := startDockerAgent(t)
	job := writeJobFile(t, `job "example" {
  datacenters = ["*"]
  group "cache" {
    network {
      port "db" {
        to = 6379
      }
    }
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "redis" {
      driver = "docker"
      config {
        image          = "redis:7"
        ports          = ["db"]
        auth_soft_fail = true
      }
      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
`)
	a.MustCLI("job", "validate", job)
	a.MustCLI("job", "run", "-detach", job)
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the redis alloc to fail", func() (bool, string) {
		allocs = a.AllocsOf("example")
		return len(allocs) >= 1 && allocs[0].ClientStatus == "failed", fmt.Sprintf("%+v", allocs)
	})
	status, body, err := a.Raw(http.MethodGet, "/v1/allocation/"+allocs[0].ID, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET allocation: %d %v", status, err)
	}
	if s := string(body); !strings.Contains(s, `failed to pull image \"redis:7\"`) || strings.Contains(s, "unknown field") {
		t.Errorf("the task's events do not name the pull's failure: %s", s)
	}
}

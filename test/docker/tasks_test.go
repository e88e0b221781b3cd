package docker

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// dockerJob is a job of one docker task named taskName, on the suite's own
// image (its /bin/sh is busybox), running sh -c script.
func dockerJob(id, typ, script string) string {
	return fmt.Sprintf(`job %q {
  type        = %q
  datacenters = ["*"]

  group "g" {
    task %q {
      driver       = "docker"
      kill_timeout = "1s"
      config {
        image   = %q
        command = "/bin/sh"
        args    = ["-c", %q]
      }
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`, id, typ, taskName, image, script)
}

// taskContainers lists the host engine's containers of the alloc (running
// or not).
func taskContainers(t *testing.T, allocID string) []string {
	t.Helper()
	out, err := docker("ps", "-aq", "--filter", "label=com.drover.alloc_id="+allocID)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// removeTaskContainers removes, at cleanup, whatever containers the
// allocs left on the host engine: they carry the driver's labels, not the
// suite's, so the suite's teardown would not find them.
func removeTaskContainers(t *testing.T, allocs map[string]harness.Alloc) {
	t.Cleanup(func() {
		for _, a := range allocs {
			if ids := taskContainers(t, a.ID); len(ids) > 0 {
				_, _ = docker(append([]string{"rm", "-f"}, ids...)...)
			}
		}
	})
}

// waitDockerHealthy waits until every client's node reports a healthy
// docker driver: the engine is the host's, through the mounted socket.
func (c *cluster) waitDockerHealthy(via *agent) {
	c.t.Helper()
	c.waitFor("every client's docker driver healthy", waitTimeout, func() (bool, string) {
		ns, err := nodes(via)
		if err != nil {
			return false, err.Error()
		}
		healthy := 0
		for _, n := range ns {
			if n.Drivers["docker"].Healthy {
				healthy++
			}
		}
		return healthy == len(c.clients), fmt.Sprintf("%+v", ns)
	})
}

// A sysbatch job and a system job of docker tasks on a cluster whose
// clients run in containers and drive the host's engine: the sysbatch task
// runs once on every client and its output is read through a server; the
// system task runs on every client in one container each, and stopping
// the job stops them and removes the containers.
func TestDockerTasksOnClients(t *testing.T) {
	c := newDockerTaskCluster(t, "dtask")
	via := c.servers[1]
	c.waitDockerHealthy(via)

	c.registerHCL(via, "docker-sb", dockerJob("docker-sb", "sysbatch", "echo docker hi from $NOMAD_ALLOC_NAME in $NOMAD_TASK_DIR"))
	done := c.waitComplete(via, "docker-sb")
	removeTaskContainers(t, done)
	for node, a := range done {
		c.waitFor(node+"'s docker task output", waitTimeout, func() (bool, string) {
			out, err := allocStdout(via, a.ID)
			return err == nil && out == "docker hi from docker-sb.g[0] in /local\n", fmt.Sprintf("%q, %v", out, err)
		})
	}

	c.registerHCL(via, "docker-sys", dockerJob("docker-sys", "system", "echo up; exec sleep 1000"))
	nodeNames := c.clientNodeIDs()
	running := map[string]harness.Alloc{}
	removeTaskContainers(t, running)
	c.waitFor("the system job running on every client", waitTimeout, func() (bool, string) {
		var allocs []harness.Alloc
		status, err := via.Do(http.MethodGet, "/v1/job/docker-sys/allocations", nil, &allocs)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("status %d, %v", status, err)
		}
		var seen []string
		for _, a := range allocs {
			seen = append(seen, fmt.Sprintf("%s on %s: %s", a.ID[:8], nodeNames[a.NodeID], a.ClientStatus))
			if a.ClientStatus == "running" {
				running[nodeNames[a.NodeID]] = a
			}
		}
		sort.Strings(seen)
		return len(allocs) == len(c.clients) && len(running) == len(c.clients), fmt.Sprint(seen)
	})
	for node, a := range running {
		c.waitFor(node+"'s system task output", waitTimeout, func() (bool, string) {
			out, err := allocStdout(via, a.ID)
			return err == nil && out == "up\n", fmt.Sprintf("%q, %v", out, err)
		})
		ids := taskContainers(t, a.ID)
		if len(ids) != 1 {
			t.Fatalf("%s's alloc %s has containers %v on the engine, want one", node, a.ID, ids)
		}
		state, err := docker("inspect", "-f", `{{.State.Running}} {{index .Config.Labels "com.drover.task_name"}}`, ids[0])
		if err != nil || state != "true "+taskName {
			t.Fatalf("%s's container: %q, %v", node, state, err)
		}
	}

	status, body, err := via.Raw(http.MethodDelete, "/v1/job/docker-sys", nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("stop docker-sys: status %d, %v: %s", status, err, body)
	}
	c.waitFor("the system job's containers to be removed", waitTimeout, func() (bool, string) {
		var left []string
		for node, a := range running {
			if ids := taskContainers(t, a.ID); len(ids) > 0 {
				left = append(left, fmt.Sprintf("%s: %v", node, ids))
			}
		}
		return len(left) == 0, fmt.Sprint(left)
	})
}

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/plugins/driver-docker/dockerproxy"
	"github.com/drover-org/drover/test/internal/harness"
)

// fingerprintPeriod is the test agent's client fingerprint_interval (the
// default is 30s): a change of the engine shows within one of them.
const fingerprintPeriod = 2 * time.Second

// The engine goes away under a running agent: within a fingerprint period
// the node reports its docker driver unhealthy, and a docker job is not
// placed on it. The engine comes back: the driver is healthy again and the
// pending job places and runs.
func TestDockerEngineGoneAndBack(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	proxy := dockerproxy.New(t)
	cfg := filepath.Join(t.TempDir(), "docker.hcl")
	if err := os.WriteFile(cfg, []byte("client {\n  fingerprint_interval = \""+fingerprintPeriod.String()+"\"\n}\nplugin \"docker\" {\n  config {\n    endpoint = \"unix://"+proxy.Path()+"\"\n    gc {\n      image = false\n    }\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, "-config", cfg)
	docker := func() (struct{ Detected, Healthy bool }, string) {
		var nodes []harness.NodeStub
		a.MustGet("/v1/nodes", &nodes)
		if len(nodes) != 1 {
			return struct{ Detected, Healthy bool }{}, fmt.Sprintf("%+v", nodes)
		}
		return nodes[0].Drivers["docker"], fmt.Sprintf("%+v", nodes[0])
	}
	harness.WaitFor(t, waitTimeout, "a healthy docker driver through the proxy", func() (bool, string) {
		d, s := docker()
		return d.Healthy, s
	})

	proxy.Stop()
	gone := time.Now()
	// One period for the next fingerprint, and slack for a loaded machine.
	harness.WaitFor(t, fingerprintPeriod+20*time.Second, "the docker driver to turn unhealthy", func() (bool, string) {
		d, s := docker()
		return !d.Healthy, s
	})
	t.Logf("docker unhealthy %s after the engine went away", time.Since(gone).Round(time.Millisecond))
	// The health description names the cause.
	var node struct {
		Drivers map[string]struct {
			Healthy           bool
			HealthDescription string
		}
	}
	a.MustGet("/v1/node/"+a.NodeID(), &node)
	if desc := node.Drivers["docker"].HealthDescription; !strings.Contains(desc, "Failed to connect to the docker engine at unix://"+proxy.Path()) {
		t.Errorf("docker health description = %q", desc)
	}

	job := writeJobFile(t, `job "docker-pending" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "echo placed after all"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`)
	a.MustCLI("job", "run", "-detach", job)
	harness.WaitFor(t, waitTimeout, "the job's placement to fail on the missing driver", func() (bool, string) {
		status := a.CLI("job", "status", "docker-pending")
		return strings.Contains(status.Stdout, "missing drivers"), status.String()
	})
	if allocs := a.AllocsOf("docker-pending"); len(allocs) != 0 {
		t.Fatalf("allocs placed while the engine was away: %+v", allocs)
	}

	proxy.Start()
	back := time.Now()
	harness.WaitFor(t, fingerprintPeriod+20*time.Second, "the docker driver to be healthy again", func() (bool, string) {
		d, s := docker()
		return d.Healthy && d.Detected, s
	})
	t.Logf("docker healthy %s after the engine came back", time.Since(back).Round(time.Millisecond))
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the pending job to place and complete", func() (bool, string) {
		allocs = a.AllocsOf("docker-pending")
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	if logs := a.MustCLI("alloc", "logs", allocs[0].ID); logs.Stdout != "placed after all\n" {
		t.Errorf("alloc logs = %q", logs.Stdout)
	}
}

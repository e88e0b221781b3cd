package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// consulStyleJob is written as for Nomad with Consul: its service names
// no provider, and a second task reads it with Consul's service function.
const consulStyleJob = `job %q {
  datacenters = ["*"]

  group "g" {
    network {
      port "http" {}
    }

    service {
      name = "%s"
      port = "http"
      tags = ["v1"]
    }

    task "web" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 600"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }

    task "reader" {
      driver = "raw_exec"

      template {
        data        = "{{ range service \"v1.%s\" }}upstream={{ .Address }}:{{ .Port }} status={{ .Status }}\n{{ end }}"
        destination = "local/upstream.conf"
        change_mode = "restart"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "cat local/upstream.conf; exec sleep 600"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// consulProviderJob names provider "consul", which drover refuses
// whatever the servers' default.
const consulProviderJob = `job "e2e-consul-provider" {
  group "g" {
    service {
      name     = "x"
      provider = "consul"
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }
    }
  }
}
`

// With server { default_service_provider = "nomad" }, a job written for
// Nomad with Consul runs: its provider-less service is registered in
// drover's catalogue, and a template reading it with Consul's service
// function renders its address. A service naming provider "consul" is
// still refused, at its block in the job file.
func TestDefaultServiceProviderNomad(t *testing.T) {
	t.Parallel()
	cfg := harness.WriteFile(t, "provider.hcl", "server {\n  default_service_provider = \"nomad\"\n}\n")
	a := startAgent(t, "-config", cfg)
	const job, svc = "e2e-consul-style", "e2e-consul-style-web"
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, job+".hcl", fmt.Sprintf(consulStyleJob, job, svc, svc)))
	running := a.waitServiceRunning(job, 1, 0)

	var regs []serviceRegistrationJSON
	harness.WaitFor(t, waitTimeout, svc+" registered", func() (bool, string) {
		regs = nil
		status, err := a.Do(http.MethodGet, "/v1/service/"+svc, nil, &regs)
		return err == nil && status == http.StatusOK && len(regs) == 1, fmt.Sprintf("%d %v %+v", status, err, regs)
	})
	if regs[0].AllocID != running[0].ID || regs[0].Port == 0 {
		t.Errorf("registration %+v, want alloc %s with a port", regs[0], running[0].ID)
	}
	want := fmt.Sprintf("upstream=%s:%d status=passing", regs[0].Address, regs[0].Port)
	harness.WaitFor(t, waitTimeout, "the reader's rendered upstream", func() (bool, string) {
		res := a.CLI("alloc", "logs", running[0].ID, "reader")
		return strings.Contains(res.Stdout, want), res.Stdout + res.Stderr
	})
	var inspected struct {
		TaskGroups []struct{ Services []struct{ Provider string } }
	}
	if status, err := a.Do(http.MethodGet, "/v1/job/"+job, nil, &inspected); err != nil || status != http.StatusOK ||
		len(inspected.TaskGroups) != 1 || len(inspected.TaskGroups[0].Services) != 1 || inspected.TaskGroups[0].Services[0].Provider != "nomad" {
		t.Errorf("registered job: %d %v %+v, want its service's provider resolved to nomad", status, err, inspected)
	}
	a.MustCLI("job", "stop", job)

	res := a.CLI("job", "run", "-detach", harness.WriteFile(t, "consul-provider.hcl", consulProviderJob))
	if res.Code == 0 || !strings.Contains(res.Stderr, `consul-provider.hcl:3:5: group "g": service "x": provider "consul" needs Consul`) {
		t.Errorf("job run of a provider = \"consul\" service: %s\nwant a refusal at the service block", res)
	}
}

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/test/internal/harness"
)

// networkJob serves HTTP from a raw_exec task on its group's dynamic port
// "http" and asks for a second, static port, both from the network block.
const networkJob = `job %q {
  datacenters = ["*"]

  group "g" {
    network {
      port "http" {}
      port "fixed" {
        static = %d
      }
    }

    task "web" {
      driver = "raw_exec"

      config {
        command = %q
        args    = ["-m", "http.server", "${NOMAD_PORT_http}", "--bind", "${NOMAD_IP_http}", "--directory", "${NOMAD_TASK_DIR}"]
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`

// A service job on the dev agent whose task listens on $NOMAD_PORT_http:
// the alloc holds a dynamic port in Nomad's range on the node's (loopback)
// address and the static one, the HTTP API shows both in
// AllocatedResources.Shared.Ports, the task answers at that address, and
// `drover alloc status` lists them under Allocation Addresses.
func TestNetworkPortsOnDevAgent(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the task needs an HTTP server to run")
	}
	a := startAgent(t)
	nc := a.nomadClient()
	const id, static = "e2e-net", 28411
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, id+".hcl", fmt.Sprintf(networkJob, id, static, py)))
	running := a.waitServiceRunning(id, 1, 0)

	al, _, err := nc.Allocations().Info(running[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{}
	var ip string
	for _, p := range al.AllocatedResources.Shared.Ports {
		ports[p.Label] = p.Value
		ip = p.HostIP
	}
	if len(ports) != 2 || ports["fixed"] != static || ports["http"] < 20000 || ports["http"] > 32000 || ip != "127.0.0.1" {
		t.Fatalf("alloc ports = %+v, want http in 20000-32000 and fixed = %d on 127.0.0.1", al.AllocatedResources.Shared.Ports, static)
	}
	if n := al.AllocatedResources.Shared.Networks; len(n) != 1 || n[0].IP != "127.0.0.1" || len(n[0].DynamicPorts) != 1 || len(n[0].ReservedPorts) != 1 {
		t.Errorf("alloc networks = %+v, want one host network with one dynamic and one reserved port", n)
	}

	addr := fmt.Sprintf("http://%s:%d/", ip, ports["http"])
	harness.WaitFor(t, waitTimeout, "the task answering at "+addr, func() (bool, string) {
		resp, err := http.Get(addr)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	out := a.MustCLI("alloc", "status", running[0].ID).Stdout
	for _, want := range []string{"Allocation Addresses:", "*http", fmt.Sprintf("127.0.0.1:%d", ports["http"]), "*fixed", fmt.Sprintf("127.0.0.1:%d", static)} {
		if !strings.Contains(out, want) {
			t.Errorf("alloc status lacks %q:\n%s", want, out)
		}
	}

	// A second job asking for the same static port cannot share the node.
	const other = "e2e-net-clash"
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, other+".hcl", fmt.Sprintf(networkJob, other, static, py)))
	dim := fmt.Sprintf("network: reserved port collision fixed=%d", static)
	harness.WaitFor(t, waitTimeout, other+": placement failed on the port", func() (bool, string) {
		evals, _, err := nc.Jobs().Evaluations(other, nil)
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evals {
			if m := ev.FailedTGAllocs["g"]; m != nil && m.DimensionExhausted[dim] == 1 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d evals, none failed on %q", len(evals), dim)
	})
	if allocs, _, _ := nc.Jobs().Allocations(other, false, nil); len(allocs) != 0 {
		t.Errorf("%s got %d allocs, want none", other, len(allocs))
	}

	// The official client's job with a network block: its dynamic port is
	// allocated and served like the job file's.
	const apiJob = "e2e-net-api"
	job := nomadapi.NewServiceJob(apiJob, apiJob, "global", 50)
	job.Datacenters = []string{"*"}
	tg := nomadapi.NewTaskGroup("g", 1)
	tg.Networks = []*nomadapi.NetworkResource{{Mode: "host", DynamicPorts: []nomadapi.Port{{Label: "api"}}}}
	task := nomadapi.NewTask("web", "raw_exec")
	task.Config = map[string]any{"command": py, "args": []string{"-m", "http.server", "${NOMAD_PORT_api}", "--bind", "${NOMAD_IP_api}"}}
	cpu, mem := 20, 32
	task.Require(&nomadapi.Resources{CPU: &cpu, MemoryMB: &mem})
	job.AddTaskGroup(tg.AddTask(task))
	if _, _, err := nc.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register through nomad/api: %v", err)
	}
	apiAlloc := a.waitServiceRunning(apiJob, 1, 0)[0]
	info, _, err := nc.Allocations().Info(apiAlloc.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := info.AllocatedResources.Shared.Ports; len(p) != 1 || p[0].Label != "api" || p[0].Value == ports["http"] {
		t.Fatalf("nomad/api job ports = %+v, want one port api, not the first job's", p)
	}
	apiURL := fmt.Sprintf("http://%s:%d/", info.AllocatedResources.Shared.Ports[0].HostIP, info.AllocatedResources.Shared.Ports[0].Value)
	harness.WaitFor(t, waitTimeout, "the nomad/api job answering at "+apiURL, func() (bool, string) {
		resp, err := http.Get(apiURL)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
}

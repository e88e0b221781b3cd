package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// discoveryWebJob serves HTTP from a raw_exec task on its dynamic port;
// a prestart task writes the file the service's http check asks for, a
// template renders the task's port into a file the task serves, and an
// artifact fetched from a local HTTP server (checksum checked) is served
// too.
const discoveryWebJob = `job %q {
  datacenters = ["*"]

  group "g" {
    network {
      port "http" {}
    }

    service {
      name     = "${JOB}-web"
      port     = "http"
      provider = "nomad"
      tags     = ["v1", "web"]

      check {
        type     = "http"
        path     = "/ready.txt"
        interval = "1s"
        timeout  = "2s"
      }
    }

    task "prep" {
      driver = "raw_exec"

      lifecycle {
        hook = "prestart"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo ready > ${NOMAD_ALLOC_DIR}/ready.txt"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }

    task "web" {
      driver = "raw_exec"

      artifact {
        source      = "%s/site/hello.txt"
        destination = "../alloc/site/"
        options {
          checksum = "sha256:%s"
        }
      }

      template {
        data        = "port={{ env \"NOMAD_PORT_http\" }}\n"
        destination = "../alloc/web.conf"
      }

      config {
        command = %q
        args    = ["-m", "http.server", "${NOMAD_PORT_http}", "--bind", "${NOMAD_IP_http}", "--directory", "${NOMAD_ALLOC_DIR}"]
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`

// discoveryReaderJob renders the web service's address into a file with
// nomadService and prints it.
const discoveryReaderJob = `job %q {
  datacenters = ["*"]

  group "g" {
    task "reader" {
      driver = "raw_exec"

      template {
        data        = "{{ range nomadService \"v1.%s\" }}upstream={{ .Address }}:{{ .Port }}\n{{ end }}"
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

// serviceRegistrationJSON is /v1/service/<name>'s entry with drover's
// check results.
type serviceRegistrationJSON struct {
	ID, ServiceName, Namespace, NodeID, Datacenter, JobID, AllocID, Address string
	Port                                                                    int
	Tags                                                                    []string
	Checks                                                                  []struct{ Check, Status, Output string }
}

// A native service on the dev agent: its http check turns passing once the
// prestart task wrote what it asks for, /v1/service/<name> (and the
// official client) shows the registration at the alloc's dynamic port, a
// second job's template renders it with nomadService, and stopping the
// first job deregisters it.
func TestNativeServiceDiscovery(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the task needs an HTTP server to run")
	}
	// The artifact's server.
	const hello = "hello from an artifact\n"
	mux := http.NewServeMux()
	mux.HandleFunc("/site/hello.txt", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, hello) })
	files := httptest.NewServer(mux)
	t.Cleanup(files.Close)
	sum := sha256.Sum256([]byte(hello))

	a := startAgent(t)
	nc := a.nomadClient()
	const web, reader = "e2e-disc-web", "e2e-disc-reader"
	const svc = web + "-web"
	// The reader first: its template waits for the service to exist.
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, reader+".hcl", fmt.Sprintf(discoveryReaderJob, reader, svc)))
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, web+".hcl", fmt.Sprintf(discoveryWebJob, web, files.URL, hex.EncodeToString(sum[:]), py)))
	running := a.waitServiceRunning(web, 1, 0)

	var port int
	var ip string
	al, _, err := nc.Allocations().Info(running[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range al.AllocatedResources.Shared.Ports {
		if p.Label == "http" {
			port, ip = p.Value, p.HostIP
		}
	}
	if port == 0 {
		t.Fatalf("alloc has no http port: %+v", al.AllocatedResources.Shared.Ports)
	}

	var regs []serviceRegistrationJSON
	harness.WaitFor(t, waitTimeout, svc+" registered with a passing check", func() (bool, string) {
		regs = nil
		status, err := a.Do(http.MethodGet, "/v1/service/"+svc, nil, &regs)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		return len(regs) == 1 && len(regs[0].Checks) == 1 && regs[0].Checks[0].Status == "success", fmt.Sprintf("%+v", regs)
	})
	r := regs[0]
	if r.Address != ip || r.Port != port || r.AllocID != running[0].ID || r.JobID != web || r.Namespace != "default" ||
		r.ID != fmt.Sprintf("_nomad-task-%s-group-g-%s-http", running[0].ID, svc) || strings.Join(r.Tags, ",") != "v1,web" {
		t.Errorf("registration %+v, want %s:%d of alloc %s", r, ip, port, running[0].ID)
	}
	// The official client decodes it.
	apiRegs, _, err := nc.Services().Get(svc, nil)
	if err != nil || len(apiRegs) != 1 || apiRegs[0].Port != port || apiRegs[0].ServiceName != svc {
		t.Fatalf("nomad/api Services().Get: %+v, %v", apiRegs, err)
	}

	// The template rendered the task's port into the file it serves.
	conf := fmt.Sprintf("http://%s:%d/web.conf", ip, port)
	resp, err := http.Get(conf)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != fmt.Sprintf("port=%d\n", port) {
		t.Errorf("GET %s = %q", conf, body)
	}

	// The artifact was fetched before the task started.
	site := fmt.Sprintf("http://%s:%d/site/hello.txt", ip, port)
	resp, err = http.Get(site)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != hello {
		t.Errorf("GET %s = %q, want the artifact %q", site, body, hello)
	}

	// The reader's template found the service by tag and name.
	readers := a.waitServiceRunning(reader, 1, 0)
	want := fmt.Sprintf("upstream=%s:%d", ip, port)
	harness.WaitFor(t, waitTimeout, "the reader's rendered upstream", func() (bool, string) {
		res := a.CLI("alloc", "logs", readers[0].ID, "reader")
		return strings.Contains(res.Stdout, want), res.Stdout + res.Stderr
	})

	// Stopping the web job deregisters its service.
	a.MustCLI("job", "stop", web)
	harness.WaitFor(t, waitTimeout, svc+" deregistered", func() (bool, string) {
		regs = nil
		status, err := a.Do(http.MethodGet, "/v1/service/"+svc, nil, &regs)
		return err == nil && status == http.StatusOK && len(regs) == 0, fmt.Sprintf("%d %v %+v", status, err, regs)
	})
	a.MustCLI("job", "stop", reader)
}

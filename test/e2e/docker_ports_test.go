package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// A docker task with `ports = ["http"]` is reachable on the host: the
// group's dynamic port on the node's address forwards to the container's
// `to` port, where busybox httpd serves the task's local dir.
func TestDockerPortReachable(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startDockerAgent(t)
	nc := a.nomadClient()
	const id = "docker-ports"
	a.MustCLI("job", "run", "-detach", writeJobFile(t, `job "`+id+`" {
  datacenters = ["*"]
  group "g" {
    network {
      port "http" {
        to = 8000
      }
    }
    task "web" {
      driver = "docker"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "echo served-by-$NOMAD_ALLOC_NAME > /local/index.html; exec httpd -f -p $NOMAD_PORT_http -h /local"]
        ports   = ["http"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`))
	running := a.waitServiceRunning(id, 1, 0)
	al, _, err := nc.Allocations().Info(running[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	ports := al.AllocatedResources.Shared.Ports
	if len(ports) != 1 || ports[0].Label != "http" || ports[0].To != 8000 || ports[0].Value < 20000 {
		t.Fatalf("alloc ports = %+v, want one dynamic port http -> 8000", ports)
	}
	url := fmt.Sprintf("http://%s:%d/", ports[0].HostIP, ports[0].Value)
	var body string
	harness.WaitFor(t, waitTimeout, "the container answering at "+url, func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	if want := "served-by-" + id + ".g[0]"; !strings.Contains(body, want) {
		t.Errorf("body = %q, want %q", body, want)
	}
}

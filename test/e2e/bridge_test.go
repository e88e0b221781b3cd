package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// bridgeJob serves the alloc's ID over HTTP from a raw_exec busybox httpd
// listening on 8080 inside the allocation's bridge namespace; the group's
// port "http" maps a dynamic host port to it.
const bridgeJob = `job %q {
  datacenters = ["*"]

  group "g" {
    network {
      mode = "bridge"
      port "http" {
        to = 8080
      }
    }

    task "web" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo $NOMAD_ALLOC_ID > $NOMAD_TASK_DIR/index.html; exec busybox httpd -f -p 0.0.0.0:8080 -h $NOMAD_TASK_DIR"]
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`

// A user runs a bridge-mode job file on an agent (as root, with the CNI
// plugins): the task answers on the mapped host port, the alloc JSON
// carries NetworkStatus with its address on the configured bridge, and
// stopping the job leaves no namespace, veth or per-allocation rule.
func TestBridgeNetworkingOnAgent(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("bridge networking needs the agent to run as root")
	}
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/portmap", "/usr/lib/cni/firewall"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("the CNI plugins are not installed (containernetworking-plugins): %v", err)
		}
	}
	for _, bin := range []string{"busybox", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s", bin)
		}
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	bridge, subnet := "dre"+hex.EncodeToString(b[:]), fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%50, b[1])
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", bridge).Run()
		_ = exec.Command("iptables", "-w", "-D", "NOMAD-ADMIN", "-o", bridge, "-d", subnet, "-j", "ACCEPT").Run()
		_ = exec.Command("iptables", "-w", "-D", "NOMAD-ADMIN", "-i", bridge, "-o", bridge, "-m", "conntrack", "!", "--ctstate", "DNAT", "-j", "DROP").Run()
	})
	cfg := harness.WriteFile(t, "bridge.hcl", fmt.Sprintf("client {\n  bridge_network_name = %q\n  bridge_network_subnet = %q\n}\n", bridge, subnet))
	a := startAgent(t, "-config", cfg)
	const id = "e2e-bridge"
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, id+".hcl", fmt.Sprintf(bridgeJob, id)))
	running := a.waitServiceRunning(id, 1, 0)

	var al struct {
		ID                 string
		AllocatedResources struct {
			Shared struct {
				Ports []struct {
					Label  string
					Value  int
					To     int
					HostIP string
				}
			}
		}
		NetworkStatus *struct {
			InterfaceName string
			Address       string
		}
	}
	harness.WaitFor(t, waitTimeout, "NetworkStatus in the alloc", func() (bool, string) {
		if status, err := a.Do(http.MethodGet, "/v1/allocation/"+running[0].ID, nil, &al); err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		return al.NetworkStatus != nil, "no NetworkStatus yet"
	})
	_, sub, _ := net.ParseCIDR(subnet)
	if al.NetworkStatus.InterfaceName != "eth0" || !sub.Contains(net.ParseIP(al.NetworkStatus.Address)) {
		t.Fatalf("NetworkStatus = %+v, want eth0 with an address in %s", *al.NetworkStatus, subnet)
	}
	ports := al.AllocatedResources.Shared.Ports
	if len(ports) != 1 || ports[0].To != 8080 || ports[0].Value < 20000 {
		t.Fatalf("alloc ports = %+v, want http mapped to 8080", ports)
	}
	// The dev agent's address is loopback: ask the node's address.
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(ports[0].HostIP, fmt.Sprint(ports[0].Value)))
	harness.WaitFor(t, waitTimeout, "the task answering at "+url, func() (bool, string) {
		c := http.Client{Timeout: 3 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(body)) == al.ID, fmt.Sprintf("%s %q", resp.Status, body)
	})

	a.MustCLI("job", "stop", "-detach", id)
	netns := filepath.Join(a.DataDir, "client", "netns")
	harness.WaitFor(t, waitTimeout, "the alloc's network torn down", func() (bool, string) {
		var left []string
		ents, _ := os.ReadDir(netns)
		for _, e := range ents {
			left = append(left, "file "+e.Name())
		}
		links, _ := exec.Command("ip", "-o", "link", "show", "master", bridge).Output()
		if s := strings.TrimSpace(string(links)); s != "" {
			left = append(left, "links "+s)
		}
		rules, _ := exec.Command("iptables-save").Output()
		for _, l := range strings.Split(string(rules), "\n") {
			if strings.Contains(l, al.ID) {
				left = append(left, "rule "+l)
			}
		}
		return len(left) == 0, strings.Join(left, "\n")
	})
}

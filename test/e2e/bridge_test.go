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
	bridge, subnet, cfg := bridgeAgentConfig(t, "")
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

// bridgeAgentConfig skips where bridge networking cannot run, and returns
// a bridge of the test's own (removed at the end with its node-level
// rules) and an agent config file using it, with extra appended.
func bridgeAgentConfig(t *testing.T, extra string) (bridge, subnet, cfg string) {
	t.Helper()
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
	bridge, subnet = "dre"+hex.EncodeToString(b[:]), fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%50, b[1])
	t.Cleanup(func() {
		_ = os.RemoveAll(filepath.Join("/var/lib/cni/networks", bridge))
		_ = exec.Command("ip", "link", "del", bridge).Run()
		_ = exec.Command("iptables", "-w", "-D", "NOMAD-ADMIN", "-o", bridge, "-d", subnet, "-j", "ACCEPT").Run()
		_ = exec.Command("iptables", "-w", "-D", "NOMAD-ADMIN", "-i", bridge, "-o", bridge, "-m", "conntrack", "!", "--ctstate", "DNAT", "-j", "DROP").Run()
	})
	cfg = harness.WriteFile(t, "bridge.hcl", fmt.Sprintf("client {\n  bridge_network_name = %q\n  bridge_network_subnet = %q\n}\n", bridge, subnet)+extra)
	return bridge, subnet, cfg
}

// bridgeDockerJob: a docker task serving HTTP on 8080 and a raw_exec
// sidecar, in one bridge-mode group; each records its network namespace
// in the shared alloc dir.
const bridgeDockerJob = `job %q {
  datacenters = ["*"]

  group "g" {
    network {
      mode = "bridge"
      port "http" {
        to = 8080
      }
    }

    task "web" {
      driver = "docker"

      config {
        image   = %q
        command = "sh"
        args    = ["-c", "readlink /proc/self/ns/net > /alloc/web.ns; echo docker-$NOMAD_ALLOC_ID > /local/index.html; exec httpd -f -p 0.0.0.0:8080 -h /local"]
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }

    task "side" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "readlink /proc/self/ns/net > $NOMAD_ALLOC_DIR/side.ns; exec sleep 600"]
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`

// A docker task and a raw_exec task of one bridge-mode group share the
// allocation's namespace (through the pause container of infra_image);
// the docker task answers on the mapped host port; stopping the job
// removes the pause container and leaves no namespace behind.
func TestBridgeDockerOnAgent(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	_, _, cfg := bridgeAgentConfig(t, fmt.Sprintf("plugin \"docker\" {\n  config {\n    infra_image = %q\n    gc {\n      image = false\n    }\n  }\n}\n", e2eBusybox))
	a := startAgent(t, "-config", cfg)
	const id = "e2e-bridge-docker"
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, id+".hcl", fmt.Sprintf(bridgeDockerJob, id, e2eBusybox)))
	running := a.waitServiceRunning(id, 1, 0)
	var al struct {
		ID                 string
		AllocatedResources struct {
			Shared struct {
				Ports []struct {
					Value  int
					HostIP string
				}
			}
		}
	}
	if status, err := a.Do(http.MethodGet, "/v1/allocation/"+running[0].ID, nil, &al); err != nil || status != http.StatusOK {
		t.Fatalf("GET alloc: %d %v", status, err)
	}
	p := al.AllocatedResources.Shared.Ports[0]
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(p.HostIP, fmt.Sprint(p.Value)))
	harness.WaitFor(t, waitTimeout, "the docker task answering at "+url, func() (bool, string) {
		c := http.Client{Timeout: 3 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(body)) == "docker-"+al.ID, fmt.Sprintf("%s %q", resp.Status, body)
	})
	shared := filepath.Join(a.DataDir, "alloc", al.ID, "alloc")
	var web, side []byte
	harness.WaitFor(t, waitTimeout, "both tasks' namespaces recorded", func() (bool, string) {
		web, _ = os.ReadFile(filepath.Join(shared, "web.ns"))
		side, _ = os.ReadFile(filepath.Join(shared, "side.ns"))
		return len(web) > 0 && len(side) > 0, fmt.Sprintf("web %q side %q", web, side)
	})
	if string(web) != string(side) {
		t.Fatalf("docker task in %q, raw_exec task in %q: want one namespace", web, side)
	}

	a.MustCLI("job", "stop", "-detach", id)
	harness.WaitFor(t, waitTimeout, "the pause container and the namespace gone", func() (bool, string) {
		out, _ := exec.Command("docker", "ps", "-a", "-q", "--filter", "name=drover-netns-"+al.ID).Output()
		ents, _ := os.ReadDir(filepath.Join(a.DataDir, "client", "netns"))
		return len(strings.TrimSpace(string(out))) == 0 && len(ents) == 0, fmt.Sprintf("pause %q, netns dir %d entries", out, len(ents))
	})
}

//go:build linux

package client

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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/client/cni"
	"github.com/drover-org/drover/core/internal/proctest"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

// bridgeEnv is a bridge of the test's own (name and subnet), removed at
// the end with the node-level rules the client keeps for it; it skips
// where the node cannot run bridge networking.
func bridgeEnv(t *testing.T) BridgeConfig {
	t.Helper()
	testtier.Slow(t, "runs tasks in network namespaces set up by the real CNI plugins")
	if os.Geteuid() != 0 {
		t.Skip("bridge networking needs root")
	}
	for _, bin := range []string{"iptables", "busybox"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s", bin)
		}
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	cfg := BridgeConfig{BridgeName: "drc" + hex.EncodeToString(b[:]), Subnet: fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%50, b[1])}
	m, err := cni.New(cni.Config{BridgeName: cfg.BridgeName, Subnet: cfg.Subnet, Dir: t.TempDir()})
	if err != nil {
		t.Skipf("network namespaces unavailable: %v", err)
	}
	if err := m.Available(structs.NetworkModeBridge); err != nil {
		t.Skipf("CNI plugins unavailable (install containernetworking-plugins): %v", err)
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(filepath.Join("/var/lib/cni/networks", cfg.BridgeName))
		_ = exec.Command("ip", "link", "del", cfg.BridgeName).Run()
		_ = exec.Command("iptables", "-w", "-D", cni.AdminChain, "-o", cfg.BridgeName, "-d", cfg.Subnet, "-j", "ACCEPT").Run()
		_ = exec.Command("iptables", "-w", "-D", cni.AdminChain, "-i", cfg.BridgeName, "-o", cfg.BridgeName, "-m", "conntrack", "!", "--ctstate", "DNAT", "-j", "DROP").Run()
	})
	return cfg
}

func newBridgeClient(t *testing.T, srv *fakeServer, stateDir string, br BridgeConfig) *Client {
	t.Helper()
	d := newRawExec(t)
	proctest.KillUnder(t, stateDir)
	c, err := New(Config{
		StateDir: stateDir, Server: srv, Drivers: fakeProvider{rawexec.Name: d},
		UpdateBatchInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond,
		MaxRetryInterval: 20 * time.Millisecond, FingerprintInterval: -1, Bridge: br,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// httpdAlloc is a service alloc of one raw_exec task serving its alloc ID
// over HTTP on port 8080 inside a bridge network, mapped to hostPort.
func httpdAlloc(id, nodeID, hostIP string, hostPort int) *structs.Allocation {
	task := rawTask("web", "/bin/sh", "-c", "echo $NOMAD_ALLOC_ID > $NOMAD_TASK_DIR/index.html; exec busybox httpd -f -p 0.0.0.0:$NOMAD_PORT_http -h $NOMAD_TASK_DIR")
	job := testJob("service", task)
	job.TaskGroups[0].Networks = []*structs.NetworkResource{{Mode: structs.NetworkModeBridge, DynamicPorts: []structs.Port{{Label: "http", To: 8080}}}}
	a := testAlloc(id, nodeID, job)
	a.AllocatedResources = &structs.AllocatedResources{Shared: structs.AllocatedSharedResources{
		Ports: []structs.AllocatedPortMapping{{Label: "http", Value: hostPort, To: 8080, HostIP: hostIP}},
	}}
	return a
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

func freeHostPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// bridgeFootprint is what the client's namespaces leave on the node: the
// bridge's ports, the namespaces pinned under the state dir and their
// records.
func bridgeFootprint(t *testing.T, br BridgeConfig, stateDir string) []string {
	t.Helper()
	var out []string
	links, _ := exec.Command("ip", "-o", "link", "show", "master", br.BridgeName).Output()
	for _, l := range strings.Split(string(links), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			out = append(out, "link "+f[1])
		}
	}
	ents, _ := os.ReadDir(filepath.Join(stateDir, "netns"))
	for _, e := range ents {
		out = append(out, "file "+e.Name())
	}
	rules, _ := exec.Command("iptables-save").Output()
	for _, l := range strings.Split(string(rules), "\n") {
		if strings.Contains(l, "id: \"") && strings.Contains(l, br.BridgeName) {
			out = append(out, "rule "+l)
		}
	}
	return out
}

// TestBridgeAllocServesMappedPort: a raw_exec task of a bridge-mode group
// serves on its `to` port inside the allocation's namespace and is
// reachable on the mapped host port; the allocation reports its address;
// the node lists bridge among its networks. A client shut down (as if it
// crashed) leaves the namespace to the next one, which adopts it while
// the task runs, and tears it down when the allocation goes: nothing is
// left behind.
func TestBridgeAllocServesMappedPort(t *testing.T) {
	br := bridgeEnv(t)
	srv, dir := newFakeServer(), t.TempDir()
	c := newBridgeClient(t, srv, dir, br)
	waitFor(t, "client registered", func() bool {
		select {
		case <-c.Registered():
			return true
		default:
			return false
		}
	})
	node := srv.node(c.NodeID())
	var modes []string
	for _, n := range node.NodeResources.Networks {
		modes = append(modes, n.Mode)
	}
	if !slices.Contains(modes, structs.NetworkModeBridge) {
		t.Fatalf("node networks = %v, want bridge listed", modes)
	}
	hostIP := node.NodeResources.Networks[0].IP
	port := freeHostPort(t)
	srv.upsert(httpdAlloc("br-1", c.NodeID(), hostIP, port))

	url := fmt.Sprintf("http://%s/", net.JoinHostPort(hostIP, fmt.Sprint(port)))
	var got string
	waitForDiag(t, "the task answers on the mapped port", func() bool {
		got, _ = httpGet(url)
		return got == "br-1"
	}, func() string { return fmt.Sprintf("GET %s = %q; alloc %s", url, got, srv.clientStatus("br-1")) })

	_, subnet, _ := net.ParseCIDR(br.Subnet)
	var st *structs.AllocNetworkStatus
	waitFor(t, "network status reported", func() bool {
		st = srv.alloc("br-1").NetworkStatus
		return st != nil
	})
	if st.InterfaceName != "eth0" || !subnet.Contains(net.ParseIP(st.Address)) {
		t.Fatalf("NetworkStatus = %+v, want eth0 with an address in %s", st, br.Subnet)
	}
	// The task listens inside the namespace only: not on the host's 8080.
	if _, err := httpGet(fmt.Sprintf("http://%s/", net.JoinHostPort(hostIP, "8080"))); err == nil {
		if ln, lerr := net.Listen("tcp4", "0.0.0.0:8080"); lerr == nil {
			ln.Close()
			t.Fatal("something answers on the host's port 8080, which nothing holds")
		}
	}

	// "Crash": the client goes, the task and its namespace stay.
	c.Shutdown()
	if got, err := httpGet(url); err != nil || got != "br-1" {
		t.Fatalf("after the client stopped: GET = %q, %v; the task and its network should stay", got, err)
	}
	c2 := newBridgeClient(t, srv, dir, br)
	defer c2.Shutdown()
	waitFor(t, "restored alloc runs", func() bool {
		r := c2.runner("br-1")
		return r != nil && r.networkIsolation() != nil
	})
	if ni := c2.runner("br-1").networkIsolation(); ni.GetAddress() != st.Address {
		t.Fatalf("adopted namespace address %q, want the running %q", ni.GetAddress(), st.Address)
	}
	if got, err := httpGet(url); err != nil || got != "br-1" {
		t.Fatalf("after restart: GET = %q, %v", got, err)
	}

	srv.remove("br-1")
	waitForDiag(t, "the alloc's network torn down", func() bool {
		return len(bridgeFootprint(t, br, dir)) == 0 && c2.runner("br-1") == nil
	}, func() string { return strings.Join(bridgeFootprint(t, br, dir), "\n") })
	if _, err := httpGet(url); err == nil {
		t.Fatal("the mapped port still answers after teardown")
	}
}

// TestBridgeModeUnavailableFailsTasks: a client that cannot make
// namespaces fails a bridge allocation's tasks with the reason, and never
// runs them on the node's network.
func TestBridgeModeUnavailableFailsTasks(t *testing.T) {
	srv, world := newFakeServer(), newFakeWorld()
	c := startClient(t, srv, fakeProvider{"fake": newFakeDriver(world)}, t.TempDir(), nil)
	c.rcfg.Networks, c.rcfg.NetworksErr = nil, fmt.Errorf("network namespaces need the client to run as root")
	job := testJob("batch", fakeTaskSpec("main", `{"exit_code": 0}`))
	job.TaskGroups[0].Networks = []*structs.NetworkResource{{Mode: structs.NetworkModeBridge}}
	srv.upsert(testAlloc("br-x", c.NodeID(), job))
	waitFor(t, "alloc failed", func() bool { return srv.clientStatus("br-x") == structs.AllocClientStatusFailed })
	if n := world.startCount("main"); n != 0 {
		t.Fatalf("task started %d times; want never", n)
	}
	ts := srv.alloc("br-x").TaskStates["main"]
	var msgs []string
	for _, e := range ts.Events {
		msgs = append(msgs, e.DisplayMessage+e.SetupError)
	}
	if !strings.Contains(strings.Join(msgs, "|"), `network mode "bridge" needs the allocation's own network namespace, which this client cannot make: network namespaces need the client to run as root`) {
		t.Fatalf("task events = %q, want the reason", msgs)
	}
}

// TestBridgeTeardownAfterCrash: what a client left when it went down is
// torn down by the next one: the namespace of an allocation the server
// removed meanwhile (its runner is restored, finds the alloc gone and
// destroys it), and one the client's state does not know at all (swept
// at start).
func TestBridgeTeardownAfterCrash(t *testing.T) {
	br := bridgeEnv(t)
	srv, dir := newFakeServer(), t.TempDir()
	c := newBridgeClient(t, srv, dir, br)
	waitFor(t, "client registered", func() bool { return srv.node(c.NodeID()) != nil })
	hostIP := srv.node(c.NodeID()).NodeResources.Networks[0].IP
	port := freeHostPort(t)
	srv.upsert(httpdAlloc("br-gone", c.NodeID(), hostIP, port))
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(hostIP, fmt.Sprint(port)))
	waitFor(t, "the task answers", func() bool { got, _ := httpGet(url); return got == "br-gone" })
	c.Shutdown()

	// While the client is down: the server removes the alloc, and a
	// namespace appears that no state of the client knows.
	srv.remove("br-gone")
	m, err := cni.New(cni.Config{BridgeName: br.BridgeName, Subnet: br.Subnet, Dir: filepath.Join(dir, "netns")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Setup(t.Context(), cni.Request{AllocID: "orphan-1", Mode: structs.NetworkModeBridge}); err != nil {
		t.Fatal(err)
	}

	c2 := newBridgeClient(t, srv, dir, br)
	defer c2.Shutdown()
	waitForDiag(t, "both namespaces torn down", func() bool {
		return len(bridgeFootprint(t, br, dir)) == 0
	}, func() string { return strings.Join(bridgeFootprint(t, br, dir), "\n") })
	if _, err := httpGet(url); err == nil {
		t.Fatal("the removed alloc's task still answers")
	}
}

//go:build linux

package cni

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testtier"
	"golang.org/x/sys/unix"
)

// kernelManager returns a Manager on a bridge and subnet of this test's
// own, or skips with the reason the node cannot run it. The bridge and
// its admin rule (node-level, kept between allocations) are removed at
// the end.
func kernelManager(t *testing.T) *Manager {
	t.Helper()
	testtier.Slow(t, "sets up network namespaces with the real CNI plugins")
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, bridges and iptables")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("needs iptables, which the firewall and portmap plugins run")
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := "drt" + hex.EncodeToString(b[:])
	subnet := fmt.Sprintf("10.%d.%d.0/24", 200+int(b[0])%50, b[1])
	m, err := New(Config{BridgeName: name, Subnet: subnet, Dir: t.TempDir(), ConfigDir: t.TempDir()})
	if err != nil {
		t.Skipf("network namespaces unavailable: %v", err)
	}
	if err := m.Available(ModeBridge); err != nil {
		t.Skipf("CNI plugins unavailable (install containernetworking-plugins): %v", err)
	}
	t.Cleanup(func() {
		_ = os.RemoveAll(hostLocalDir(name))
		_ = exec.Command("ip", "link", "del", name).Run()
		_ = exec.Command("iptables", "-w", "-D", AdminChain, "-o", name, "-d", subnet, "-j", "ACCEPT").Run()
		_ = exec.Command("iptables", "-w", "-D", AdminChain, "-i", name, "-o", name, "-m", "conntrack", "!", "--ctstate", "DNAT", "-j", "DROP").Run()
	})
	return m
}

// inNetns runs fn on a thread in the namespace at path.
func inNetns(t *testing.T, path string, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		// The thread stays locked and ends with the goroutine.
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("enter %s: %v", path, err)
	}
}

// serveIn starts an HTTP server listening on port inside the namespace,
// answering body.
func serveIn(t *testing.T, path string, port int, body string) {
	t.Helper()
	var ln net.Listener
	var err error
	inNetns(t, path, func() { ln, err = net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port)) })
	if err != nil {
		t.Fatalf("listen in the namespace: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }),
		ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

func get(dial func(ctx context.Context, network, addr string) (net.Conn, error), url string) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// dialFrom dials from inside the namespace at path.
func dialFrom(t *testing.T, path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		inNetns(t, path, func() {
			d := net.Dialer{Timeout: 3 * time.Second}
			c, err = d.DialContext(ctx, network, addr)
		})
		return c, err
	}
}

func hostDial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 3 * time.Second}
	return d.DialContext(ctx, network, addr)
}

// hostAddr is an address of the node other than loopback.
func hostAddr(t *testing.T) string {
	t.Helper()
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || i.Flags&net.FlagUp == 0 || strings.HasPrefix(i.Name, "drt") {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	t.Skip("the node has no IPv4 address but loopback")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func allocID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// footprint is what a namespace leaves on the node: the bridge's ports,
// CNI iptables lines, pinned namespaces and their mounts.
func footprint(t *testing.T, m *Manager) []string {
	t.Helper()
	var out []string
	links, err := exec.Command("ip", "-o", "link", "show", "master", m.cfg.BridgeName).Output()
	if err != nil {
		t.Fatalf("ip link: %v", err)
	}
	for _, l := range strings.Split(string(links), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			out = append(out, "link "+strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
		}
	}
	for _, table := range []string{"filter", "nat"} {
		rules, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			t.Fatalf("iptables-save: %v", err)
		}
		for _, l := range strings.Split(string(rules), "\n") {
			if strings.Contains(l, "CNI") || strings.Contains(l, m.cfg.BridgeName) || strings.Contains(l, strings.TrimSuffix(m.cfg.Subnet, ".0/24")) {
				out = append(out, table+" "+strings.SplitN(l, " [", 2)[0])
			}
		}
	}
	ents, _ := os.ReadDir(m.cfg.Dir)
	for _, e := range ents {
		out = append(out, "file "+e.Name())
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, m.cfg.Dir) {
			out = append(out, "mount "+l)
		}
	}
	nsl, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(nsl), "\n") {
		if l != "" {
			out = append(out, "netns "+l)
		}
	}
	sort.Strings(out)
	return out
}

// warm sets up and tears down one namespace, so that what the node keeps
// for every allocation (the bridge, the plugins' shared chains, the admin
// rule) exists before a footprint is taken.
func warm(t *testing.T, m *Manager) {
	t.Helper()
	id := allocID()
	if _, err := m.Setup(context.Background(), Request{AllocID: id, Mode: ModeBridge, Ports: []PortMapping{{HostPort: freePort(t), ContainerPort: 80, Protocol: "tcp"}}}); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if err := m.Teardown(context.Background(), id); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
}

func diff(a, b []string) string {
	var d []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			d = append(d, "- "+x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			d = append(d, "+ "+x)
		}
	}
	return strings.Join(d, "\n")
}

// TestBridgeMappedPortsAndIsolation: two allocations on the bridge, each
// serving HTTP on port 8080 inside its namespace; each is reachable on
// its mapped host port, from the host and from the other allocation, but
// neither reaches the other's 8080 directly. Teardown leaves nothing.
func TestBridgeMappedPortsAndIsolation(t *testing.T) {
	m := kernelManager(t)
	warm(t, m)
	before := footprint(t, m)
	host := hostAddr(t)
	ctx := context.Background()

	type alloc struct {
		id   string
		port int
		net  *Network
	}
	allocs := []*alloc{{id: allocID(), port: freePort(t)}, {id: allocID(), port: freePort(t)}}
	for i, a := range allocs {
		n, err := m.Setup(ctx, Request{AllocID: a.id, Mode: ModeBridge, Ports: []PortMapping{
			{HostPort: a.port, ContainerPort: 8080, Protocol: "tcp"}, {HostPort: a.port, ContainerPort: 8080, Protocol: "udp"},
		}})
		if err != nil {
			t.Fatalf("Setup %d: %v", i, err)
		}
		a.net = n
		if n.Status.InterfaceName != IfName || net.ParseIP(n.Status.Address) == nil {
			t.Fatalf("status = %+v, want eth0 and an address", n.Status)
		}
		_, sub, _ := net.ParseCIDR(m.cfg.Subnet)
		if !sub.Contains(net.ParseIP(n.Status.Address)) {
			t.Fatalf("address %s is outside the bridge subnet %s", n.Status.Address, m.cfg.Subnet)
		}
		if !isNetns(n.Path) {
			t.Fatalf("%s is not a pinned namespace", n.Path)
		}
		serveIn(t, n.Path, 8080, fmt.Sprintf("alloc %d", i))
	}
	a, b := allocs[0], allocs[1]

	tests := []struct {
		name string
		from func(ctx context.Context, network, addr string) (net.Conn, error)
		url  string
		want string // "" the connection must fail
	}{
		{"host to a's mapped port", hostDial, fmt.Sprintf("http://%s:%d/", host, a.port), "alloc 0"},
		{"host to b's mapped port", hostDial, fmt.Sprintf("http://%s:%d/", host, b.port), "alloc 1"},
		{"a to b's mapped port", dialFrom(t, a.net.Path), fmt.Sprintf("http://%s:%d/", host, b.port), "alloc 1"},
		{"a to its own mapped port (hairpin)", dialFrom(t, a.net.Path), fmt.Sprintf("http://%s:%d/", host, a.port), "alloc 0"},
		{"a to b's port directly", dialFrom(t, a.net.Path), fmt.Sprintf("http://%s:8080/", b.net.Status.Address), ""},
		{"b to a's port directly", dialFrom(t, b.net.Path), fmt.Sprintf("http://%s:8080/", a.net.Status.Address), ""},
		{"a's loopback is up", dialFrom(t, a.net.Path), "http://127.0.0.1:8080/", "alloc 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := get(tc.from, tc.url)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("GET %s = %q, want no connection", tc.url, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("GET %s = %q, %v, want %q", tc.url, got, err, tc.want)
			}
		})
	}

	for _, x := range allocs {
		if err := m.Teardown(ctx, x.id); err != nil {
			t.Fatalf("Teardown: %v", err)
		}
		// Twice: a teardown finds nothing the second time.
		if err := m.Teardown(ctx, x.id); err != nil {
			t.Fatalf("second Teardown: %v", err)
		}
	}
	if d := diff(before, footprint(t, m)); d != "" {
		t.Errorf("teardown left behind:\n%s", d)
	}
}

// TestCrashedSetupIsSwept: a client that died after recording a network
// (half made, or made and never torn down) leaves it to the next client
// process, whose sweep tears down every one it does not keep, and whose
// Setup adopts a complete one it keeps.
func TestCrashedSetupIsSwept(t *testing.T) {
	m := kernelManager(t)
	warm(t, m)
	before := footprint(t, m)
	ctx := context.Background()

	kept, gone, half := allocID(), allocID(), allocID()
	var keptNet *Network
	for _, id := range []string{kept, gone} {
		n, err := m.Setup(ctx, Request{AllocID: id, Mode: ModeBridge, Ports: []PortMapping{{HostPort: freePort(t), ContainerPort: 80, Protocol: "tcp"}}})
		if err != nil {
			t.Fatal(err)
		}
		if id == kept {
			keptNet = n
		}
	}
	// A crash between the record and the first ADD's end: the namespace
	// is pinned, the record not done.
	lists, err := m.plan(Request{AllocID: half, Mode: ModeBridge})
	if err != nil {
		t.Fatal(err)
	}
	rec := &record{AllocID: half, Mode: ModeBridge, Netns: m.NetnsPath(half), Lists: lists}
	if err := m.writeRecord(rec); err != nil {
		t.Fatal(err)
	}
	if err := createNetns(rec.Netns); err != nil {
		t.Fatal(err)
	}

	// The restarted client: a new Manager on the same directory.
	m2, err := New(m.cfg)
	if err != nil {
		t.Fatal(err)
	}
	n, err := m2.Setup(ctx, Request{AllocID: kept, Mode: ModeBridge})
	if err != nil {
		t.Fatal(err)
	}
	if n.Path != keptNet.Path || n.Status != keptNet.Status {
		t.Fatalf("adopted %+v, want the running %+v", n, keptNet)
	}
	if err := m2.Sweep(ctx, func(id string) bool { return id == kept }); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	ids, err := m2.Recorded()
	if err != nil || !slices.Equal(ids, []string{kept}) {
		t.Fatalf("recorded after sweep = %v, %v; want only %s", ids, err, kept)
	}
	if err := m2.Teardown(ctx, kept); err != nil {
		t.Fatal(err)
	}
	if d := diff(before, footprint(t, m)); d != "" {
		t.Errorf("sweep left behind:\n%s", d)
	}
}

// TestNoneModeIsLoopbackOnly: mode "none" gives a namespace with loopback
// up and no other interface.
func TestNoneModeIsLoopbackOnly(t *testing.T) {
	m := kernelManager(t)
	id := allocID()
	n, err := m.Setup(context.Background(), Request{AllocID: id, Mode: ModeNone})
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	defer m.Teardown(context.Background(), id)
	if n.Status.Address != "" {
		t.Fatalf("status = %+v, want no address in mode none", n.Status)
	}
	var ifs []net.Interface
	inNetns(t, m.NetnsPath(id), func() { ifs, err = net.Interfaces() })
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, fmt.Sprintf("%s up=%v", i.Name, i.Flags&net.FlagUp != 0))
	}
	if !slices.Equal(names, []string{"lo up=true"}) {
		t.Fatalf("interfaces in the none namespace = %v, want only lo, up", names)
	}
	if err := m.Teardown(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.NetnsPath(id)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("namespace file after teardown: %v", err)
	}
}

// TestNamedCNIConfig: mode cni/<name> sets the namespace up with the
// conflist of that name in the config dir (here a bridge of the test's
// own with portmap), port mappings included, and tears it down.
func TestNamedCNIConfig(t *testing.T) {
	m := kernelManager(t)
	name := m.cfg.BridgeName + "x"
	sub := strings.Replace(m.cfg.Subnet, ".0/24", ".128/25", 1)
	list := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"mynet","plugins":[
		{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}]}},
		{"type":"portmap","capabilities":{"portMappings":true},"snat":true}]}`, name, sub)
	if err := os.WriteFile(m.cfg.ConfigDir+"/mynet.conflist", []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", name).Run()
		_ = os.RemoveAll(hostLocalDir("mynet"))
	})
	if modes := m.Modes(); !slices.Contains(modes, "cni/mynet") {
		t.Fatalf("Modes = %v, want cni/mynet", modes)
	}
	if err := m.Available("cni/other"); err == nil || !strings.Contains(err.Error(), `no CNI network config named "other"`) {
		t.Fatalf("Available(cni/other) = %v", err)
	}
	id, port := allocID(), freePort(t)
	n, err := m.Setup(context.Background(), Request{AllocID: id, Mode: "cni/mynet", Ports: []PortMapping{{HostPort: port, ContainerPort: 80, Protocol: "tcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, subnet, _ := net.ParseCIDR(sub)
	if !subnet.Contains(net.ParseIP(n.Status.Address)) {
		t.Fatalf("address %s outside %s", n.Status.Address, sub)
	}
	serveIn(t, n.Path, 80, "named")
	if got, err := get(hostDial, fmt.Sprintf("http://%s:%d/", hostAddr(t), port)); err != nil || got != "named" {
		t.Fatalf("GET mapped port = %q, %v", got, err)
	}
	if err := m.Teardown(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("ip", "-o", "link", "show", "master", name).Output(); len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("ports left on the bridge: %s", out)
	}
}

// BenchmarkBridgeSetupTeardown: one allocation's bridge network with one
// mapped port, set up and torn down (the namespace, the five plugins'
// ADD and DEL).
func BenchmarkBridgeSetupTeardown(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	var r [3]byte
	_, _ = rand.Read(r[:])
	name, subnet := "drb"+hex.EncodeToString(r[:]), fmt.Sprintf("10.%d.%d.0/24", 200+int(r[0])%50, r[1])
	m, err := New(Config{BridgeName: name, Subnet: subnet, Dir: b.TempDir(), ConfigDir: b.TempDir()})
	if err != nil || m.Available(ModeBridge) != nil {
		b.Skipf("bridge networking unavailable: %v", err)
	}
	b.Cleanup(func() {
		_ = os.RemoveAll(hostLocalDir(name))
		_ = exec.Command("ip", "link", "del", name).Run()
		_ = exec.Command("iptables", "-w", "-D", AdminChain, "-o", name, "-d", subnet, "-j", "ACCEPT").Run()
		_ = exec.Command("iptables", "-w", "-D", AdminChain, "-i", name, "-o", name, "-m", "conntrack", "!", "--ctstate", "DNAT", "-j", "DROP").Run()
	})
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		id := allocID()
		if _, err := m.Setup(ctx, Request{AllocID: id, Mode: ModeBridge, Ports: []PortMapping{{HostPort: 40000 + i%1000, ContainerPort: 80, Protocol: "tcp"}}}); err != nil {
			b.Fatal(err)
		}
		if err := m.Teardown(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFailedSetupLeavesNothing: a list whose third plugin fails to ADD
// (its binary missing) is torn down at once with the results so far:
// no namespace, address, veth or rule of the allocation is left.
func TestFailedSetupLeavesNothing(t *testing.T) {
	m := kernelManager(t)
	warm(t, m)
	list := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"broken","plugins":[
		{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":%q}]]}},
		{"type":"firewall","backend":"iptables","iptablesAdminChainName":%q},
		{"type":"no-such-plugin"}]}`, m.cfg.BridgeName, m.cfg.Subnet, AdminChain)
	if err := os.WriteFile(m.cfg.ConfigDir+"/broken.conflist", []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(hostLocalDir("broken")) })
	before := footprint(t, m)
	_, err := m.Setup(context.Background(), Request{AllocID: allocID(), Mode: "cni/broken"})
	if err == nil || !strings.Contains(err.Error(), `plugin no-such-plugin: ADD`) {
		t.Fatalf("Setup = %v, want the missing plugin named", err)
	}
	if d := diff(before, footprint(t, m)); d != "" {
		t.Errorf("a failed setup left behind:\n%s", d)
	}
	ents, _ := os.ReadDir(hostLocalDir("broken"))
	for _, e := range ents {
		if net.ParseIP(e.Name()) != nil {
			t.Errorf("address %s still reserved", e.Name())
		}
	}
}

// hostLocalDir is where host-local keeps a network's reservations.
func hostLocalDir(network string) string { return filepath.Join("/var/lib/cni/networks", network) }

package client

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestRenderResolvConf(t *testing.T) {
	host := parseResolvConf(strings.NewReader("# c\nnameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nnameserver 10.0.0.4\ndomain old\nsearch corp.example lan\noptions edns0\noptions trust-ad\n"))
	tests := []struct {
		name string
		dns  *structs.DNSConfig
		host *structs.DNSConfig
		want string
	}{
		{"all set", &structs.DNSConfig{Servers: []string{"1.1.1.1", "8.8.8.8"}, Searches: []string{"svc", "example.com"}, Options: []string{"ndots:2", "rotate"}}, host,
			"nameserver 1.1.1.1\nnameserver 8.8.8.8\nsearch svc example.com\noptions ndots:2 rotate\n"},
		{"servers only: the node's searches and options", &structs.DNSConfig{Servers: []string{"1.1.1.1"}}, host,
			"nameserver 1.1.1.1\nsearch corp.example lan\noptions edns0 trust-ad\n"},
		{"searches only: the node's first 3 servers", &structs.DNSConfig{Searches: []string{"svc"}}, host,
			"nameserver 10.0.0.1\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch svc\noptions edns0 trust-ad\n"},
		{"no node resolv.conf", &structs.DNSConfig{Options: []string{"ndots:1"}}, nil, "options ndots:1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(renderResolvConf(tt.dns, tt.host))
			_, body, _ := strings.Cut(got, "\n") // the comment line
			if body != tt.want {
				t.Fatalf("resolv.conf:\n%s\nwant:\n%s", body, tt.want)
			}
		})
	}
}

// TestNoneModeDNSWritesResolvConf: an allocation in its own namespace
// with a dns block gets its resolv.conf, and its tasks' driver config
// carries the block, the file and the interpolated hostname.
func TestNoneModeDNSWritesResolvConf(t *testing.T) {
	br := bridgeEnv(t)
	srv, dir := newFakeServer(), t.TempDir()
	c := newBridgeClient(t, srv, dir, br)
	defer c.Shutdown()
	job := testJob("service", rawTask("t", "/bin/sh", "-c", "exec sleep 600"))
	job.TaskGroups[0].Networks = []*structs.NetworkResource{{Mode: structs.NetworkModeNone, Hostname: "web-${NOMAD_ALLOC_INDEX}",
		DNS: &structs.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"svc.example"}, Options: []string{"ndots:1"}}}}
	srv.upsert(testAlloc("dns-1", c.NodeID(), job))
	var path string
	waitForDiag(t, "the task started with the allocation's resolv.conf", func() bool {
		r := c.runner("dns-1")
		if r == nil {
			return false
		}
		tr := r.tasks[0]
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if tr.cfg == nil || tr.cfg.GetDns() == nil {
			return false
		}
		path = tr.cfg.GetResolvConfPath()
		return true
	}, func() string { return fmt.Sprintf("alloc %s", srv.clientStatus("dns-1")) })
	if want := filepath.Join(c.runner("dns-1").dir.root, "resolv.conf"); path != want {
		t.Fatalf("ResolvConfPath = %q, want %q", path, want)
	}
	if h := c.runner("dns-1").networkIsolation().GetHostname(); h != "web-0" {
		t.Fatalf("the tasks' hostname = %q, want the interpolated %q", h, "web-0")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"nameserver 192.0.2.53\n", "search svc.example\n", "options ndots:1\n"} {
		if !strings.Contains(string(b), line) {
			t.Fatalf("resolv.conf lacks %q:\n%s", line, b)
		}
	}
	srv.remove("dns-1")
	waitForDiag(t, "the alloc's network torn down", func() bool {
		return len(bridgeFootprint(t, br, dir)) == 0 && c.runner("dns-1") == nil
	}, func() string { return strings.Join(bridgeFootprint(t, br, dir), "\n") })
}

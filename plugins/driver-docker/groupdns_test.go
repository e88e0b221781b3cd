package docker

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/moby/moby/api/types/container"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// TestGroupDNSHostMode: in host mode the group's dns block is the
// container's resolver where the task's own dns_* fields leave a field
// unset; a task sharing another container's network, or one in the
// allocation's own namespace (the pause container has it), gets none.
func TestGroupDNSHostMode(t *testing.T) {
	pc, _ := ParsePluginConfig(nil)
	group := &driverpb.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"svc.example"}, Options: []string{"ndots:1"}}
	tests := []struct {
		name         string
		raw          string
		iso          bool
		servers      []string
		search, opts []string
	}{
		{"group's", `{"image":"x"}`, false, []string{"192.0.2.53"}, []string{"svc.example"}, []string{"ndots:1"}},
		{"task's servers win", `{"image":"x","dns_servers":["198.51.100.1"]}`, false, []string{"198.51.100.1"}, []string{"svc.example"}, []string{"ndots:1"}},
		{"task's searches and options win", `{"image":"x","dns_search_domains":["a"],"dns_options":["rotate"]}`, false, []string{"192.0.2.53"}, []string{"a"}, []string{"rotate"}},
		{"container network", `{"image":"x","network_mode":"container:abc"}`, false, nil, nil, nil},
		{"isolated: on the pause container", `{"image":"x"}`, true, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testTaskConfig(nil, nil)
			cfg.Dns = group
			if tt.iso {
				cfg.NetworkIsolation = &driverpb.NetworkIsolation{Path: "/run/netns/x"}
			}
			tc, err := parseTaskConfig([]byte(tt.raw), pc)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := createOptions(cfg, tc, pc)
			if err != nil {
				t.Fatal(err)
			}
			hc := opts.HostConfig
			var servers []string
			for _, a := range hc.DNS {
				servers = append(servers, a.String())
			}
			if !slices.Equal(servers, tt.servers) || !slices.Equal(hc.DNSSearch, tt.search) || !slices.Equal(hc.DNSOptions, tt.opts) {
				t.Fatalf("Dns %v DnsSearch %v DnsOptions %v, want %v %v %v", servers, hc.DNSSearch, hc.DNSOptions, tt.servers, tt.search, tt.opts)
			}
		})
	}
}

func TestPauseSettings(t *testing.T) {
	cc, hc := &container.Config{}, &container.HostConfig{}
	err := (pauseSettings{hostname: "web", dns: &driverpb.DNSConfig{Servers: []string{"2001:db8::53"}, Searches: []string{"s"}, Options: []string{"rotate"}}}).config(cc, hc)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Hostname != "web" || fmt.Sprint(hc.DNS) != fmt.Sprint([]netip.Addr{netip.MustParseAddr("2001:db8::53")}) || !slices.Equal(hc.DNSSearch, []string{"s"}) || !slices.Equal(hc.DNSOptions, []string{"rotate"}) {
		t.Fatalf("pause config: hostname %q Dns %v DnsSearch %v DnsOptions %v", cc.Hostname, hc.DNS, hc.DNSSearch, hc.DNSOptions)
	}
	if err := (pauseSettings{dns: &driverpb.DNSConfig{Servers: []string{"nope"}}}).config(&container.Config{}, &container.HostConfig{}); err == nil {
		t.Fatal("a server that is not an IP was accepted")
	}
}

package agent

import (
	"strings"
	"testing"
)

// TestBridgeConfigKeys: Nomad's client keys of bridge networking are
// read, merged and checked, each error naming the key and the rule.
func TestBridgeConfigKeys(t *testing.T) {
	tests := []struct {
		key   string
		value any
		want  string // "" accepted
	}{
		{"client.cni_path", "/opt/cni/bin:/usr/lib/cni", ""},
		{"client.cni_path", "opt/cni", `client.cni_path: "opt/cni" is not an absolute path`},
		{"client.cni_path", "/" + long(5000), "client.cni_path: must be at most 4096 bytes"},
		{"client.cni_config_dir", "/etc/cni/net.d", ""},
		{"client.cni_config_dir", "net.d", `client.cni_config_dir: "net.d" is not an absolute path`},
		{"client.bridge_network_name", "drover0", ""},
		{"client.bridge_network_name", "a-very-long-bridge-name", "client.bridge_network_name \"a-very-long-bridge-name\" must be 1 to 15 characters"},
		{"client.bridge_network_name", "br 0", "may hold only letters, digits"},
		{"client.bridge_network_subnet", "10.10.0.0/16", ""},
		{"client.bridge_network_subnet", "10.10.0.0", `client.bridge_network_subnet "10.10.0.0" is not a CIDR`},
		{"client.bridge_network_subnet", "fd00::/64", "must be an IPv4 subnet"},
		{"client.bridge_network_subnet", "10.0.0.0/31", "is too small"},
	}
	for _, format := range []string{"hcl", "json"} {
		for _, tc := range tests {
			t.Run(format+"/"+tc.key+"="+tc.value.(string)[:min(20, len(tc.value.(string)))], func(t *testing.T) {
				tree := baseTree()
				set(tree, tc.key, tc.value)
				err := parseTree(t, tree, format)
				if tc.want == "" {
					if err != nil {
						t.Fatalf("%s = %v: %v", tc.key, tc.value, err)
					}
					return
				}
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s = %.40v: error %v, want %q", tc.key, tc.value, err, tc.want)
				}
			})
		}
	}
}

// TestBridgeConfigReachesClient: the keys become the client's bridge
// configuration.
func TestBridgeConfigReachesClient(t *testing.T) {
	c := &ClientConfig{CNIPath: "/a:/b", CNIConfigDir: "/c", BridgeNetworkName: "br1", BridgeNetworkSubnet: "10.1.0.0/24"}
	got := c.bridgeConfig()
	if got.CNIPath != "/a:/b" || got.CNIConfigDir != "/c" || got.BridgeName != "br1" || got.Subnet != "10.1.0.0/24" {
		t.Fatalf("bridgeConfig = %+v", got)
	}
}

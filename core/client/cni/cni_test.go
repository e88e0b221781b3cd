package cni

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCNIArgs(t *testing.T) {
	tests := []struct {
		in   map[string]string
		want string
	}{
		{nil, "IgnoreUnknown=true"},
		{map[string]string{"b": "2", "a": "1"}, "IgnoreUnknown=true;a=1;b=2"},
		{map[string]string{"IgnoreUnknown": "false", "K8S_POD_NAME": "x"}, "IgnoreUnknown=true;K8S_POD_NAME=x"},
	}
	for _, tc := range tests {
		if got := cniArgs(tc.in); got != tc.want {
			t.Errorf("cniArgs(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestValidateBridge(t *testing.T) {
	tests := []struct {
		name, subnet, want string
	}{
		{"nomad", "172.26.64.0/20", ""},
		{"", "172.26.64.0/20", "must be 1 to 15 characters"},
		{"sixteen-chars-xx", "10.0.0.0/24", "must be 1 to 15 characters"},
		{"br/0", "10.0.0.0/24", "may hold only letters"},
		{"nomad", "10.0.0.0", "is not a CIDR"},
		{"nomad", "fd00::/64", "must be an IPv4 subnet"},
		{"nomad", "10.0.0.0/31", "too small"},
	}
	for _, tc := range tests {
		err := ValidateBridge(tc.name, tc.subnet)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ValidateBridge(%q, %q) = %v, want %q", tc.name, tc.subnet, err, tc.want)
		}
	}
}

// TestReadConfig: a conflist is read as is, a single plugin's conf is
// wrapped in a list, and configs without a name or with a plugin type
// naming a path are refused.
func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		file, body, name, plugins, err string
	}{
		{"a.conflist", `{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"bridge"},{"type":"portmap"}]}`, "a", "bridge,portmap", ""},
		{"b.conf", `{"cniVersion":"0.4.0","name":"b","type":"ptp","ipam":{"type":"host-local"}}`, "b", "ptp", ""},
		{"c.conf", `{"cniVersion":"0.4.0","type":"ptp"}`, "", "", "no network name"},
		{"d.conflist", `{"name":"d","plugins":[{"type":"../../bin/sh"}]}`, "", "", "no valid type"},
		{"e.conflist", `{"name":"e","plugins":[]}`, "", "", "non-empty list"},
		{"f.json", `not json`, "", "", "invalid character"},
	}
	for _, tc := range tests {
		p := filepath.Join(dir, tc.file)
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		list, name, err := readConfig(p)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.file, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		_, _, plugins, err := pluginConfs(list)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, p := range plugins {
			types = append(types, p["type"].(string))
		}
		if name != tc.name || strings.Join(types, ",") != tc.plugins {
			t.Errorf("%s: name %q plugins %v, want %q %s", tc.file, name, types, tc.name, tc.plugins)
		}
	}
}

// TestConf: each plugin gets the list's name and version, the runtime
// config of the capabilities it declares only, and the previous result.
func TestConf(t *testing.T) {
	runtime := map[string]any{"portMappings": []PortMapping{{HostPort: 1, ContainerPort: 2, Protocol: "tcp"}}}
	tests := []struct {
		plugin map[string]any
		prev   json.RawMessage
		want   string
	}{
		{map[string]any{"type": "bridge"}, nil, `{"cniVersion":"1.0.0","name":"n","type":"bridge"}`},
		{map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}}, json.RawMessage(`{"ips":[]}`),
			`{"capabilities":{"portMappings":true},"cniVersion":"1.0.0","name":"n","prevResult":{"ips":[]},"runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":2,"protocol":"tcp"}]},"type":"portmap"}`},
		{map[string]any{"type": "x", "capabilities": map[string]any{"portMappings": false, "bandwidth": true}}, nil,
			`{"capabilities":{"bandwidth":true,"portMappings":false},"cniVersion":"1.0.0","name":"n","type":"x"}`},
	}
	for _, tc := range tests {
		b, err := conf("n", "1.0.0", tc.plugin, runtime, tc.prev)
		if err != nil || string(b) != tc.want {
			t.Errorf("conf(%v) =\n  %s, %v\nwant\n  %s", tc.plugin, b, err, tc.want)
		}
	}
}

// TestStatusOf: the address is the first on an interface in the
// namespace; host-side interfaces are listed; a result without one is
// an error.
func TestStatusOf(t *testing.T) {
	res := `{"cniVersion":"1.0.0","interfaces":[{"name":"nomad"},{"name":"veth1"},{"name":"eth0","sandbox":"/ns"}],
		"ips":[{"address":"172.26.64.5/20","gateway":"172.26.64.1","interface":2}],"dns":{"nameservers":["10.0.0.53"],"domain":"lan"}}`
	st, host, err := statusOf(json.RawMessage(res))
	if err != nil {
		t.Fatal(err)
	}
	if st.InterfaceName != "eth0" || st.Address != "172.26.64.5" || st.DNS == nil || st.DNS.Servers[0] != "10.0.0.53" || st.DNS.Searches[0] != "lan" {
		t.Errorf("status = %+v (dns %+v)", st, st.DNS)
	}
	if strings.Join(host, ",") != "nomad,veth1" {
		t.Errorf("host interfaces = %v", host)
	}
	if _, _, err := statusOf(json.RawMessage(`{"interfaces":[{"name":"veth1"}],"ips":[{"address":"10.0.0.2/24","interface":0}]}`)); err == nil {
		t.Error("an address on a host interface taken for the allocation's")
	}
}

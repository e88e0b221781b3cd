package structs

import (
	"fmt"
	"strings"
	"testing"
)

// TestValidateNetworks: the rules a job sent as JSON meets, as the job
// file parser does, each naming the group, the port and the rule.
func TestValidateNetworks(t *testing.T) {
	net := func(mode string, reserved []Port, dynamic ...Port) []*NetworkResource {
		return []*NetworkResource{{Mode: mode, ReservedPorts: reserved, DynamicPorts: dynamic}}
	}
	many := make([]Port, MaxPortsPerGroup+1)
	for i := range many {
		many[i] = Port{Label: fmt.Sprintf("p%d", i)}
	}
	tests := []struct {
		name string
		nets []*NetworkResource
		want string // "" valid
	}{
		{"valid", net("host", []Port{{Label: "http", Value: 8080, To: 80}}, Port{Label: "dyn"}), ""},
		{"mode unset", net("", nil, Port{Label: "dyn"}), ""},
		{"bridge", net("bridge", []Port{{Label: "http", Value: 8080, To: 80}}, Port{Label: "dyn", To: 9000}), ""},
		{"cni", net("cni/my-net.1", nil, Port{Label: "dyn"}), ""},
		{"none", net("none", nil), ""},
		{"none with ports", net("none", nil, Port{Label: "dyn"}), `network 1: mode "none" has no ports`},
		{"unknown mode", net("overlay", nil), `group "g": network 1: mode "overlay" is not one of "host", "bridge", "none" or "cni/<name>"`},
		{"cni without name", net("cni/", nil), `mode "cni/": the CNI network name after "cni/" is missing`},
		{"cni bad name", net("cni/../x", nil), `must start with a letter or digit`},
		{"cni args in bridge", []*NetworkResource{{Mode: "bridge", CNI: &CNIConfig{Args: map[string]string{"IgnoreUnknown": "true"}}}}, ""},
		{"cni args in host", []*NetworkResource{{Mode: "host", CNI: &CNIConfig{Args: map[string]string{"a": "b"}}}}, `cni is only allowed with mode "bridge" or "cni/<name>"`},
		{"cni arg with separator", []*NetworkResource{{Mode: "bridge", CNI: &CNIConfig{Args: map[string]string{"a": "b;c=d"}}}}, `cni: arg "a": the value must not hold ';'`},
		{"cni arg bad key", []*NetworkResource{{Mode: "cni/x", CNI: &CNIConfig{Args: map[string]string{"a=b": "c"}}}}, `cni: arg name "a=b" must not hold`},
		{"two blocks", append(net("host", nil), net("host", nil)...), "only one network block is allowed (got 2)"},
		{"duplicate label", net("host", []Port{{Label: "a", Value: 1}}, Port{Label: "a"}), `port "a": label defined more than once`},
		{"duplicate static", net("host", []Port{{Label: "a", Value: 80}, {Label: "b", Value: 80}}), `port "b": static port 80 is also asked by port "a"`},
		{"static out of range", net("host", []Port{{Label: "a", Value: 65536}}), `port "a": static port 65536 is outside 1-65535`},
		{"dynamic with value", net("host", nil, Port{Label: "a", Value: 5}), `port "a": a dynamic port must not set a value (got 5)`},
		{"to out of range", net("host", nil, Port{Label: "a", To: -2}), `port "a": to -2 is outside`},
		{"no label", net("host", nil, Port{}), "port: missing label"},
		{"bad label", net("host", nil, Port{Label: "a b"}), `port "a b": label must be letters, digits and underscores`},
		{"host network", net("host", nil, Port{Label: "a", HostNetwork: "public"}), `host_network "public" is not supported`},
		{"too many", net("host", nil, many...), "129 ports asked, at most 128 are allowed"},
		{"null", []*NetworkResource{nil}, "null is not allowed (Networks[0])"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Name: "j", Type: "service", Priority: 50, Datacenters: []string{"dc1"},
				TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Networks: tc.nets, Tasks: []*Task{{Name: "t", Driver: "raw_exec"}}}}}
			j.Canonicalize()
			err := j.Validate()
			if tc.want == "" {
				if err != nil && strings.Contains(err.Error(), "network") {
					t.Fatalf("Validate = %v, want no network error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParsePortRanges(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{"", "[]", ""},
		{"22,80,8500-8600", "[{22 22} {80 80} {8500 8600}]", ""},
		{" 22 , 80 ", "[{22 22} {80 80}]", ""},
		{"0", "", `"0": port 0 is outside 1-65535`},
		{"80-70", "", `"80-70": range must be ascending`},
		{"x", "", `"x": not a port number`},
		{"1-70000", "", "port 70000 is outside"},
	}
	for _, tc := range tests {
		got, err := ParsePortRanges(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePortRanges(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("ParsePortRanges(%q) = %v, %v, want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestPortCollision(t *testing.T) {
	alloc := func(id, status string, ports ...int) *Allocation {
		a := &Allocation{ID: id, DesiredStatus: AllocDesiredStatusRun, ClientStatus: status, AllocatedResources: &AllocatedResources{}}
		for _, p := range ports {
			a.AllocatedResources.Shared.Ports = append(a.AllocatedResources.Shared.Ports, AllocatedPortMapping{Label: "http", Value: p})
		}
		return a
	}
	reserved := []PortRange{{22, 22}, {8500, 8600}}
	tests := []struct {
		name   string
		allocs []*Allocation
		want   string
	}{
		{"distinct", []*Allocation{alloc("a", "running", 80), alloc("b", "pending", 81)}, ""},
		{"same port", []*Allocation{alloc("a", "running", 80), alloc("b", "pending", 80)}, "network: port collision http=80"},
		{"terminal holds none", []*Allocation{alloc("a", "complete", 80), alloc("b", "pending", 80)}, ""},
		{"reserved", []*Allocation{alloc("a", "pending", 8550)}, "network: reserved port collision http=8550"},
		{"reserved after placement", []*Allocation{alloc("old", "running", 8550)}, ""},
	}
	for _, tc := range tests {
		if got := PortCollision(reserved, tc.allocs, func(a *Allocation) bool { return a.ID != "old" }); got != tc.want {
			t.Errorf("%s: PortCollision = %q, want %q", tc.name, got, tc.want)
		}
	}
}

package jobspec

import (
	"fmt"
	"strings"
	"testing"
)

// wrapNetwork puts body inside a group's network block; line 4 is the
// first line of body.
func wrapNetwork(body string) string {
	return "job \"j\" {\n  group \"g\" {\n    network {\n" + body + "    }\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n"
}

func TestNetworkParse(t *testing.T) {
	src := wrapNetwork("      port \"http\" {\n        static = 8080\n        to = 80\n      }\n      port \"dyn\" {}\n      port \"b\" {\n        to = 9000\n      }\n")
	job, err := Parse("job.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	nets := job.TaskGroups[0].Networks
	if len(nets) != 1 {
		t.Fatalf("networks = %d, want 1", len(nets))
	}
	n := nets[0]
	got := fmt.Sprintf("%s %+v %+v", n.Mode, n.ReservedPorts, n.DynamicPorts)
	want := "host [{Label:http Value:8080 To:80 HostNetwork: IgnoreCollision:false}] [{Label:dyn Value:0 To:0 HostNetwork: IgnoreCollision:false} {Label:b Value:0 To:9000 HostNetwork: IgnoreCollision:false}]"
	if got != want {
		t.Errorf("network =\n  %s\nwant\n  %s", got, want)
	}
}

func TestNetworkErrors(t *testing.T) {
	tests := []struct {
		name, body, want, detail string
	}{
		{"unknown mode", "      mode = \"overlay\"\n", "job.hcl:4:14: Unsupported network mode", `mode "overlay" is not one of "host", "bridge", "none" or "cni/<name>"`},
		{"cni mode without name", "      mode = \"cni/\"\n", "job.hcl:4:14: Unsupported network mode", `the CNI network name after "cni/" is missing`},
		{"cni mode bad name", "      mode = \"cni/a b\"\n", "job.hcl:4:14: Unsupported network mode", `hold only letters, digits`},
		{"none with ports", "      mode = \"none\"\n      port \"a\" {}\n", "job.hcl:5:7: Unsupported block type", `mode "none" has no ports`},
		{"cni in host mode", "      cni {\n        args = { a = \"b\" }\n      }\n", "job.hcl:4:7: Unsupported block type", `cni is only allowed with mode = "bridge"`},
		{"cni bad args", "      mode = \"bridge\"\n      cni {\n        args = { a = \"b;c\" }\n      }\n", "job.hcl:6:16: Invalid cni args", `arg "a": the value must not hold ';'`},
		{"duplicate label", "      port \"a\" {}\n      port \"a\" {}\n", "job.hcl:5:12: Duplicate port \"a\"", "already defined at job.hcl:4:7"},
		{"duplicate static port", "      port \"a\" {\n        static = 80\n      }\n      port \"b\" {\n        static = 80\n      }\n",
			"job.hcl:8:18: Duplicate static port", "already asked for at job.hcl:5:18"},
		{"static port zero", "      port \"a\" {\n        static = 0\n      }\n", "job.hcl:5:18: Value out of range", "between 1 and 65535, got 0"},
		{"static port too large", "      port \"a\" {\n        static = 70000\n      }\n", "job.hcl:5:18: Value out of range", "got 70000"},
		{"to too large", "      port \"a\" {\n        to = 65536\n      }\n", "job.hcl:5:14: Value out of range", "between -1 and 65535"},
		{"static not a number", "      port \"a\" {\n        static = \"http\"\n      }\n", "job.hcl:5:18: Incorrect attribute value type", "a number is required"},
		{"bad label", "      port \"a-b\" {}\n", "job.hcl:4:12: Invalid port label", "NOMAD_PORT_a-b"},
		{"other host network", "      port \"a\" {\n        host_network = \"public\"\n      }\n", "job.hcl:5:24: Unsupported host_network", `"public"`},
		{"unknown port attribute", "      port \"a\" {\n        value = 1\n      }\n", "job.hcl:5:9: Unsupported argument", `"value"`},
		{"dns server not an IP", "      dns {\n        servers = [\"1.1.1.1\", \"dns\"]\n      }\n", "job.hcl:5:19: Invalid dns", `servers[1]: "dns" is not an IP address`},
		{"dns four servers", "      dns {\n        servers = [\"1.1.1.1\", \"1.1.1.2\", \"1.1.1.3\", \"1.1.1.4\"]\n      }\n", "job.hcl:5:19: Invalid dns", "at most 3"},
		{"dns bad option", "      dns {\n        options = [\"ndots: 1\"]\n      }\n", "job.hcl:5:19: Invalid dns", `options[0]`},
		{"hostname in host mode", "      hostname = \"web\"\n", "job.hcl:4:18: Invalid hostname", `hostname is only allowed with mode "bridge"`},
		{"hostname bad", "      mode = \"bridge\"\n      hostname = \"a_b\"\n", "job.hcl:5:18: Invalid hostname", `hostname "a_b" must be`},
		{"too many ports", manyPorts(129), "job.hcl:132:7: Too many ports", "at most 128 ports"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := Parse("job.hcl", []byte(wrapNetwork(tt.body)))
			if err == nil {
				t.Fatalf("no error; parsed %+v", job)
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if !strings.HasPrefix(first, tt.want) || !strings.Contains(first, tt.detail) {
				t.Errorf("first error line:\n  %s\nwant prefix %q containing %q", first, tt.want, tt.detail)
			}
		})
	}
}

func TestNetworkTwoBlocks(t *testing.T) {
	src := "job \"j\" {\n  group \"g\" {\n    network {}\n    network {}\n  }\n}\n"
	_, err := Parse("job.hcl", []byte(src))
	if err == nil || !strings.HasPrefix(err.Error(), "job.hcl:4:5: Duplicate network block") {
		t.Fatalf("err = %v, want a duplicate network block at 4:5", err)
	}
}

func manyPorts(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "      port \"p%d\" {}\n", i)
	}
	return b.String()
}

// TestNetworkModesParse: bridge, cni/<name> and none modes parse as Nomad
// parses them, with `to` the port inside the namespace and cni args kept.
func TestNetworkModesParse(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"bridge", "      mode = \"bridge\"\n      port \"http\" {\n        static = 8080\n        to = 80\n      }\n      port \"app\" {\n        to = 9000\n      }\n",
			"bridge [{Label:http Value:8080 To:80 HostNetwork: IgnoreCollision:false}] [{Label:app Value:0 To:9000 HostNetwork: IgnoreCollision:false}] <nil>"},
		{"cni with args", "      mode = \"cni/mynet\"\n      port \"p\" {}\n      cni {\n        args = { IgnoreUnknown = \"true\" }\n      }\n",
			"cni/mynet [] [{Label:p Value:0 To:0 HostNetwork: IgnoreCollision:false}] &{Args:map[IgnoreUnknown:true]}"},
		{"none", "      mode = \"none\"\n", "none [] [] <nil>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := Parse("job.hcl", []byte(wrapNetwork(tt.body)))
			if err != nil {
				t.Fatal(err)
			}
			n := job.TaskGroups[0].Networks[0]
			if got := fmt.Sprintf("%s %+v %+v %+v", n.Mode, n.ReservedPorts, n.DynamicPorts, n.CNI); got != tt.want {
				t.Errorf("network =\n  %s\nwant\n  %s", got, tt.want)
			}
			if err := job.Validate(); err != nil && strings.Contains(err.Error(), "network") {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestNetworkDNSHostnameParse: a dns block and a hostname (literal or
// interpolated by the client) parse to Nomad's JSON fields.
func TestNetworkDNSHostnameParse(t *testing.T) {
	tests := []struct {
		name, body, hostname string
	}{
		{"literal", "      mode = \"bridge\"\n      hostname = \"web\"\n", "web"},
		{"interpolated", "      mode = \"bridge\"\n      hostname = \"web-${NOMAD_ALLOC_INDEX}\"\n", "web-${NOMAD_ALLOC_INDEX}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body + "      dns {\n        servers = [\"10.0.0.53\", \"2001:db8::53\"]\n        searches = [\"svc.example\"]\n        options = [\"ndots:2\"]\n      }\n"
			job, err := Parse("job.hcl", []byte(wrapNetwork(body)))
			if err != nil {
				t.Fatal(err)
			}
			n := job.TaskGroups[0].Networks[0]
			if n.Hostname != tt.hostname {
				t.Fatalf("Hostname = %q, want %q", n.Hostname, tt.hostname)
			}
			d := n.DNS
			if d == nil || strings.Join(d.Servers, ",") != "10.0.0.53,2001:db8::53" || strings.Join(d.Searches, ",") != "svc.example" || strings.Join(d.Options, ",") != "ndots:2" {
				t.Fatalf("DNS = %+v", d)
			}
			if err := job.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

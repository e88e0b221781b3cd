package jobspec

import (
	"strings"
	"testing"
	"time"
)

// wrapService puts body inside a group (before its network block and
// task); line 3 is the first line of body.
func wrapService(body string) string {
	return "job \"j\" {\n  group \"g\" {\n" + body +
		"    network {\n      port \"http\" {}\n    }\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n"
}

func TestServiceDefaults(t *testing.T) {
	src := wrapService("    service {\n      provider = \"nomad\"\n      port = \"http\"\n      check {\n        type = \"http\"\n        path = \"/\"\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n    }\n")
	job, err := Parse("job.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	s := job.TaskGroups[0].Services[0]
	c := s.Checks[0]
	got := []string{s.Name, s.AddressMode, s.OnUpdate, c.Name, c.Protocol, c.Method, c.AddressMode, c.OnUpdate}
	want := []string{"j-g", "auto", "require_healthy", `service: "j-g" check`, "http", "GET", "host", "require_healthy"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("defaults = %q, want %q", got, want)
	}
	if c.Interval != 10*time.Second || c.Timeout != 2*time.Second {
		t.Errorf("interval, timeout = %s, %s", c.Interval, c.Timeout)
	}
}

func TestServiceTaskDefaultName(t *testing.T) {
	src := "job \"j\" {\n  name = \"shop\"\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n      service {\n        provider = \"nomad\"\n      }\n    }\n  }\n}\n"
	job, err := Parse("job.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s := job.TaskGroups[0].Tasks[0].Services[0]
	if s.Name != "shop-g-t" || s.TaskName != "t" {
		t.Errorf("name, task = %q, %q; want shop-g-t, t", s.Name, s.TaskName)
	}
}

// TestServiceErrors: what is not valid for Nomad either is refused by the
// parser at its file:line:col.
func TestServiceErrors(t *testing.T) {
	svc := func(lines ...string) string {
		return "    service {\n" + strings.Join(lines, "") + "    }\n"
	}
	check := func(lines ...string) string {
		return "      check {\n" + strings.Join(lines, "") + "      }\n"
	}
	const nomad = "      provider = \"nomad\"\n"
	tests := []struct {
		name, body, want, detail string
	}{
		{"bad interval", svc(nomad, check("        type = \"tcp\"\n        interval = \"soon\"\n        timeout = \"2s\"\n")), "job.hcl:7:20: ", "soon"},
		{"unknown service attribute", svc(nomad, "      weight = 3\n"), "job.hcl:5:7: Unsupported argument", `"weight"`},
		{"threshold out of range", svc(nomad, check("        type = \"tcp\"\n        interval = \"10s\"\n        timeout = \"2s\"\n        success_before_passing = 5000\n")), "job.hcl:9:34: Value out of range", "5000"},
		{"too many checks", svc(nomad, strings.Repeat(check("        type = \"tcp\"\n        interval = \"10s\"\n        timeout = \"2s\"\n"), 17)), "job.hcl:85:7: Too many checks", "at most 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := Parse("job.hcl", []byte(wrapService(tt.body)))
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

// TestServiceValidation: the rules that need the whole group are
// validation's; `job validate` (Check) places each at its block.
func TestServiceValidation(t *testing.T) {
	const nomad = "      provider = \"nomad\"\n"
	tcp := "      check {\n        type = \"tcp\"\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n"
	tests := []struct {
		name, body, want, detail string
	}{
		{"unknown port label", "    service {\n" + nomad + "      port = \"web\"\n    }\n",
			"job.hcl:3:5: Invalid job", `group "g": service "j-g": port "web" is not a port label of the group's network block`},
		{"port out of range", "    service {\n" + nomad + "      port = \"70000\"\n    }\n",
			"job.hcl:3:5: Invalid job", "port 70000 is outside 1-65535"},
		{"duplicate names", "    service {\n" + nomad + "    }\n    service {\n" + nomad + "    }\n",
			"job.hcl:3:5: Invalid job", "service names must be unique in a group"},
		{"tcp check without port", "    service {\n" + nomad + tcp + "    }\n",
			"job.hcl:5:7: Invalid job", `check "service: \"j-g\" check": an tcp check needs a port`},
		{"http check without path", "    service {\n" + nomad + "      port = \"http\"\n      check {\n        type = \"http\"\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n    }\n",
			"job.hcl:6:7: Invalid job", "an http check needs a path"},
		{"script check without command or task", "    service {\n" + nomad + "      check {\n        type = \"script\"\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n    }\n",
			"job.hcl:5:7: Invalid job", "a script check needs a command"},
		{"script check of a group service without task", "    service {\n" + nomad + "      check {\n        type = \"script\"\n        command = \"/bin/true\"\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n    }\n",
			"job.hcl:5:7: Invalid job", "needs a task to run in"},
		{"interval too short", "    service {\n" + nomad + "      port = \"http\"\n      check {\n        type = \"tcp\"\n        interval = \"100ms\"\n        timeout = \"2s\"\n      }\n    }\n",
			"job.hcl:6:7: Invalid job", "interval must be at least 1s (got 100ms)"},
		{"timeout too long", "    service {\n" + nomad + "      port = \"http\"\n      check {\n        type = \"tcp\"\n        interval = \"10s\"\n        timeout = \"2h\"\n      }\n    }\n",
			"job.hcl:6:7: Invalid job", "timeout must be at most 1h0m0s"},
		{"alloc address mode", "    service {\n" + nomad + "      address_mode = \"alloc\"\n    }\n",
			"job.hcl:3:5: Invalid job", `address_mode "alloc" is not supported`},
		{"bad name", "    service {\n" + nomad + "      name = \"web_1\"\n    }\n",
			"job.hcl:3:5: Invalid job", "RFC 1123"},
		{"unknown task", "    service {\n" + nomad + "      task = \"nope\"\n    }\n",
			"job.hcl:3:5: Invalid job", `task "nope" is not a task of the group`},
		{"bad on_update", "    service {\n" + nomad + "      on_update = \"never\"\n    }\n",
			"job.hcl:3:5: Invalid job", `on_update is "never"`},
		{"too many tags", "    service {\n" + nomad + "      tags = [" + strings.Repeat("\"a\",", 65) + "]\n    }\n",
			"job.hcl:3:5: Invalid job", "65 tags, more than 64"},
		// What needs Consul parses, as in Nomad, and is refused here.
		{"consul provider", "    service {\n      provider = \"consul\"\n    }\n", "job.hcl:3:5: Invalid job", `provider "consul" needs Consul`},
		{"unknown provider", "    service {\n      provider = \"etcd\"\n    }\n", "job.hcl:3:5: Invalid job", `provider "etcd" is unknown`},
		{"connect", "    service {\n" + nomad + "      connect {\n        native = true\n      }\n    }\n", "job.hcl:5:7: Invalid job", `service "j-g": connect: not supported: it needs Consul Connect`},
		{"identity", "    service {\n" + nomad + "      identity {}\n    }\n", "job.hcl:5:7: Invalid job", "identity: not supported"},
		{"tagged addresses", "    service {\n" + nomad + "      tagged_addresses = { lan = \"10.0.0.1\" }\n    }\n", "job.hcl:5:7: Invalid job", "tagged_addresses: not supported: tagged addresses are Consul's"},
		{"grpc check", "    service {\n" + nomad + "      port = \"http\"\n      check {\n        type = \"grpc\"\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n    }\n", "job.hcl:6:7: Invalid job", `type "grpc" is not supported`},
		{"grpc_service", "    service {\n" + nomad + "      port = \"http\"\n      check {\n        type = \"tcp\"\n        grpc_service = \"x\"\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n    }\n", "job.hcl:6:7: Invalid job", "grpc_service is for grpc checks"},
		{"check without type", "    service {\n" + nomad + "      port = \"http\"\n      check {\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n    }\n", "job.hcl:6:7: Invalid job", "type is required"},
		{"check without interval", "    service {\n" + nomad + "      port = \"http\"\n      check {\n        type = \"tcp\"\n        timeout = \"2s\"\n      }\n    }\n", "job.hcl:6:7: Invalid job", "interval must be at least 1s (got 0s)"},
		{"unknown check type", "    service {\n" + nomad + "      port = \"http\"\n      check {\n        type = \"udp\"\n        interval = \"10s\"\n        timeout = \"2s\"\n      }\n    }\n", "job.hcl:6:7: Invalid job", `type is "udp"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Check("job.hcl", []byte(wrapService(tt.body)), testOptions)
			if err == nil {
				t.Fatal("no error")
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if !strings.HasPrefix(first, tt.want) || !strings.Contains(first, tt.detail) {
				t.Errorf("first error line:\n  %s\nwant prefix %q containing %q", first, tt.want, tt.detail)
			}
		})
	}
}

package agent

import (
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	src := `
data_dir  = "/var/lib/drover"
bind_addr = "0.0.0.0"
ports {
  http = 5646
}
server {
  enabled          = true
  bootstrap_expect = 1
  num_schedulers   = 4
}
client {
  enabled    = true
  node_class = "batch"
  meta = { rack = "r1" }
}
plugin_dir = "/opt/drover/plugins"
plugin "gpu-batch" {
  args = ["-v"]
  config {
    level = 3
    zones = ["a", "b"]
  }
}
`
	c, err := ParseConfig("agent.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/var/lib/drover" || c.Ports.HTTP != 5646 || c.Ports.RPC != 4647 || c.Server.NumSchedulers != 4 {
		t.Fatalf("config: %+v ports %+v server %+v", c, c.Ports, c.Server)
	}
	if c.Client.NodeClass != "batch" || c.Client.Meta["rack"] != "r1" {
		t.Fatalf("client: %+v", c.Client)
	}
	if len(c.Plugins) != 1 || c.Plugins[0].Name != "gpu-batch" || c.Plugins[0].Args[0] != "-v" {
		t.Fatalf("plugins: %+v", c.Plugins)
	}
	settings, err := c.Plugins[0].PluginSettings()
	if err != nil {
		t.Fatal(err)
	}
	if settings["level"] != float64(3) || len(settings["zones"].([]any)) != 2 {
		t.Fatalf("plugin settings: %#v", settings)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"unknown attribute", "data_dir = \"/x\"\nserver { enabeld = true }\n", "agent.hcl:2:10"},
		{"nothing enabled", "data_dir = \"/x\"\n", "at least one of server.enabled or client.enabled"},
		{"no data dir", "server { enabled = true }\n", "data_dir: required"},
		{"two config blocks", "data_dir = \"/x\"\nserver { enabled = true }\nplugin \"p\" {\n config {}\n config {}\n}\n", "agent.hcl:5:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("agent.hcl", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/hclguard"
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
  fingerprint_interval = "5s"
  max_kill_timeout     = "2m"
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
	if c.Client.NodeClass != "batch" || c.Client.Meta["rack"] != "r1" || c.Client.FingerprintInterval != "5s" || c.Client.MaxKillTimeout != "2m" {
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
		{"bad fingerprint interval", "data_dir = \"/x\"\nclient {\n  enabled = true\n  servers = [\"s:4647\"]\n  fingerprint_interval = \"soon\"\n}\n", `agent.hcl:5:26: client.fingerprint_interval: "soon" is not a duration`},
		{"bad max kill timeout", "data_dir = \"/x\"\nclient {\n  enabled = true\n  servers = [\"s:4647\"]\n  max_kill_timeout = \"long\"\n}\n", `agent.hcl:5:22: client.max_kill_timeout: "long" is not a duration`},
		{"zero max kill timeout", "data_dir = \"/x\"\nclient {\n  enabled = true\n  servers = [\"s:4647\"]\n  max_kill_timeout = \"0s\"\n}\n", "client.max_kill_timeout: must be positive"},
		{"zero fingerprint interval", "data_dir = \"/x\"\nclient {\n  enabled = true\n  servers = [\"s:4647\"]\n  fingerprint_interval = \"0s\"\n}\n", "client.fingerprint_interval: must be positive"},
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

// `drover agent -dev -config extra.hcl`: the file overrides the -dev
// defaults and needs no data_dir, as in Nomad.
func TestLoadConfigDevMerges(t *testing.T) {
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra.hcl")
	writeFile(t, extra, []byte(`
name = "dev1"
client {
  meta = { rack = "r9" }
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
`), 0o600)
	c, err := LoadConfig(true, extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if !c.DevMode || c.DataDir != "" || c.NodeName != "dev1" || c.BindAddr != "127.0.0.1" || c.Ports.HTTP != 4646 {
		t.Errorf("merged config: %+v ports %+v", c, c.Ports)
	}
	if !c.Server.Enabled || !c.Client.Enabled || c.Client.Meta["rack"] != "r9" || len(c.Plugins) != 1 {
		t.Errorf("merged blocks: server %+v client %+v plugins %v", c.Server, c.Client, c.Plugins)
	}

	// Without -dev the same file is not a whole config.
	c, err = LoadConfig(false, extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "server.enabled or client.enabled") {
		t.Errorf("Validate without -dev: %v", err)
	}
}

// Several -config paths, files and directories, merge in order.
func TestLoadConfigMergeOrder(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.hcl")
	writeFile(t, base, []byte(`
data_dir = "/a"
ports { http = 1111 }
client {
  enabled = true
  servers = ["s1:4647"]
  meta = { a = "1", b = "1" }
}
server { enabled = true }
`), 0o600)
	confd := filepath.Join(dir, "conf.d")
	writeFile(t, filepath.Join(confd, "10-dir.hcl"), []byte("data_dir = \"/b\"\nclient {\n servers = [\"s2:4647\"]\n meta = { b = \"2\" }\n}\n"), 0o600)
	writeFile(t, filepath.Join(confd, "20-ports.hcl"), []byte("ports { rpc = 2222 }\n"), 0o600)
	writeFile(t, filepath.Join(confd, "ignored.txt"), []byte("not hcl"), 0o600)
	c, err := LoadConfig(false, base, confd)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/b" || c.Ports.HTTP != 1111 || c.Ports.RPC != 2222 || c.BindAddr != "0.0.0.0" {
		t.Errorf("merged: %+v ports %+v", c, c.Ports)
	}
	if strings.Join(c.Client.Servers, ",") != "s1:4647,s2:4647" || c.Client.Meta["a"] != "1" || c.Client.Meta["b"] != "2" {
		t.Errorf("merged client: %+v", c.Client)
	}
	if _, err := LoadConfig(false, filepath.Join(dir, "missing.hcl")); err == nil {
		t.Error("a missing config file was accepted")
	}
	writeFile(t, filepath.Join(dir, "bad.hcl"), []byte("server {\n  enabeld = true\n}\n"), 0o600)
	if _, err := LoadConfig(true, filepath.Join(dir, "bad.hcl")); err == nil || !strings.Contains(err.Error(), "bad.hcl:2:3") {
		t.Errorf("bad file: %v", err)
	}
}

// Nomad's `plugin "raw_exec" { config { … } }` configures the built-in
// driver; keys drover does not honour are refused with their position
// when the file is parsed, values the driver refuses when it judges them
// (at agent start).
func TestParseConfigNomadDriverStanza(t *testing.T) {
	ds := driverChecker(t)
	ok := "data_dir = \"/x\"\nclient {\n enabled = true\n servers = [\"s:1\"]\n}\nplugin \"raw_exec\" {\n  config {\n    enabled = true\n  }\n}\n"
	if _, err := ParseConfig("agent.hcl", []byte(ok)); err != nil {
		t.Fatalf("Nomad raw_exec stanza: %v", err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"unknown key", `denied_host_uids = "0"`, `agent.hcl:8:5: plugin "raw_exec": config denied_host_uids is not supported`},
		{"wrong type", `enabled = "yes"`, `agent.hcl:8:15: plugin "raw_exec": config enabled must be a bool`},
		{"not a list", `denied_host_users = "root"`, `agent.hcl:8:25: plugin "raw_exec": config denied_host_users must be a list of string`},
		{"not strings", `denied_host_users = [0]`, `agent.hcl:8:25: plugin "raw_exec": config denied_host_users must be a list of string`},
		{"empty user", `denied_host_users = [""]`, `denied_host_users[0] is empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "data_dir = \"/x\"\nclient {\n enabled = true\n servers = [\"s:1\"]\n}\nplugin \"raw_exec\" {\n  config {\n    " + tc.body + "\n  }\n}\n"
			c, err := ParseConfig("agent.hcl", []byte(src))
			if err == nil {
				err = checkStanzas(ds, c)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// Input nested or chained deep enough to exhaust the HCL parser's stack
// is an error, not a crash of the process (found by FuzzParseConfig's
// follow-up: the fuzzer's small inputs never get that deep).
func TestParseConfigTooDeep(t *testing.T) {
	// Each of these crashed the test binary (fatal: stack overflow) before
	// the check; all stay under the size limit.
	for name, src := range map[string]string{
		"brackets":  "data_dir = " + strings.Repeat("[", 150000),
		"templates": "data_dir = " + strings.Repeat(`"${`, 150000),
		"negations": "log_json = " + strings.Repeat("!", hclguard.MaxFileBytes-20) + "true",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig("deep.hcl", []byte(src))
			if err == nil || !strings.Contains(err.Error(), "deep.hcl:1:") {
				t.Fatalf("got %.200v; want a positioned error", err)
			}
		})
	}
	big := "data_dir = " + strings.Repeat("1+", hclguard.MaxFileBytes/2) + "1"
	if _, err := ParseConfig("big.hcl", []byte(big)); err == nil || !strings.Contains(err.Error(), "may be at most") {
		t.Errorf("a file over the size limit: %.200v", err)
	}
	// Real nesting is shallow and passes.
	ok := "data_dir = \"/x\"\nserver {\n  enabled = true\n  server_join {\n    retry_join = [\"a\", \"${\"b\"}\"]\n  }\n}\n"
	if _, err := ParseConfig("ok.hcl", []byte(ok)); err != nil {
		t.Fatal(err)
	}
}

// `drover agent -dev -config x.hcl`: the file is merged over the -dev
// defaults, plugin stanzas included, and the result is a valid dev config.
func TestLoadConfigDevWithFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.hcl")
	src := "plugin_dir = \"/opt/p\"\nlog_level = \"DEBUG\"\nplugin \"gpu\" {\n  config {\n    k = 1\n  }\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(true, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	stanzas, err := pluginStanzas(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.DevMode || cfg.PluginDir != "/opt/p" || cfg.LogLevel != "DEBUG" || cfg.BindAddr != "127.0.0.1" ||
		!cfg.Server.Enabled || !cfg.Client.Enabled || len(stanzas) != 1 || stanzas[0].Name != "gpu" || !hasAttr(stanzas[0].Config, "k") {
		t.Errorf("config = %+v, stanzas %+v", cfg, stanzas)
	}
}

// hasAttr reports whether body (a config block's) sets attribute name.
func hasAttr(body hcl.Body, name string) bool {
	if body == nil {
		return false
	}
	attrs, diags := body.JustAttributes()
	_, ok := attrs[name]
	return !diags.HasErrors() && ok
}

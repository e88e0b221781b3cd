package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// harnessJSON is the file Nomad's api test harness writes (no extension,
// JSON, Nomad's keys), for a server-only agent.
const harnessJSON = `{"name":"node-20001","data_dir":"/tmp/nomad123","disable_update_check":true,"log_level":"ERROR",` +
	`"ports":{"http":20001,"rpc":20002,"serf":20003},"server":{"enabled":true,"bootstrap_expect":1},` +
	`"client":{"enabled":false},"vault":{"enabled":false},"acl":{"enabled":false}}`

func TestNomadConfigJSONByContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nomad123456")
	if err := os.WriteFile(path, []byte(harnessJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(false, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "node-20001" || c.Ports.HTTP != 20001 || c.Ports.RPC != 20002 || !c.Server.Enabled ||
		c.Server.BootstrapExpect != 1 || c.Client.Enabled || c.LogLevel != "ERROR" {
		t.Fatalf("config: %+v ports %+v server %+v client %+v", c, c.Ports, c.Server, c.Client)
	}
	// vault { enabled = false } and disable_update_check serve what drover
	// does anyway: no warning; ports.serf is named.
	if len(c.Warnings) != 1 || c.Warnings[0].Key != "ports.serf" || !strings.HasPrefix(c.Warnings[0].Pos, path+":1:") {
		t.Fatalf("warnings: %+v", c.Warnings)
	}
}

func TestNomadConfigWarnings(t *testing.T) {
	for _, tc := range []struct {
		name, file, src string
		want            []string // "pos key" of each warning, in order
	}{
		{"hcl consul and serf", "a.hcl",
			"data_dir = \"/x\"\nconsul {\n  address = \"127.0.0.1:8500\"\n}\nports {\n  http = 1\n  serf = 3\n}\nserver { enabled = true }\n",
			[]string{"a.hcl:2:1 consul", "a.hcl:7:3 ports.serf"}},
		{"json consul and serf", "a.json",
			"{\n\"data_dir\": \"/x\",\n\"consul\": {\"address\": \"x\"},\n\"ports\": {\"serf\": 3},\n\"server\": {\"enabled\": true}\n}\n",
			[]string{"a.json:3:1 consul", "a.json:4:11 ports.serf"}},
		{"vault enabled is named", "a.hcl",
			"data_dir = \"/x\"\nvault {\n  enabled = true\n}\nserver { enabled = true }\n",
			[]string{"a.hcl:2:1 vault"}},
		{"vault disabled is not", "a.hcl",
			"data_dir = \"/x\"\nvault {\n  enabled = false\n}\nserver { enabled = true }\n", nil},
		{"json vault disabled is not", "cfg",
			`{"data_dir": "/x", "vault": {"enabled": false}, "server": {"enabled": true}}`, nil},
		{"nested keys", "a.hcl",
			"data_dir = \"/x\"\nserver {\n  enabled = true\n  raft_protocol = 3\n}\nclient {\n  enabled = true\n  gc_interval = \"1m\"\n  reserved {\n    cores = \"1\"\n  }\n}\ntelemetry {\n  publish_node_metrics = true\n  prometheus_metrics = true\n}\n",
			[]string{"a.hcl:4:3 server.raft_protocol", "a.hcl:8:3 client.gc_interval", "a.hcl:10:5 client.reserved.cores", "a.hcl:14:3 telemetry.publish_node_metrics"}},
		{"silent keys", "a.hcl",
			"data_dir = \"/x\"\ndisable_update_check = true\ndisable_anonymous_signature = true\nserver { enabled = true }\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(tc.file, []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range c.Warnings {
				got = append(got, w.Pos+" "+w.Key)
				if w.Reason == "" || !strings.Contains(w.String(), w.Key) {
					t.Errorf("warning without its reason or key: %q", w.String())
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNomadConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file, src, want string
	}{
		{"hcl typo at top", "a.hcl", "data_dir = \"/x\"\ndatacentre = \"dc1\"\nserver { enabled = true }\n",
			"a.hcl:2:1: datacentre: not a key of Nomad's or drover's agent config"},
		{"hcl typo in server", "a.hcl", "data_dir = \"/x\"\nserver {\n  enabled = true\n  bootstrap_expected = 1\n}\n",
			"a.hcl:4:3: server.bootstrap_expected: not a key"},
		{"json typo in client", "cfg", "{\"data_dir\": \"/x\",\n \"client\": {\"enabled\": true, \"server\": [\"a\"]}}",
			"cfg:2:30: client.server: not a key"},
		{"json wrong type", "cfg", "{\"data_dir\": \"/x\",\n \"server\": {\"enabled\": true, \"bootstrap_expect\": \"one\"}}",
			"cfg:2:50: server.bootstrap_expect: Unsuitable value type"},
		{"json wrong value", "cfg", "{\"data_dir\": \"/x\", \"log_level\": \"loud\",\n \"server\": {\"enabled\": true}}",
			"cfg:1:33: log_level: must be one of"},
		{"json port out of range", "cfg", "{\"data_dir\": \"/x\",\n\"ports\": {\"http\": 70000},\n \"server\": {\"enabled\": true}}",
			"cfg:2:19: ports.http"},
		{"hcl wrong type", "a.hcl", "data_dir = \"/x\"\nserver {\n  enabled = \"maybe\"\n}\n", "a.hcl:3:14: server.enabled: Unsuitable value type"},
		{"json syntax", "cfg", "{\"data_dir\": \"/x\",}", "cfg:1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(tc.file, []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestIsJSON(t *testing.T) {
	for src, want := range map[string]bool{
		`{"a": 1}`:          true,
		"\n\t {":            true,
		"\ufeff{}":          true,
		"a = 1":             false,
		"# {\n":             false,
		"":                  false,
		"server {\n}":       false,
		"/* c */ {\"a\":1}": false,
	} {
		if got := isJSON([]byte(src)); got != want {
			t.Errorf("isJSON(%q) = %v, want %v", src, got, want)
		}
	}
}

// TestLoadConfigDevWithNomadJSON: -dev with the harness's file (dev mode
// turns the client on; the file's ports are the agent's).
func TestLoadConfigDevWithNomadJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nomad1")
	if err := os.WriteFile(path, []byte(harnessJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(true, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.DevMode || !c.Client.Enabled || !c.Server.Enabled || c.Ports.HTTP != 20001 || c.Ports.RPC != 20002 {
		t.Fatalf("config: %+v ports %+v", c, c.Ports)
	}
	if !c.rpcPortSet() {
		t.Fatal("the file's ports.rpc is not seen as set")
	}
}

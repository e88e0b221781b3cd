package agent

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// block is a config block in a test config tree; other maps are attribute
// values (meta, options).
type block map[string]any

// renderHCL writes tree as an agent config file in HCL.
func renderHCL(b *strings.Builder, tree block, indent string) {
	keys := make([]string, 0, len(tree))
	for k := range tree {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch v := tree[k].(type) {
		case block:
			if k == "plugin" { // labelled: plugin "<name>" { … }
				for name, body := range v {
					fmt.Fprintf(b, "%splugin %s {\n", indent, strconv.Quote(name))
					renderHCL(b, body.(block), indent+"  ")
					fmt.Fprintf(b, "%s}\n", indent)
				}
				continue
			}
			fmt.Fprintf(b, "%s%s {\n", indent, k)
			renderHCL(b, v, indent+"  ")
			fmt.Fprintf(b, "%s}\n", indent)
		default:
			fmt.Fprintf(b, "%s%s = %s\n", indent, k, hclValue(v))
		}
	}
}

func hclValue(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case map[string]string:
		var parts []string
		for k, s := range v {
			parts = append(parts, strconv.Quote(k)+" = "+strconv.Quote(s))
		}
		return "{\n" + strings.Join(parts, "\n") + "\n}"
	default:
		return fmt.Sprint(v)
	}
}

// set puts value at the dotted path of tree, creating blocks.
func set(tree block, path string, value any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := tree[p].(block)
		if !ok {
			next = block{}
			tree[p] = next
		}
		tree = next
	}
	tree[parts[len(parts)-1]] = value
}

func baseTree() block {
	return block{
		"data_dir": "/x",
		"server":   block{"enabled": true},
		"client":   block{"enabled": true},
	}
}

// parseTree parses tree as an HCL or a JSON file, then validates it as
// the agent does.
func parseTree(t *testing.T, tree block, format string) error {
	t.Helper()
	var src []byte
	if format == "json" {
		var err error
		if src, err = json.MarshalIndent(tree, "", "  "); err != nil {
			t.Fatal(err)
		}
	} else {
		var b strings.Builder
		renderHCL(&b, tree, "")
		src = []byte(b.String())
	}
	path := filepath.Join(t.TempDir(), "agent."+format)
	writeFile(t, path, src, 0o600)
	c, err := LoadConfig(false, path)
	if err != nil {
		return err
	}
	return c.Validate()
}

func long(n int) string { return strings.Repeat("a", n) }

func many(n int, v string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestConfigRules: every agent setting's rule refuses a value that breaks
// it, in an HCL and in a JSON file alike, with one line that names the
// file:line:col where the value is, the key and the rule.
func TestConfigRules(t *testing.T) {
	bigMap := map[string]string{}
	for i := range maxMap + 1 {
		bigMap["k"+strconv.Itoa(i)] = "v"
	}
	cases := []struct {
		key   string
		value any
		want  string
	}{
		{"region", long(129), "region: must be at most 128 bytes (got 129)"},
		{"datacenter", "dc\n1", "datacenter: must not contain control characters"},
		{"name", long(200), "name: must be at most 128 bytes"},
		{"data_dir", "/" + long(4096), "data_dir: must be at most 4096 bytes"},
		{"plugin_dir", "/p\t", "plugin_dir: must not contain control characters"},
		{"bind_addr", "0.0.0.0 1.2.3.4", "bind_addr: must be a host or host:port without spaces"},
		{"log_level", "verbose", `log_level: must be one of trace, debug, info, warn, error (got "verbose")`},
		{"http_max_body_bytes", -1, "http_max_body_bytes: must be 0 (the default) or between 1024 and 1073741824 (got -1)"},
		{"http_max_body_bytes", 100, "http_max_body_bytes: must be 0 (the default) or between 1024 and 1073741824 (got 100)"},
		{"http_max_body_bytes", int64(1) << 31, "http_max_body_bytes: must be 0 (the default) or between 1024 and 1073741824"},
		{"ports.http", 70000, "ports.http: must be 0 (the default) or between 1 and 65535 (got 70000)"},
		{"ports.rpc", -1, "ports.rpc: must be 0 (the default) or between 1 and 65535 (got -1)"},
		{"ports.rpc", 4646, "ports.rpc: must differ from ports.http (both are 4646)"},
		{"advertise.http", "10.0.0.1:99999", `advertise.http: port "99999" must be between 1 and 65535`},
		{"advertise.rpc", long(300), "advertise.rpc: must be at most 256 bytes"},
		{"server.bootstrap_expect", -1, "server.bootstrap_expect: must be between 0 and 16 (got -1)"},
		{"server.bootstrap_expect", 17, "server.bootstrap_expect: must be between 0 and 16 (got 17)"},
		{"server.num_schedulers", 1000000, "server.num_schedulers: must be 0 (the default) or between 1 and 128 (got 1000000)"},
		{"server.num_schedulers", -1, "server.num_schedulers: must be 0 (the default) or between 1 and 128 (got -1)"},
		{"server.heartbeat_grace", "-1s", "server.heartbeat_grace: must not be negative and at most 1h0m0s (got -1s)"},
		{"server.heartbeat_grace", "2h", "server.heartbeat_grace: must be at most 1h0m0s (got 2h)"},
		{"server.min_heartbeat_ttl", "0s", "server.min_heartbeat_ttl: must be positive"},
		{"server.min_heartbeat_ttl", "soon", `server.min_heartbeat_ttl: "soon" is not a duration`},
		{"server.max_heartbeats_per_second", -1, "server.max_heartbeats_per_second: must be 0 (the default, 50) or between 0.01 and 100000 (got -1)"},
		{"server.max_heartbeats_per_second", 1e6, "server.max_heartbeats_per_second: must be 0 (the default, 50) or between 0.01 and 100000 (got 1e+06)"},
		{"server.failover_heartbeat_ttl", "0s", "server.failover_heartbeat_ttl: must be positive"},
		{"server.failover_heartbeat_ttl", "25h", "server.failover_heartbeat_ttl: must be at most 24h0m0s (got 25h)"},
		{"server.raft_snapshot_threshold", -1, "server.raft_snapshot_threshold: must be between 0 and 10000000 (got -1)"},
		{"server.raft_snapshot_interval", "25h", "server.raft_snapshot_interval: must be at most 24h0m0s (got 25h)"},
		{"server.raft_snapshot_interval", "-5s", "server.raft_snapshot_interval: must be positive"},
		{"server.raft_trailing_logs", 10000001, "server.raft_trailing_logs: must be between 0 and 10000000 (got 10000001)"},
		{"server.raft_multiplier", 11, "server.raft_multiplier: must be between 1 and 10 (got 11)"},
		{"server.enabled_drivers", many(257, "raw_exec"), "server.enabled_drivers: must have at most 256 entries (got 257)"},
		{"server.enabled_drivers", []string{long(129)}, "server.enabled_drivers[0]: must be at most 128 bytes"},
		{"server.scheduler_call_timeout", "2h", "server.scheduler_call_timeout: must be at most 1h0m0s (got 2h)"},
		{"server.max_allocs_per_job", -1, "server.max_allocs_per_job: must be between 0 and 10000000 (got -1)"},
		{"server.max_allocs_per_eval", 10000001, "server.max_allocs_per_eval: must be between 0 and 10000000 (got 10000001)"},
		{"server.eval_gc_threshold", "-1h", `server.eval_gc_threshold: must not be negative, got "-1h"`},
		{"server.job_gc_threshold", "100000h", `server.job_gc_threshold: must be at most 87600h0m0s, got "100000h"`},
		{"server.job_gc_interval", "0s", `server.job_gc_interval: must be at least 1s, got "0s"`},
		{"server.server_join.retry_join", []string{long(300)}, "server.server_join.retry_join[0]: must be at most 256 bytes"},
		{"server.server_join.retry_interval", "-1s", "server.server_join.retry_interval: must be positive"},
		{"server.server_join.retry_max", -1, "server.server_join.retry_max: must be between 0 and 10000000 (got -1)"},
		{"server.server_join.token", long(2000), "server.server_join.token: must be at most 1024 bytes"},
		{"client.servers", many(257, "s:4647"), "client.servers: must have at most 256 entries (got 257)"},
		{"client.node_class", long(129), "client.node_class: must be at most 128 bytes"},
		{"client.node_pool", "bad pool", `client.node_pool: must be 1 to 128 letters, digits, '-' or '_' (got "bad pool")`},
		{"client.node_pool", "all", `client.node_pool: the built-in pool "all" holds every node and cannot be joined`},
		{"client.meta", map[string]string{long(129): "v"}, "client.meta key \"" + long(129) + "\": must be at most 128 bytes"},
		{"client.meta", map[string]string{"k": long(5000)}, "client.meta.k: must be at most 4096 bytes"},
		{"client.options", bigMap, "client.options: must have at most 1024 entries (got 1025)"},
		{"client.state_dir", "/s\n", "client.state_dir: must not contain control characters"},
		{"client.alloc_dir", "/" + long(5000), "client.alloc_dir: must be at most 4096 bytes"},
		{"client.fingerprint_interval", "2h", "client.fingerprint_interval: must be at most 1h0m0s (got 2h)"},
		{"client.max_kill_timeout", "25h", "client.max_kill_timeout: must be at most 24h0m0s (got 25h)"},
		{"client.join_token", long(2000), "client.join_token: must be at most 1024 bytes"},
		{"client.network_interface", long(200), "client.network_interface: must be at most 128 bytes"},
		{"client.min_dynamic_port", -5, "client.min_dynamic_port: must be 0 (the default) or between 1 and 65535 (got -5)"},
		{"client.max_dynamic_port", 70000, "client.max_dynamic_port: must be 0 (the default) or between 1 and 65535 (got 70000)"},
		{"client.reserved.cpu", -1, "client.reserved.cpu: must be between 0 and 10000000 (got -1)"},
		{"client.reserved.memory", int64(1) << 31, "client.reserved.memory: must be between 0 and 1073741824"},
		{"client.reserved.disk", -1, "client.reserved.disk: must be between 0 and 1073741824 (got -1)"},
		{"client.reserved.reserved_ports", long(5000), "client.reserved.reserved_ports: must be at most 4096 bytes"},
		{"acl.token_ttl", "2h", "acl.token_ttl: must be at most 1h0m0s (got 2h)"},
		{"acl.policy_ttl", "0s", "acl.policy_ttl: must be positive"},
		{"plugin", block{"a/b": block{}}, `plugin.a/b: a plugin's name must be non-empty, without slashes or spaces (got "a/b")`},
		{"plugin", block{"p": block{"args": many(257, "-x")}}, "plugin.p.args: must have at most 256 entries (got 257)"},
	}
	for _, format := range []string{"hcl", "json"} {
		for _, tc := range cases {
			t.Run(format+"/"+tc.key, func(t *testing.T) {
				tree := baseTree()
				set(tree, tc.key, tc.value)
				err := parseTree(t, tree, format)
				if err == nil {
					t.Fatalf("%s = %.40v accepted", tc.key, tc.value)
				}
				at := regexp.QuoteMeta("agent."+format) + `:\d+:\d+: ` + regexp.QuoteMeta(tc.want)
				if !regexp.MustCompile(at).MatchString(err.Error()) {
					t.Errorf("%s = %.40v: error\n%.600s\nlacks file:line:col and %q", tc.key, tc.value, err, tc.want)
				}
			})
		}
	}
}

// TestConfigRulesEveryProblem: each problem is its own line, every one
// reported at once.
func TestConfigRulesEveryProblem(t *testing.T) {
	tree := baseTree()
	set(tree, "server.num_schedulers", 1000000)
	set(tree, "server.bootstrap_expect", -1)
	set(tree, "log_level", "loud")
	set(tree, "http_max_body_bytes", 1)
	err := parseTree(t, tree, "hcl")
	var ce *ConfigError
	if !asConfigError(err, &ce) {
		t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
	}
	if len(ce.Problems) != 4 || strings.Count(err.Error(), "\n") != 3 {
		t.Fatalf("want 4 problems, one a line:\n%v", err)
	}
	for _, key := range []string{"server.num_schedulers", "server.bootstrap_expect", "log_level", "http_max_body_bytes"} {
		if !strings.Contains(err.Error(), ": "+key+": ") {
			t.Errorf("no line for %s:\n%v", key, err)
		}
	}
}

func asConfigError(err error, ce **ConfigError) bool {
	e, ok := err.(*ConfigError)
	*ce = e
	return ok
}

// TestConfigRulesAccept: values at the bounds, Nomad's log levels in any
// case, and the -dev config pass.
func TestConfigRulesAccept(t *testing.T) {
	for _, kv := range []struct {
		key   string
		value any
	}{
		{"log_level", "TRACE"}, {"log_level", "warn"}, {"log_level", "Error"},
		{"server.num_schedulers", 128}, {"server.num_schedulers", 0},
		{"server.bootstrap_expect", 0}, {"server.bootstrap_expect", 1},
		{"http_max_body_bytes", 1024}, {"http_max_body_bytes", 1 << 30},
		{"ports.http", 1}, {"ports.rpc", 65535},
		{"server.heartbeat_grace", "0s"}, {"server.raft_snapshot_interval", "100ms"},
		{"client.node_pool", "gpu_pool-1"}, {"client.meta", map[string]string{"rack": "r1"}},
		{"plugin", block{"my-plugin": block{"args": []string{"-v"}}}},
	} {
		for _, format := range []string{"hcl", "json"} {
			tree := baseTree()
			set(tree, kv.key, kv.value)
			if err := parseTree(t, tree, format); err != nil {
				t.Errorf("%s: %s = %v: %v", format, kv.key, kv.value, err)
			}
		}
	}
	if err := DevConfig().Validate(); err != nil {
		t.Errorf("-dev config: %v", err)
	}
}

// TestConfigRulesFlag: a value given by a flag is named by the flag.
func TestConfigRulesFlag(t *testing.T) {
	c := DevConfig()
	c.Ports.HTTP = 99999
	c.SetByFlag("ports.http", "-http-port")
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "flag -http-port: ports.http: must be 0 (the default) or between 1 and 65535 (got 99999)") {
		t.Errorf("Validate = %v", err)
	}
}

// TestConfigRulesOriginAcrossFiles: in a -config directory, the line named
// is that of the file whose value is in effect; a later file's zero value
// (which does not override) does not take it.
func TestConfigRulesOriginAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "10-a.hcl")
	writeFile(t, first, []byte("data_dir = \"/x\"\nserver {\n  enabled = true\n  num_schedulers = 500\n}\n"), 0o600)
	writeFile(t, filepath.Join(dir, "20-b.json"), []byte(`{"server": {"num_schedulers": 0, "heartbeat_grace": "-1s"}}`), 0o600)
	c, err := LoadConfig(false, dir)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	for _, want := range []string{
		first + ":4:20: server.num_schedulers: must be 0 (the default) or between 1 and 128 (got 500)",
		filepath.Join(dir, "20-b.json") + ":1:53: server.heartbeat_grace: must not be negative",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v\nwant %q", err, want)
		}
	}
}

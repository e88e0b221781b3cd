package agent

import (
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/core/structs"
)

// Every agent setting has a rule, checked before anything starts: an
// absurd value (num_schedulers = 1000000 started a million scheduler
// goroutines, 2.3 GB in 12 s, with the HTTP API dead) is refused with one
// line per problem, naming where it was set (file:line:col for HCL and
// JSON files, the key path otherwise) and the rule it breaks. The bounds
// are fixed rather than derived from the machine, so that a file valid on
// one agent is valid on every other; they are listed in docs/agent-config.md.
const (
	// MaxNumSchedulers bounds server.num_schedulers. A worker is a
	// goroutine that holds a snapshot and a plugin call at a time; more
	// workers than a large server has cores only contend for the plan
	// applier, which serialises every plan anyway.
	MaxNumSchedulers = 128
	// MaxBootstrapExpect bounds server.bootstrap_expect: Raft's voters
	// all take part in every commit; clusters run 3 or 5.
	MaxBootstrapExpect = 16
	// MinHTTPMaxBodyBytes and MaxHTTPMaxBodyBytes bound
	// http_max_body_bytes (0: structs.DefaultMaxRequestBodyBytes).
	MinHTTPMaxBodyBytes = 1 << 10
	MaxHTTPMaxBodyBytes = 1 << 30
	// maxCount bounds the Raft and scheduler counts (raft_snapshot_threshold,
	// raft_trailing_logs, max_allocs_per_job, max_allocs_per_eval,
	// server_join.retry_max).
	maxCount = 10_000_000
	// maxName bounds names and addresses; maxPath a path (PATH_MAX);
	// maxToken a join token; maxValue a meta or option value.
	maxName  = 128
	maxAddr  = 256
	maxPath  = 4096
	maxToken = 1024
	maxValue = 4096
	// maxList bounds every list (servers, retry_join, enabled_drivers,
	// plugin args) and maxMap every map (meta, options); maxPlugins the
	// plugin stanzas.
	maxList    = 256
	maxMap     = 1024
	maxPlugins = 256
	// maxReservedCPU (MHz), maxReservedMB (memory and disk, MB).
	maxReservedCPU = 10_000_000
	maxReservedMB  = 1 << 30
)

// logLevels are Nomad's log_level values (any case).
var logLevels = []string{"trace", "debug", "info", "warn", "error"}

// ConfigError is an invalid agent configuration: one line per problem.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string { return strings.Join(e.Problems, "\n") }

// problems collects the problems of a config. origins maps a key path
// ("server.num_schedulers") to where it was set ("agent.hcl:3:20");
// fallback prefixes problems of keys without a known origin (the file of
// a single-file parse).
type problems struct {
	origins  map[string]string
	fallback string
	found    []string
}

// add records a problem with key's value. key "" is a rule across keys.
func (p *problems) add(key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if key != "" {
		msg = key + ": " + msg
	}
	if at := p.origin(key); at != "" {
		msg = at + ": " + msg
	}
	p.found = append(p.found, msg)
}

// origin is where key, or the nearest enclosing block, was set.
func (p *problems) origin(key string) string {
	if i := strings.IndexAny(key, "[ "); i >= 0 {
		key = key[:i] // a list element or a map key: the attribute's
	}
	for k := key; k != ""; {
		if at, ok := p.origins[k]; ok {
			return at
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return p.fallback
}

// addErr records an error of a check that words its own "key: rule".
func (p *problems) addErr(err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	key, _, _ := strings.Cut(msg, ": ")
	if at := p.origin(key); at != "" && !strings.HasPrefix(msg, at) {
		msg = at + ": " + msg
	}
	p.found = append(p.found, msg)
}

func (p *problems) err() error {
	if len(p.found) == 0 {
		return nil
	}
	return &ConfigError{Problems: p.found}
}

// intRange: 0 is "unset" (the default) when zeroUnset, else v must be in
// lo..hi.
func (p *problems) intRange(key string, v, lo, hi int64, zeroUnset bool) {
	if v == 0 && zeroUnset {
		return
	}
	if v < lo || v > hi {
		if zeroUnset {
			p.add(key, "must be 0 (the default) or between %d and %d (got %d)", lo, hi, v)
		} else {
			p.add(key, "must be between %d and %d (got %d)", lo, hi, v)
		}
	}
}

// duration checks a duration string, when set, against lo..hi; positive
// refuses zero.
func (p *problems) duration(key, v string, positive bool, hi time.Duration) {
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		p.add(key, "%q is not a duration (such as \"30s\" or \"1h\")", v)
	case positive && d <= 0:
		p.add(key, "must be positive and at most %s (got %s)", hi, v)
	case d < 0:
		p.add(key, "must not be negative and at most %s (got %s)", hi, v)
	case d > hi:
		p.add(key, "must be at most %s (got %s)", hi, v)
	}
}

// str checks a string's length and that it holds no control characters
// (a newline or NUL in a name or a path is never meant).
func (p *problems) str(key, v string, max int) {
	if len(v) > max {
		p.add(key, "must be at most %d bytes (got %d)", max, len(v))
		return
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		p.add(key, "must not contain control characters (%q at byte %d)", v[i:i+1], i)
	}
}

// list checks a list's length and each element as str does.
func (p *problems) list(key string, vs []string, maxItems, maxLen int) {
	if len(vs) > maxItems {
		p.add(key, "must have at most %d entries (got %d)", maxItems, len(vs))
		return
	}
	for i, v := range vs {
		p.str(key+"["+strconv.Itoa(i)+"]", v, maxLen)
	}
}

// strMap checks a map's size and each key and value as str does.
func (p *problems) strMap(key string, m map[string]string) {
	if len(m) > maxMap {
		p.add(key, "must have at most %d entries (got %d)", maxMap, len(m))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p.str(key+" key "+strconv.Quote(k), k, maxName)
		p.str(key+"."+k, m[k], maxValue)
	}
}

// addr checks a host or host:port.
func (p *problems) addr(key, v string) {
	if v == "" {
		return
	}
	p.str(key, v, maxAddr)
	if strings.ContainsAny(v, " \t") {
		p.add(key, "must be a host or host:port without spaces (got %q)", v)
		return
	}
	if _, port, err := net.SplitHostPort(v); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < structs.MinPort || n > structs.MaxPort {
			p.add(key, "port %q must be between %d and %d", port, structs.MinPort, structs.MaxPort)
		}
	}
}

// checkBounds applies every setting's own rule (rules across settings are
// in validate).
func (c *Config) checkBounds(p *problems) {
	p.str("region", c.Region, maxName)
	p.str("datacenter", c.Datacenter, maxName)
	p.str("name", c.NodeName, maxName)
	p.str("data_dir", c.DataDir, maxPath)
	p.str("plugin_dir", c.PluginDir, maxPath)
	p.addr("bind_addr", c.BindAddr)
	if c.LogLevel != "" && !containsFold(logLevels, c.LogLevel) {
		p.add("log_level", "must be one of %s (got %q)", strings.Join(logLevels, ", "), c.LogLevel)
	}
	p.intRange("http_max_body_bytes", c.HTTPMaxBodyBytes, MinHTTPMaxBodyBytes, MaxHTTPMaxBodyBytes, true)
	if c.Ports != nil {
		p.intRange("ports.http", int64(c.Ports.HTTP), structs.MinPort, structs.MaxPort, true)
		p.intRange("ports.rpc", int64(c.Ports.RPC), structs.MinPort, structs.MaxPort, true)
		if c.Ports.HTTP != 0 && c.Ports.HTTP == c.Ports.RPC {
			p.add("ports.rpc", "must differ from ports.http (both are %d)", c.Ports.RPC)
		}
	}
	if a := c.Advertise; a != nil {
		p.addr("advertise.http", a.HTTP)
		p.addr("advertise.rpc", a.RPC)
	}
	if s := c.Server; s != nil {
		s.checkBounds(p)
	}
	if cl := c.Client; cl != nil {
		cl.checkBounds(p)
	}
	if a := c.ACL; a != nil {
		p.duration("acl.token_ttl", a.TokenTTL, true, time.Hour)
		p.duration("acl.policy_ttl", a.PolicyTTL, true, time.Hour)
	}
	c.checkPlugins(p)
}

// checkPlugins applies the generic rules of the plugin stanzas (a
// plugin's own config keys are its own; see nomaddrivers.go). A plugin
// reload re-reads the stanzas and checks them alone.
func (c *Config) checkPlugins(p *problems) {
	if len(c.Plugins) > maxPlugins {
		p.add("plugin", "at most %d plugin stanzas (got %d)", maxPlugins, len(c.Plugins))
	}
	for _, pl := range c.Plugins {
		key := "plugin." + pl.Name
		p.str(key, pl.Name, maxName)
		if pl.Name == "" || strings.ContainsAny(pl.Name, "/\\ ") {
			p.add(key, "a plugin's name must be non-empty, without slashes or spaces (got %q)", pl.Name)
		}
		p.list(key+".args", pl.Args, maxList, maxValue)
	}
}

func (s *ServerConfig) checkBounds(p *problems) {
	p.intRange("server.bootstrap_expect", int64(s.BootstrapExpect), 0, MaxBootstrapExpect, false)
	p.intRange("server.num_schedulers", int64(s.NumSchedulers), 1, MaxNumSchedulers, true)
	p.duration("server.heartbeat_grace", s.HeartbeatGrace, false, time.Hour)
	p.duration("server.min_heartbeat_ttl", s.MinHeartbeatTTL, true, time.Hour)
	if v := s.MaxHeartbeatsPerSecond; v != 0 && !(v >= 0.01 && v <= 100000) {
		p.add("server.max_heartbeats_per_second", "must be 0 (the default, 50) or between 0.01 and 100000 (got %v)", v)
	}
	p.duration("server.failover_heartbeat_ttl", s.FailoverHeartbeatTTL, true, 24*time.Hour)
	p.intRange("server.raft_snapshot_threshold", int64(s.RaftSnapshotThreshold), 0, maxCount, false)
	p.duration("server.raft_snapshot_interval", s.RaftSnapshotInterval, true, 24*time.Hour)
	p.intRange("server.raft_trailing_logs", int64(s.RaftTrailingLogs), 0, maxCount, false)
	p.list("server.enabled_drivers", s.EnabledDrivers, maxList, maxName)
	p.duration("server.scheduler_call_timeout", s.SchedulerCallTimeout, true, time.Hour)
	p.intRange("server.max_allocs_per_job", int64(s.MaxAllocsPerJob), 0, maxCount, false)
	p.intRange("server.max_allocs_per_eval", int64(s.MaxAllocsPerEval), 0, maxCount, false)
	s.checkServiceProvider(p)
	for _, g := range gcSettings {
		if v := *g.value(s); v != "" {
			if _, err := g.check(v); err != nil {
				p.addErr(err)
			}
		}
	}
	if j := s.ServerJoin; j != nil {
		p.list("server.server_join.retry_join", j.RetryJoin, maxList, maxAddr)
		p.duration("server.server_join.retry_interval", j.RetryInterval, true, time.Hour)
		p.intRange("server.server_join.retry_max", int64(j.RetryMax), 0, maxCount, false)
		p.str("server.server_join.token", j.Token, maxToken)
	}
}

func (c *ClientConfig) checkBounds(p *problems) {
	p.list("client.servers", c.Servers, maxList, maxAddr)
	p.str("client.node_class", c.NodeClass, maxName)
	if c.NodePool != "" && !structs.ValidNodePoolName(c.NodePool) {
		p.add("client.node_pool", "must be 1 to 128 letters, digits, '-' or '_' (got %q)", c.NodePool)
	}
	if c.NodePool == "all" {
		p.add("client.node_pool", "the built-in pool %q holds every node and cannot be joined", c.NodePool)
	}
	p.strMap("client.meta", c.Meta)
	p.strMap("client.options", c.Options)
	p.str("client.state_dir", c.StateDir, maxPath)
	p.str("client.alloc_dir", c.AllocDir, maxPath)
	p.duration("client.fingerprint_interval", c.FingerprintInterval, true, time.Hour)
	p.duration("client.max_kill_timeout", c.MaxKillTimeout, true, 24*time.Hour)
	p.str("client.join_token", c.JoinToken, maxToken)
	p.str("client.network_interface", c.NetworkInterface, maxName)
	p.intRange("client.min_dynamic_port", int64(c.MinDynamicPort), structs.MinPort, structs.MaxPort, true)
	p.intRange("client.max_dynamic_port", int64(c.MaxDynamicPort), structs.MinPort, structs.MaxPort, true)
	c.checkBridgeBounds(p)
	if r := c.Reserved; r != nil {
		p.intRange("client.reserved.cpu", int64(r.CPU), 0, maxReservedCPU, false)
		p.intRange("client.reserved.memory", int64(r.MemoryMB), 0, maxReservedMB, false)
		p.intRange("client.reserved.disk", int64(r.DiskMB), 0, maxReservedMB, false)
		p.str("client.reserved.reserved_ports", r.ReservedPorts, maxValue)
	}
}

// SetByFlag records that key was set by a command-line flag, so that an
// error about it names the flag rather than a file.
func (c *Config) SetByFlag(key, flag string) {
	if c.Origins == nil {
		c.Origins = map[string]string{}
	}
	c.Origins[key] = "flag " + flag
}

func containsFold(list []string, v string) bool {
	for _, s := range list {
		if strings.EqualFold(s, v) {
			return true
		}
	}
	return false
}

// recordOrigins notes where each attribute and block of body was set, by
// key path, in origins. It reads the body with the schema the config
// decodes with, so HCL and JSON files alike give file:line:col.
func recordOrigins(body hcl.Body, v any, prefix string, origins map[string]string) {
	schema, _ := gohcl.ImpliedBodySchema(v)
	content, _, _ := body.PartialContent(schema)
	if content == nil {
		return
	}
	for name, a := range content.Attributes {
		// A zero value (0, "", false, []) does not override an earlier
		// file's (see Merge): the origin stays the earlier file's.
		if v, diags := a.Expr.Value(nil); !diags.HasErrors() && isZero(v) {
			continue
		}
		origins[prefix+name] = rangeString(a.Expr.Range())
	}
	t := reflect.TypeOf(v).Elem()
	for _, b := range content.Blocks {
		ft, ok := blockType(t, b.Type)
		if !ok {
			continue
		}
		key := prefix + b.Type
		for _, l := range b.Labels {
			key += "." + l
		}
		origins[key] = rangeString(b.DefRange)
		recordOrigins(b.Body, reflect.New(ft).Interface(), key+".", origins)
	}
}

func isZero(v cty.Value) bool {
	if v.IsNull() || !v.IsWhollyKnown() {
		return true
	}
	switch {
	case v.Type() == cty.String:
		return v.AsString() == ""
	case v.Type() == cty.Number:
		return v.Equals(cty.Zero).True()
	case v.Type() == cty.Bool:
		return v.False()
	case v.CanIterateElements():
		return v.LengthInt() == 0
	}
	return false
}

// blockType is the struct type of t's field decoded from blocks of type
// name (the field is a *T or a []*T).
func blockType(t reflect.Type, name string) (reflect.Type, bool) {
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("hcl")
		if tag != name+",block" {
			continue
		}
		ft := t.Field(i).Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		return ft, ft.Kind() == reflect.Struct
	}
	return nil, false
}

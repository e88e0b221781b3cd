// Package agent wires a drover agent: server, client, plugin host and the
// HTTP API, from an HCL agent config or the -dev defaults.
package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/drover-org/drover/core/server"
)

// Config is the agent configuration (the HCL file's schema).
type Config struct {
	Region     string `hcl:"region,optional"`
	Datacenter string `hcl:"datacenter,optional"`
	NodeName   string `hcl:"name,optional"`
	DataDir    string `hcl:"data_dir,optional"`
	BindAddr   string `hcl:"bind_addr,optional"`
	LogLevel   string `hcl:"log_level,optional"`
	LogJSON    bool   `hcl:"log_json,optional"`
	// EnableDebug serves /v1/agent/pprof/* without ACLs (Nomad's key).
	EnableDebug bool   `hcl:"enable_debug,optional"`
	PluginDir   string `hcl:"plugin_dir,optional"`
	// HTTPMaxBodyBytes caps an HTTP request body (413 above it); 0 is
	// structs.DefaultMaxRequestBodyBytes (8 MiB).
	HTTPMaxBodyBytes int64 `hcl:"http_max_body_bytes,optional"`

	Ports     *Ports          `hcl:"ports,block"`
	Advertise *Advertise      `hcl:"advertise,block"`
	Server    *ServerConfig   `hcl:"server,block"`
	Client    *ClientConfig   `hcl:"client,block"`
	TLS       *TLSConfig      `hcl:"tls,block"`
	ACL       *ACLConfig      `hcl:"acl,block"`
	Telemetry *Telemetry      `hcl:"telemetry,block"`
	Plugins   []*PluginConfig `hcl:"plugin,block"`
	// Autopilot is the configuration a new cluster starts with
	// (config_autopilot.go).
	Autopilot *AutopilotBlock `hcl:"autopilot,block"`

	// DevMode is set by -dev, never from a file.
	DevMode bool
	// Warnings name the keys of Nomad's agent config that the files set
	// and drover does not serve (config_nomad.go), in file order; the
	// agent logs one line for each. The parser fills it, never a file.
	Warnings []Warning
	// Origins says where each setting was given, by key path
	// ("server.num_schedulers" → "agent.hcl:3:20"), for the errors of
	// validate. The parser fills it, never a file.
	Origins map[string]string
}

// Ports are the agent's listening ports.
type Ports struct {
	HTTP int `hcl:"http,optional"`
	RPC  int `hcl:"rpc,optional"`
}

// Advertise is the `advertise { … }` block: the addresses other agents
// reach this one on (host or host:port), when bind_addr is not reachable.
type Advertise struct {
	HTTP string `hcl:"http,optional"`
	RPC  string `hcl:"rpc,optional"`
}

// TLSConfig is the `tls { … }` block: mutual TLS between agents (rpc) and
// HTTPS for the HTTP API (http).
type TLSConfig struct {
	HTTP                 bool   `hcl:"http,optional"`
	RPC                  bool   `hcl:"rpc,optional"`
	CAFile               string `hcl:"ca_file,optional"`
	CertFile             string `hcl:"cert_file,optional"`
	KeyFile              string `hcl:"key_file,optional"`
	VerifyServerHostname bool   `hcl:"verify_server_hostname,optional"`
	// VerifyHTTPSClient makes the HTTPS API require a client certificate
	// signed by ca_file, as Nomad's does.
	VerifyHTTPSClient bool `hcl:"verify_https_client,optional"`
	// Auto is the cluster PKI (tls_auto.go): on unless set to false.
	// Without operator certificates, agents then join by token and speak
	// mutual TLS with certificates of the cluster CA. false runs the
	// cluster in plaintext, with no authentication between agents.
	Auto *bool `hcl:"auto,optional"`
	// CertTTL is the lifetime of the certificates a server of the cluster
	// PKI issues (default 72h); agents renew at two thirds of it.
	CertTTL string `hcl:"cert_ttl,optional"`
}

// ACLConfig is the `acl { … }` block, as Nomad's: enabled turns token
// checks on for every HTTP request this agent serves. token_ttl is how
// long a client agent keeps a token it resolved through a server (a
// revoked token may work that long there); policy_ttl is accepted for
// Nomad's files (policies travel with the token here, so token_ttl bounds
// both).
type ACLConfig struct {
	Enabled   bool   `hcl:"enabled,optional"`
	TokenTTL  string `hcl:"token_ttl,optional"`
	PolicyTTL string `hcl:"policy_ttl,optional"`
}

// aclEnabled reports whether the config turns ACLs on.
func (c *Config) aclEnabled() bool { return c.ACL != nil && c.ACL.Enabled }

// aclTokenTTL is acl.token_ttl, 30s when unset (validated before).
func (c *Config) aclTokenTTL() time.Duration {
	if c.ACL == nil || c.ACL.TokenTTL == "" {
		return 30 * time.Second
	}
	d, _ := time.ParseDuration(c.ACL.TokenTTL)
	return d
}

// ServerJoin is the `server_join { … }` block.
type ServerJoin struct {
	RetryJoin     []string `hcl:"retry_join,optional"`
	RetryInterval string   `hcl:"retry_interval,optional"`
	RetryMax      int      `hcl:"retry_max,optional"`
	// Token is the cluster's server join token (drover operator
	// join-token server), for a server joining a cluster by the PKI.
	Token string `hcl:"token,optional"`
}

// ServerConfig is the `server { … }` block.
type ServerConfig struct {
	Enabled               bool        `hcl:"enabled,optional"`
	BootstrapExpect       int         `hcl:"bootstrap_expect,optional"`
	ServerJoin            *ServerJoin `hcl:"server_join,block"`
	NumSchedulers         int         `hcl:"num_schedulers,optional"`
	HeartbeatGrace        string      `hcl:"heartbeat_grace,optional"`
	MinHeartbeatTTL       string      `hcl:"min_heartbeat_ttl,optional"`
	RaftSnapshotThreshold int         `hcl:"raft_snapshot_threshold,optional"`
	RaftSnapshotInterval  string      `hcl:"raft_snapshot_interval,optional"`
	RaftTrailingLogs      int         `hcl:"raft_trailing_logs,optional"`
	// RaftMultiplier scales Raft's timers (1..10, default 1), as Nomad's.
	RaftMultiplier int      `hcl:"raft_multiplier,optional"`
	EnabledDrivers []string `hcl:"enabled_drivers,optional"`
	// Scheduler limits; checked and applied in config_sched.go.
	SchedulerCallTimeout string `hcl:"scheduler_call_timeout,optional"`
	MaxAllocsPerJob      int    `hcl:"max_allocs_per_job,optional"`
	MaxAllocsPerEval     int    `hcl:"max_allocs_per_eval,optional"`
	// Garbage collection (Nomad's keys, duration strings); checked and
	// applied in config_gc.go.
	EvalGCThreshold           string `hcl:"eval_gc_threshold,optional"`
	BatchEvalGCThreshold      string `hcl:"batch_eval_gc_threshold,optional"`
	JobGCThreshold            string `hcl:"job_gc_threshold,optional"`
	NodeGCThreshold           string `hcl:"node_gc_threshold,optional"`
	DeploymentGCThreshold     string `hcl:"deployment_gc_threshold,optional"`
	CSIVolumeClaimGCThreshold string `hcl:"csi_volume_claim_gc_threshold,optional"`
	CSIPluginGCThreshold      string `hcl:"csi_plugin_gc_threshold,optional"`
	ACLTokenGCThreshold       string `hcl:"acl_token_gc_threshold,optional"`
	JobGCInterval             string `hcl:"job_gc_interval,optional"`
	CSIVolumeClaimGCInterval  string `hcl:"csi_volume_claim_gc_interval,optional"`

	// The heartbeat TTL grows with the fleet to keep about
	// max_heartbeats_per_second (min_heartbeat_ttl its floor);
	// failover_heartbeat_ttl is every node's timer after a leader change
	// (Nomad's keys and defaults: 50, "5m").
	MaxHeartbeatsPerSecond float64 `hcl:"max_heartbeats_per_second,optional"`
	FailoverHeartbeatTTL   string  `hcl:"failover_heartbeat_ttl,optional"`
	// Snapshot schedules backups (config_snapshot.go).
	Snapshot *SnapshotConfig `hcl:"snapshot,block"`
	// DefaultServiceProvider is the provider of a job's service blocks
	// that name none (config_services.go).
	DefaultServiceProvider string `hcl:"default_service_provider,optional"`
}

// ClientConfig is the `client { … }` block.
type ClientConfig struct {
	Enabled   bool              `hcl:"enabled,optional"`
	Servers   []string          `hcl:"servers,optional"`
	NodeClass string            `hcl:"node_class,optional"`
	NodePool  string            `hcl:"node_pool,optional"`
	Meta      map[string]string `hcl:"meta,optional"`
	Options   map[string]string `hcl:"options,optional"`
	StateDir  string            `hcl:"state_dir,optional"`
	AllocDir  string            `hcl:"alloc_dir,optional"`
	// FingerprintInterval is how often the client asks its drivers for a
	// fingerprint (default 30s): how long a driver that turned unhealthy
	// (a Docker engine gone) may still be offered work. A drover
	// extension; Nomad's drivers pace their own fingerprints.
	FingerprintInterval string `hcl:"fingerprint_interval,optional"`
	// MaxKillTimeout caps every task's kill_timeout (Nomad's key, 30s).
	MaxKillTimeout string `hcl:"max_kill_timeout,optional"`
	// JoinToken is the cluster's client join token (drover operator
	// join-token client).
	JoinToken string `hcl:"join_token,optional"`
	// NetworkInterface is the interface whose address the node offers
	// ports on (default: the default route's; loopback in -dev).
	NetworkInterface string `hcl:"network_interface,optional"`
	// The range dynamic ports are picked from (Nomad's 20000-32000).
	MinDynamicPort int `hcl:"min_dynamic_port,optional"`
	MaxDynamicPort int `hcl:"max_dynamic_port,optional"`
	// Reserved is what the node keeps from scheduling.
	Reserved *ReservedConfig `hcl:"reserved,block"`
	// HostVolumes are the host_volume blocks (config_hostvolume.go).
	HostVolumes []*HostVolumeConfig `hcl:"host_volume,block"`
	// Allocations' own network namespaces (config_bridge.go): Nomad's
	// cni_path, cni_config_dir, bridge_network_name and
	// bridge_network_subnet.
	CNIPath             string `hcl:"cni_path,optional"`
	CNIConfigDir        string `hcl:"cni_config_dir,optional"`
	BridgeNetworkName   string `hcl:"bridge_network_name,optional"`
	BridgeNetworkSubnet string `hcl:"bridge_network_subnet,optional"`
}

// ReservedConfig is the client's `reserved { … }` block: CPU (MHz),
// memory and disk (MB), and host ports ("22,80,8500-8600").
type ReservedConfig struct {
	CPU           int    `hcl:"cpu,optional"`
	MemoryMB      int    `hcl:"memory,optional"`
	DiskMB        int    `hcl:"disk,optional"`
	ReservedPorts string `hcl:"reserved_ports,optional"`
}

// PluginConfig is a `plugin "<name>" { args = [...] config { ... } }`
// block. Its `config` block is kept as a raw body (ConfigBody): the plugin
// publishes the schema it is decoded against (the base plugin protocol),
// so only the plugin host, once the plugin runs, can decode it. The body
// keeps its positions, in HCL native syntax and JSON alike.
type PluginConfig struct {
	Name   string   `hcl:"name,label"`
	Args   []string `hcl:"args,optional"`
	Remain hcl.Body `hcl:",remain"`
}

// ConfigBody is the body of the stanza's `config { … }` block, nil when
// there is none. A stanza holds at most one config block and nothing else
// besides args; errors name file:line:col.
func (p *PluginConfig) ConfigBody() (hcl.Body, error) {
	if p.Remain == nil {
		return nil, nil
	}
	content, diags := p.Remain.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "config"}}})
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	if len(content.Blocks) == 0 {
		return nil, nil
	}
	if len(content.Blocks) > 1 {
		return nil, fmt.Errorf("%s: plugin %q: only one config block is allowed", rangeString(content.Blocks[1].DefRange), p.Name)
	}
	return content.Blocks[0].Body, nil
}

// PluginSettings decodes the stanza's `config { … }` block into a map of
// plain values (nil when absent), for the Nomad drivers whose config the
// agent hands over itself (raw_exec). Errors name file:line:col.
func (p *PluginConfig) PluginSettings() (map[string]any, error) {
	attrs, err := p.configAttrs()
	if err != nil || attrs == nil {
		return nil, err
	}
	out := make(map[string]any, len(attrs))
	for name, a := range attrs {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		if !v.IsWhollyKnown() {
			return nil, fmt.Errorf("%s: plugin %q: config %s: the value must be known", rangeString(a.Expr.Range()), p.Name, name)
		}
		raw, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return nil, fmt.Errorf("%s: plugin %q: config %s: %w", rangeString(a.Expr.Range()), p.Name, name, err)
		}
		var gv any
		if err := json.Unmarshal(raw, &gv); err != nil {
			return nil, err
		}
		out[name] = gv
	}
	return out, nil
}

// configAttrs are the attributes of the stanza's config block; nil when
// there is none.
func (p *PluginConfig) configAttrs() (hcl.Attributes, error) {
	body, err := p.ConfigBody()
	if err != nil || body == nil {
		return nil, err
	}
	attrs, diags := body.JustAttributes()
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	return attrs, nil
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// DevConfig is the configuration of `drover agent -dev`.
func DevConfig() *Config {
	return &Config{
		Region: "global", Datacenter: "dc1", BindAddr: "127.0.0.1", LogLevel: "INFO",
		Ports:  &Ports{HTTP: 4646, RPC: 4647},
		Server: &ServerConfig{Enabled: true, BootstrapExpect: 1},
		Client: &ClientConfig{Enabled: true},
		// As Nomad's dev agent: /v1/metrics?format=prometheus is on.
		Telemetry: &Telemetry{PrometheusMetrics: true},
		DevMode:   true,
	}
}

// ParseConfigFile reads an agent config file. Errors name file:line:col.
func ParseConfigFile(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, src)
}

// ParseConfig parses agent config source, fills in the defaults and
// validates the result.
func ParseConfig(filename string, src []byte) (*Config, error) {
	c, err := parseConfigFragment(filename, src)
	if err != nil {
		return nil, err
	}
	c.applyDefaults()
	p := &problems{origins: c.Origins, fallback: filename}
	c.validateInto(p)
	if err := p.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseConfigFragment decodes one config file as written: no defaults,
// no cross-field rules, so that files can be merged first. Everything that
// can be checked within the file is (syntax, schema, plugin blocks).
func parseConfigFragment(filename string, src []byte) (*Config, error) {
	if err := checkShape(filename, src); err != nil {
		return nil, err
	}
	var f *hcl.File
	var diags hcl.Diagnostics
	if isJSON(src) {
		f, diags = hcljson.Parse(src, filename)
	} else {
		f, diags = hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	}
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	var c Config
	body := &nomadBody{inner: f.Body, warnings: &c.Warnings, keys: map[hcl.Pos]string{}}
	if diags := gohcl.DecodeBody(body, nil, &c); diags.HasErrors() {
		return nil, diagError(namedDiags(diags, body.keys))
	}
	sortWarnings(c.Warnings)
	c.Origins = map[string]string{}
	recordOrigins(f.Body, &c, "", c.Origins)
	if len(c.Plugins) > maxPlugins {
		return nil, fmt.Errorf("%s: at most %d plugin stanzas (got %d)", filename, maxPlugins, len(c.Plugins))
	}
	for _, p := range c.Plugins {
		if err := p.check(); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

func diagError(diags hcl.Diagnostics) error {
	var msg string
	for i, d := range diags {
		if i > 0 {
			msg += "\n"
		}
		if d.Subject != nil {
			msg += fmt.Sprintf("%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		msg += d.Summary
		if d.Detail != "" {
			msg += "; " + d.Detail
		}
	}
	return fmt.Errorf("%s", msg)
}

func (c *Config) applyDefaults() {
	if c.Region == "" {
		c.Region = "global"
	}
	if c.Datacenter == "" {
		c.Datacenter = "dc1"
	}
	if c.BindAddr == "" {
		c.BindAddr = "0.0.0.0"
	}
	if c.LogLevel == "" {
		c.LogLevel = "INFO"
	}
	if c.Ports == nil {
		c.Ports = &Ports{}
	}
	if c.Ports.HTTP == 0 {
		c.Ports.HTTP = 4646
	}
	if c.Ports.RPC == 0 {
		c.Ports.RPC = 4647
	}
}

// Validate checks every setting's rule and the rules across settings, once
// every file and flag has been merged (data_dir is required outside -dev,
// and so on). The error is a *ConfigError with one line per problem.
func (c *Config) Validate() error { return c.validate() }

func (c *Config) validate() error {
	p := &problems{origins: c.Origins}
	c.validateInto(p)
	return p.err()
}

func (c *Config) validateInto(p *problems) {
	serverOn := c.Server != nil && c.Server.Enabled
	clientOn := c.Client != nil && c.Client.Enabled
	if !serverOn && !clientOn {
		p.add("", "at least one of server.enabled or client.enabled must be true")
	}
	if !c.DevMode && c.DataDir == "" {
		p.add("data_dir", "required outside -dev mode")
	}
	c.checkBounds(p)
	if c.Server != nil {
		if err := server.ValidateRaftMultiplier(c.Server.RaftMultiplier); err != nil {
			p.addErr(fmt.Errorf("server.%w", err))
		}
		if _, err := c.Server.snapshotSchedule(c.DataDir); err != nil {
			p.addErr(err)
		}
	}
	if c.Client != nil {
		p.addErr(c.Client.validateNetwork())
		c.Client.validateHostVolumes(p)
	}
	if clientOn && !serverOn && len(c.Client.Servers) == 0 {
		p.add("client.servers", "a client-only agent needs the RPC addresses of its servers")
	}
	if serverOn && c.Server.BootstrapExpect > 1 && (c.Server.ServerJoin == nil || len(c.Server.ServerJoin.RetryJoin) == 0) {
		p.add("server.server_join.retry_join", "bootstrap_expect = %d needs the addresses of the other servers", c.Server.BootstrapExpect)
	}
	p.addErr(c.validateAutoTLS())
	if _, err := c.autopilotConfig(); err != nil {
		p.addErr(err)
	}
}

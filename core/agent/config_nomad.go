package agent

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Nomad's agent config, as drover takes it.
//
// A Nomad agent file is read as it is: every key Nomad documents is
// accepted. The keys drover serves are decoded into Config; the keys of
// Nomad drover does not serve (Consul, Vault, Serf gossip, log files…) are
// accepted and each is named in a Warning, with its position, which the
// agent logs at start. A key neither Nomad nor drover knows (a typo) is an
// error at its file:line:col, as in Nomad.

// Warning is a config key drover accepts from a Nomad file but does not
// serve.
type Warning struct {
	Pos    string // file:line:col
	Key    string // key path, "server.raft_protocol"
	Reason string
	at     hcl.Pos // for the order of the file
}

func (w Warning) String() string {
	return fmt.Sprintf("%s: %s: %s; ignored", w.Pos, w.Key, w.Reason)
}

// Reasons shared by many keys.
const (
	whyConsul     = "drover has no Consul integration"
	whyVault      = "drover has no Vault integration"
	whyGossip     = "drover has no Serf gossip layer: servers find each other over RPC (server_join)"
	whyLogFile    = "drover logs to stderr only"
	whyEnterprise = "a Nomad Enterprise feature drover does not have"
	whyTelemetry  = "drover serves metrics at /v1/metrics (prometheus_metrics), and exports them nowhere else"
	whyTLS        = "drover's TLS settings are those of docs/pki.md"
	whyNotServed  = "not served by drover"
	// silent: the key is honoured by what drover always does (it never
	// phones home), so there is nothing to warn about.
	silent = ""
)

// nomadOnlyKeys are, per block path ("" is the top level), the keys of
// Nomad's agent config that drover accepts without serving, with the
// reason. A key listed here with a block below it is skipped whole.
var nomadOnlyKeys = map[string]map[string]string{
	"": {
		"disable_update_check":        silent,
		"disable_anonymous_signature": silent,
		"addresses":                   "drover listens on bind_addr (per-listener addresses are not served)",
		"audit":                       whyEnterprise,
		"consul":                      whyConsul,
		"consuls":                     whyConsul,
		"vault":                       whyVault,
		"vaults":                      whyVault,
		"enable_debug":                "drover serves no debug endpoints from the agent config",
		"enable_syslog":               whyLogFile,
		"syslog_facility":             whyLogFile,
		"log_file":                    whyLogFile,
		"log_rotate_bytes":            whyLogFile,
		"log_rotate_duration":         whyLogFile,
		"log_rotate_max_files":        whyLogFile,
		"log_include_location":        whyNotServed,
		"leave_on_interrupt":          "drover leaves the cluster as its signals say (docs/agent-config.md)",
		"leave_on_terminate":          "drover leaves the cluster as its signals say (docs/agent-config.md)",
		"http_api_response_headers":   whyNotServed,
		"keyring":                     whyEnterprise,
		"limits":                      "drover bounds connections and bodies itself (http_max_body_bytes)",
		"reporting":                   whyEnterprise,
		"sentinel":                    whyEnterprise,
		"ui":                          "drover's web UI takes no settings",
	},
	"ports": {
		"serf": whyGossip,
	},
	"advertise": {
		"serf": whyGossip,
	},
	"server": {
		"data_dir":                       "drover keeps server state under the agent's data_dir",
		"raft_protocol":                  "drover speaks Raft protocol 3 only",
		"raft_boltdb":                    whyNotServed,
		"raft_logstore":                  whyNotServed,
		"redundancy_zone":                whyEnterprise,
		"upgrade_version":                whyEnterprise,
		"non_voting_server":              whyEnterprise,
		"authoritative_region":           "drover serves one region",
		"license_path":                   whyEnterprise,
		"license_env":                    whyEnterprise,
		"encrypt":                        whyGossip,
		"retry_join":                     "write it in server_join { retry_join }",
		"retry_interval":                 "write it in server_join { retry_interval }",
		"retry_max":                      "write it in server_join { retry_max }",
		"start_join":                     whyGossip,
		"rejoin_after_leave":             whyGossip,
		"enabled_schedulers":             "drover's schedulers are plugins, each serving its job types",
		"root_key_gc_interval":           whyNotServed,
		"root_key_gc_threshold":          whyNotServed,
		"root_key_rotation_threshold":    whyNotServed,
		"variables_gc_threshold":         whyNotServed,
		"plan_rejection_tracker":         whyNotServed,
		"default_scheduler_config":       "set it with `operator scheduler set-config`",
		"search":                         whyNotServed,
		"deployment_query_rate_limit":    whyNotServed,
		"event_buffer_size":              whyNotServed,
		"job_max_priority":               whyNotServed,
		"job_default_priority":           whyNotServed,
		"job_tracked_versions":           whyNotServed,
		"job_max_source_size":            whyNotServed,
		"job_max_count":                  whyNotServed,
		"oidc_issuer":                    whyNotServed,
		"start_timeout":                  whyNotServed,
		"enable_event_broker":            whyNotServed,
		"node_gc_interval":               whyNotServed,
		"eval_gc_interval":               whyNotServed,
		"deployment_gc_interval":         whyNotServed,
		"client_introduction":            whyNotServed,
		"csi_plugin_gc_interval":         whyNotServed,
		"acl_token_gc_interval":          whyNotServed,
		"raft_snapshot_trailing_logs":    whyNotServed,
		"raft_max_append_entries":        whyNotServed,
		"raft_pre_vote":                  whyNotServed,
		"raft_election_timeout":          whyNotServed,
		"raft_heartbeat_timeout":         whyNotServed,
		"heartbeat_max_jitter":           whyNotServed,
		"max_heartbeat_ttl":              whyNotServed,
		"eval_gc_max_size":               whyNotServed,
		"wait_for_index":                 whyNotServed,
		"job_max_task_group_count":       whyNotServed,
		"disable_dispatched_job_summary": whyNotServed,
	},
	"client": {
		"server_join":                   "write the servers in client { servers }",
		"alloc_mounts_dir":              whyNotServed,
		"network_speed":                 whyNotServed,
		"cpu_total_compute":             whyNotServed,
		"cpu_disable_dmidecode":         whyNotServed,
		"memory_total_mb":               whyNotServed,
		"disk_total_mb":                 whyNotServed,
		"disk_free_mb":                  whyNotServed,
		"gc_interval":                   whyNotServed,
		"gc_disk_usage_threshold":       whyNotServed,
		"gc_inode_usage_threshold":      whyNotServed,
		"gc_max_allocs":                 whyNotServed,
		"gc_parallel_destroys":          whyNotServed,
		"gc_volumes_on_node_gc":         whyNotServed,
		"no_host_uuid":                  whyNotServed,
		"chroot_env":                    whyNotServed,
		"host_network":                  whyNotServed,
		"template":                      whyNotServed,
		"artifact":                      whyNotServed,
		"drain_on_shutdown":             whyNotServed,
		"bridge_network_subnet_ipv6":    whyNotServed,
		"bridge_network_hairpin_mode":   whyNotServed,
		"disable_remote_exec":           whyNotServed,
		"nomad_service_discovery":       whyNotServed,
		"cgroup_parent":                 whyNotServed,
		"preferred_address_family":      whyNotServed,
		"host_volumes_dir":              whyNotServed,
		"host_volume_plugin_dir":        whyNotServed,
		"common_plugin_dir":             whyNotServed,
		"users":                         whyNotServed,
		"node_max_allocs":               whyNotServed,
		"intro_token":                   whyNotServed,
		"reserved_ports":                "write it in reserved { reserved_ports }",
		"max_dynamic_port_range":        whyNotServed,
		"consul_namespace":              whyConsul,
		"gc_disk_usage_threshold_bytes": whyNotServed,
	},
	"client.reserved": {
		"cores": whyNotServed,
	},
	"acl": {
		"role_ttl":                 whyNotServed,
		"token_min_expiration_ttl": whyNotServed,
		"token_max_expiration_ttl": whyNotServed,
		"replication_token":        "drover serves one region",
	},
	"telemetry": {
		"collection_interval":                    whyTelemetry,
		"disable_hostname":                       whyTelemetry,
		"use_node_name":                          whyTelemetry,
		"publish_allocation_metrics":             whyTelemetry,
		"publish_node_metrics":                   whyTelemetry,
		"statsd_address":                         whyTelemetry,
		"statsite_address":                       whyTelemetry,
		"datadog_address":                        whyTelemetry,
		"datadog_tags":                           whyTelemetry,
		"filter_default":                         whyTelemetry,
		"prefix_filter":                          whyTelemetry,
		"disable_dispatched_job_summary_metrics": whyTelemetry,
		"disable_quota_utilization_metrics":      whyTelemetry,
		"disable_rpc_rate_metrics_labels":        whyTelemetry,
		"disable_allocation_hook_metrics":        whyTelemetry,
		"in_memory_collection_interval":          whyTelemetry,
		"in_memory_retention_period":             whyTelemetry,
		"backwards_compatible_metrics":           whyTelemetry,
		"disable_tagged_metrics":                 whyTelemetry,
		"circonus_api_token":                     whyTelemetry,
		"circonus_api_app":                       whyTelemetry,
		"circonus_api_url":                       whyTelemetry,
		"circonus_submission_interval":           whyTelemetry,
		"circonus_submission_url":                whyTelemetry,
		"circonus_check_id":                      whyTelemetry,
		"circonus_check_force_metric_activation": whyTelemetry,
		"circonus_check_instance_id":             whyTelemetry,
		"circonus_check_search_tag":              whyTelemetry,
		"circonus_check_display_name":            whyTelemetry,
		"circonus_check_tags":                    whyTelemetry,
		"circonus_broker_id":                     whyTelemetry,
		"circonus_broker_select_tag":             whyTelemetry,
	},
	"tls": {
		"rpc_upgrade_mode":                whyTLS,
		"tls_cipher_suites":               whyTLS,
		"tls_min_version":                 whyTLS,
		"tls_prefer_server_cipher_suites": whyTLS,
	},
}

// isJSON reports whether a config file's content is JSON: HCL's native
// syntax never starts with "{" (a body begins with a key), so the first
// byte that is not space tells, whatever the file's name (Nomad's test
// harness writes JSON to a file without an extension).
func isJSON(src []byte) bool {
	t := bytes.TrimLeft(src, " \t\r\n\ufeff")
	return len(t) > 0 && t[0] == '{'
}

// nomadBody wraps a config body for gohcl: the keys of nomadOnlyKeys at
// its path are dropped (each becomes a Warning), any other key the schema
// lacks is an error at its position, and the blocks it returns are
// wrapped in turn.
type nomadBody struct {
	inner    hcl.Body
	path     string
	warnings *[]Warning
	// keys maps where each decoded value starts to its key path, so that
	// a value of the wrong type is reported with its key (namedDiags).
	keys map[hcl.Pos]string
}

func (b *nomadBody) Content(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	content, remain, diags := b.inner.PartialContent(schema)
	for _, k := range b.leftovers(schema, remain) {
		key := b.key(k.name)
		reason, known := nomadOnlyKeys[b.path][k.name]
		if !known {
			r := k.rng
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("%s: not a key of Nomad's or drover's agent config", key),
				Subject:  &r,
			})
			continue
		}
		if reason == silent || (k.name == "vault" && b.path == "" && k.disabledOnly) {
			continue
		}
		*b.warnings = append(*b.warnings, Warning{Pos: rangeString(k.rng), Key: key, Reason: reason, at: k.rng.Start})
	}
	if content != nil && b.keys != nil {
		for name, a := range content.Attributes {
			b.keys[a.Expr.Range().Start] = b.key(name)
			b.keys[a.Expr.StartRange().Start] = b.key(name)
		}
	}
	b.wrapBlocks(content)
	return content, diags
}

func (b *nomadBody) key(name string) string {
	if b.path == "" {
		return name
	}
	return b.path + "." + name
}

// sortWarnings puts one file's warnings in the order of the file (the
// decoder visits blocks in the order of Config's fields).
func sortWarnings(ws []Warning) {
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].at.Byte < ws[j].at.Byte })
}

// namedDiags puts the key path in front of each diagnostic about a value
// that the decoder refused ("a bool is required"), which says neither.
func namedDiags(diags hcl.Diagnostics, keys map[hcl.Pos]string) hcl.Diagnostics {
	for _, d := range diags {
		if d.Subject == nil {
			continue
		}
		if k, ok := keys[d.Subject.Start]; ok {
			d.Summary = k + ": " + d.Summary
		}
	}
	return diags
}

func (b *nomadBody) PartialContent(schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Body, hcl.Diagnostics) {
	content, remain, diags := b.inner.PartialContent(schema)
	b.wrapBlocks(content)
	return content, remain, diags
}

func (b *nomadBody) JustAttributes() (hcl.Attributes, hcl.Diagnostics) {
	return b.inner.JustAttributes()
}

func (b *nomadBody) MissingItemRange() hcl.Range { return b.inner.MissingItemRange() }

// wrapBlocks wraps the bodies of unlabelled blocks (server, client, …);
// a labelled block (plugin "name") is the plugin's business.
func (b *nomadBody) wrapBlocks(content *hcl.BodyContent) {
	if content == nil {
		return
	}
	for _, blk := range content.Blocks {
		if len(blk.Labels) > 0 {
			continue
		}
		path := blk.Type
		if b.path != "" {
			path = b.path + "." + blk.Type
		}
		blk.Body = &nomadBody{inner: blk.Body, path: path, warnings: b.warnings, keys: b.keys}
	}
}

type leftover struct {
	name string
	rng  hcl.Range
	// disabledOnly: the key's value is a block or object holding only
	// enabled = false (vault { enabled = false } serves nothing either).
	disabledOnly bool
}

// leftovers are the keys of the body the schema does not name, in the
// order they are written.
func (b *nomadBody) leftovers(schema *hcl.BodySchema, remain hcl.Body) []leftover {
	known := map[string]bool{}
	for _, a := range schema.Attributes {
		known[a.Name] = true
	}
	for _, bl := range schema.Blocks {
		known[bl.Type] = true
	}
	var out []leftover
	if nb, ok := b.inner.(*hclsyntax.Body); ok {
		for name, a := range nb.Attributes {
			if !known[name] {
				out = append(out, leftover{name: name, rng: a.NameRange, disabledOnly: exprDisabledOnly(a.Expr)})
			}
		}
		for _, blk := range nb.Blocks {
			if !known[blk.Type] {
				out = append(out, leftover{name: blk.Type, rng: blk.TypeRange, disabledOnly: blockDisabledOnly(blk)})
			}
		}
	} else if remain != nil {
		// JSON: what the schema left is readable as attributes.
		attrs, _ := remain.JustAttributes()
		for name, a := range attrs {
			out = append(out, leftover{name: name, rng: a.NameRange, disabledOnly: exprDisabledOnly(a.Expr)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].rng.Start.Byte != out[j].rng.Start.Byte {
			return out[i].rng.Start.Byte < out[j].rng.Start.Byte
		}
		return out[i].name < out[j].name
	})
	return out
}

func blockDisabledOnly(blk *hclsyntax.Block) bool {
	if len(blk.Body.Blocks) != 0 || len(blk.Body.Attributes) != 1 {
		return false
	}
	a, ok := blk.Body.Attributes["enabled"]
	if !ok {
		return false
	}
	v, diags := a.Expr.Value(nil)
	return !diags.HasErrors() && v.Type() == cty.Bool && v.IsKnown() && !v.IsNull() && v.False()
}

func exprDisabledOnly(e hcl.Expression) bool {
	v, diags := e.Value(nil)
	if diags.HasErrors() || !v.IsWhollyKnown() || v.IsNull() {
		return false
	}
	if v.Type().IsTupleType() || v.Type().IsListType() {
		if v.LengthInt() != 1 {
			return false
		}
		v = v.Index(cty.NumberIntVal(0))
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		return false
	}
	if v.LengthInt() != 1 {
		return false
	}
	m := v.AsValueMap()
	en, ok := m["enabled"]
	return ok && en.Type() == cty.Bool && !en.IsNull() && en.False()
}

// rpcPortSet reports whether a file or a flag chose the RPC port. A dev
// agent opens its RPC listener only then: by default it has none, so dev
// agents started side by side do not fight over port 4647.
func (c *Config) rpcPortSet() bool {
	_, ok := c.Origins["ports.rpc"]
	return ok
}

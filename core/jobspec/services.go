package jobspec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// A group's or a task's service blocks and their checks (Nomad's names).
// drover serves provider "nomad" only: a service that names no provider
// gets Nomad's default, "consul", and is refused at its position with the
// integration it needs, as a connect block is; so are grpc checks and the
// Consul-only attributes. structs' validation repeats these rules for
// jobs sent as JSON, and `job validate` places its other refusals at the
// service's block.

var (
	serviceAttrs = []string{
		"name", "port", "tags", "canary_tags", "address", "address_mode", "provider", "meta",
		"canary_meta", "enable_tag_override", "on_update", "task",
		// Consul's only: refused by name.
		"tagged_addresses", "cluster", "kind",
	}
	serviceBlocks = []blockKind{
		{name: "check", many: true},
		{name: "check_restart"},
		{name: "meta"},
		{name: "canary_meta"},
		{name: "connect", many: true},
		{name: "identity", many: true},
		{name: "tagged_addresses"},
		{name: "weights"},
	}
	checkAttrs = []string{
		"name", "type", "port", "path", "method", "body", "protocol", "interval", "timeout",
		"initial_status", "tls_server_name", "tls_skip_verify", "command", "args", "task",
		"address_mode", "on_update", "success_before_passing", "failures_before_critical",
		"failures_before_warning", "notes",
		// grpc's and Consul's only: refused by name.
		"grpc_service", "grpc_use_tls", "expose", "advertise",
	}
	checkBlocks        = []blockKind{{name: "check_restart"}, {name: "header"}}
	checkRestartAttrs  = []string{"limit", "grace", "ignore_warnings"}
	consulOnlyServices = map[string]string{
		"tagged_addresses": "tagged addresses are Consul's",
		"cluster":          "cluster names a Consul cluster",
		"kind":             "kind is a Consul service kind",
		"weights":          "weights are Consul's DNS weights",
		"grpc_service":     "grpc checks are not run by drover's client (http, tcp and script are)",
		"grpc_use_tls":     "grpc checks are not run by drover's client (http, tcp and script are)",
		"expose":           "expose needs Consul Connect",
		"notes":            "notes are Consul's",
	}
)

// services parses the service blocks of a group (task "") or of a task.
func (p *parser) services(bs hcl.Blocks, group, task string) []*structs.Service {
	var out []*structs.Service
	if len(bs) > structs.MaxServicesPerGroup {
		p.errorf(bs[structs.MaxServicesPerGroup].DefRange, "Too many services",
			"A group and its tasks may have at most %d service blocks; this one has %d here.", structs.MaxServicesPerGroup, len(bs))
		return nil
	}
	for _, b := range bs {
		out = append(out, p.service(b, group, task))
	}
	return out
}

func (p *parser) refuseConsulOnly(attrs hcl.Attributes, blocks map[string]hcl.Blocks, what string) {
	for _, name := range sortedAttrNames(attrs) {
		if why, ok := consulOnlyServices[name]; ok {
			p.errorf(attrs[name].NameRange, "Unsupported argument",
				"%s of a %s block: %s, and drover has no such integration; remove it.", name, what, why)
		}
	}
	for _, name := range []string{"tagged_addresses", "weights"} {
		if b := first(blocks, name); b != nil {
			p.errorf(b.DefRange, "Unsupported block type",
				"%s of a %s block: %s, and drover has no Consul integration; remove it.", name, what, consulOnlyServices[name])
		}
	}
}

func (p *parser) service(b *hcl.Block, group, task string) *structs.Service {
	s := &structs.Service{}
	attrs, blocks := p.content(b.Body, serviceAttrs, serviceBlocks)
	p.refuseIntegrations(blocks)
	p.refuseConsulOnly(attrs, blocks, "service")

	p.setString(attrs["name"], &s.Name)
	p.setString(attrs["port"], &s.PortLabel)
	p.setStrings(attrs["tags"], &s.Tags)
	p.setStrings(attrs["canary_tags"], &s.CanaryTags)
	p.setString(attrs["address"], &s.Address)
	p.setString(attrs["address_mode"], &s.AddressMode)
	p.setBool(attrs["enable_tag_override"], &s.EnableTagOverride)
	p.setString(attrs["on_update"], &s.OnUpdate)
	if a := attrs["task"]; a != nil {
		if task != "" {
			p.errorf(a.NameRange, "Unsupported argument",
				"task is for a group's service; a task's service runs in its own task (%q).", task)
		} else {
			p.setString(a, &s.TaskName)
		}
	}
	s.Meta = p.stringMap(attrs, blocks, "meta")
	s.CanaryMeta = p.stringMap(attrs, blocks, "canary_meta")

	if a := attrs["provider"]; a == nil {
		p.errorf(b.DefRange, "Integration not available",
			"A service without a provider is a Consul service (Nomad's default provider is \"consul\"), and drover has no Consul integration: set provider = \"nomad\".")
	} else if p.setString(a, &s.Provider) {
		switch s.Provider {
		case structs.ServiceProviderNomad:
		case structs.ServiceProviderConsul:
			p.errorf(a.Expr.Range(), "Integration not available",
				"provider \"consul\" needs Consul, and drover has no Consul integration: set provider = \"nomad\".")
		default:
			p.errorf(a.Expr.Range(), "Invalid provider", "provider is %q; drover serves provider = \"nomad\".", s.Provider)
		}
	}

	name := s.Name
	if name == "" {
		name = structs.DefaultServiceName(p.jobName, group, task)
	}
	where := fmt.Sprintf("group %q", group)
	if task != "" {
		where += fmt.Sprintf(": task %q", task)
	}
	where += fmt.Sprintf(": service %q", name)
	if _, seen := p.blockAt[where]; !seen {
		p.blockAt[where] = b.DefRange
	}

	var restart *structs.CheckRestart
	if rb := first(blocks, "check_restart"); rb != nil {
		restart = p.checkRestart(rb, nil)
	}
	checks := blocks["check"]
	if len(checks) > structs.MaxChecksPerService {
		p.errorf(checks[structs.MaxChecksPerService].DefRange, "Too many checks",
			"A service may have at most %d checks; this one has %d.", structs.MaxChecksPerService, len(checks))
		return s
	}
	for _, cb := range checks {
		c := p.check(cb, restart, task)
		cname := c.Name
		if cname == "" {
			cname = structs.DefaultCheckName(name)
		}
		if key := fmt.Sprintf("%s: check %q", where, cname); p.blockAt[key] == (hcl.Range{}) {
			p.blockAt[key] = cb.DefRange
		}
		s.Checks = append(s.Checks, c)
	}
	return s
}

// checkRestart parses a check_restart block laid over base (the
// service's, for a check's own block).
func (p *parser) checkRestart(b *hcl.Block, base *structs.CheckRestart) *structs.CheckRestart {
	r := &structs.CheckRestart{}
	if base != nil {
		*r = *base
	}
	attrs, _ := p.content(b.Body, checkRestartAttrs, nil)
	p.setIntRange(attrs["limit"], 0, structs.MaxCheckThreshold, func(i int64) { r.Limit = int(i) })
	p.setDuration(attrs["grace"], &r.Grace)
	p.setBool(attrs["ignore_warnings"], &r.IgnoreWarnings)
	return r
}

func (p *parser) check(b *hcl.Block, restart *structs.CheckRestart, task string) *structs.ServiceCheck {
	c := &structs.ServiceCheck{}
	attrs, blocks := p.content(b.Body, checkAttrs, checkBlocks)
	p.refuseConsulOnly(attrs, blocks, "check")
	if a := attrs["advertise"]; a != nil && p.setString(a, &c.Advertise) {
		p.errorf(a.NameRange, "Unsupported argument",
			"advertise is not supported: drover's checks run against the service's address and port; remove it.")
	}

	p.setString(attrs["name"], &c.Name)
	if a := attrs["type"]; a == nil {
		p.errorf(b.DefRange, "Missing required argument", "A check block needs a type: \"http\", \"tcp\" or \"script\".")
	} else if p.setString(a, &c.Type) {
		switch c.Type {
		case structs.ServiceCheckHTTP, structs.ServiceCheckTCP, structs.ServiceCheckScript:
		case structs.ServiceCheckGRPC:
			p.errorf(a.Expr.Range(), "Unsupported check type",
				"type \"grpc\" is not supported: drover's client runs http, tcp and script checks.")
		default:
			p.errorf(a.Expr.Range(), "Invalid check type", "type is %q; it must be \"http\", \"tcp\" or \"script\".", c.Type)
		}
	}
	p.setString(attrs["port"], &c.PortLabel)
	p.setString(attrs["path"], &c.Path)
	p.setString(attrs["method"], &c.Method)
	p.setString(attrs["body"], &c.Body)
	p.setString(attrs["protocol"], &c.Protocol)
	if a := attrs["interval"]; a == nil {
		p.errorf(b.DefRange, "Missing required argument", "A check block needs an interval.")
	} else {
		p.setDuration(a, &c.Interval)
	}
	if a := attrs["timeout"]; a == nil {
		p.errorf(b.DefRange, "Missing required argument", "A check block needs a timeout.")
	} else {
		p.setDuration(a, &c.Timeout)
	}
	p.setString(attrs["initial_status"], &c.InitialStatus)
	p.setString(attrs["tls_server_name"], &c.TLSServerName)
	p.setBool(attrs["tls_skip_verify"], &c.TLSSkipVerify)
	p.setString(attrs["command"], &c.Command)
	p.setStrings(attrs["args"], &c.Args)
	if a := attrs["task"]; a != nil {
		if task != "" {
			p.errorf(a.NameRange, "Unsupported argument",
				"task is for the checks of a group's service; this check runs in its service's task (%q).", task)
		} else {
			p.setString(a, &c.TaskName)
		}
	}
	p.setString(attrs["address_mode"], &c.AddressMode)
	p.setString(attrs["on_update"], &c.OnUpdate)
	p.setIntRange(attrs["success_before_passing"], 0, structs.MaxCheckThreshold, func(i int64) { c.SuccessBeforePassing = int(i) })
	p.setIntRange(attrs["failures_before_critical"], 0, structs.MaxCheckThreshold, func(i int64) { c.FailuresBeforeCritical = int(i) })
	p.setIntRange(attrs["failures_before_warning"], 0, structs.MaxCheckThreshold, func(i int64) { c.FailuresBeforeWarning = int(i) })
	if hb := first(blocks, "header"); hb != nil {
		c.Header = p.header(hb)
	}
	if rb := first(blocks, "check_restart"); rb != nil {
		c.CheckRestart = p.checkRestart(rb, restart)
	} else if restart != nil {
		r := *restart
		c.CheckRestart = &r
	}
	return c
}

// header parses a check's `header { Name = ["value", …] }`.
func (p *parser) header(b *hcl.Block) map[string][]string {
	attrs, diags := b.Body.JustAttributes()
	p.diags = append(p.diags, diags...)
	if len(attrs) > structs.MaxServiceMeta {
		p.errorf(b.DefRange, "Too many headers", "A check may send at most %d headers; this one has %d.", structs.MaxServiceMeta, len(attrs))
		return nil
	}
	out := map[string][]string{}
	for _, name := range sortedAttrNames(attrs) {
		var vs []string
		if p.setStrings(attrs[name], &vs) {
			out[name] = vs
		}
	}
	return out
}

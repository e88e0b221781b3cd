package jobspec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// A group's or a task's service blocks and their checks (Nomad's names),
// parsed as Nomad parses them, Consul's blocks and attributes included
// (connect, identity, tagged_addresses, weights, grpc checks…). drover
// serves provider "nomad": what needs Consul is refused at registration
// by structs' validation, which `job validate` places at the block. A
// service that names no provider keeps Provider empty: the server
// resolves it to its default_service_provider when the job is
// registered.

var (
	serviceAttrs = []string{
		"name", "port", "tags", "canary_tags", "address", "address_mode", "provider", "meta",
		"canary_meta", "enable_tag_override", "on_update", "task",
		"tagged_addresses", "cluster", "kind",
	}
	serviceBlocks = []blockKind{
		{name: "check", many: true},
		{name: "check_restart"},
		{name: "meta"},
		{name: "canary_meta"},
		{name: "connect"},
		{name: "identity"},
		{name: "tagged_addresses"},
		{name: "weights"},
	}
	checkAttrs = []string{
		"name", "type", "port", "path", "method", "body", "protocol", "interval", "timeout",
		"initial_status", "tls_server_name", "tls_skip_verify", "command", "args", "task",
		"address_mode", "on_update", "success_before_passing", "failures_before_critical",
		"failures_before_warning", "notes",
		"grpc_service", "grpc_use_tls", "expose", "advertise",
	}
	checkBlocks       = []blockKind{{name: "check_restart"}, {name: "header"}}
	checkRestartAttrs = []string{"limit", "grace", "ignore_warnings"}
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

func (p *parser) service(b *hcl.Block, group, task string) *structs.Service {
	s := &structs.Service{}
	attrs, blocks := p.content(b.Body, serviceAttrs, serviceBlocks)

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
	s.TaggedAddresses = p.stringMap(attrs, blocks, "tagged_addresses")
	p.setString(attrs["cluster"], &s.Cluster)
	p.setString(attrs["kind"], &s.Kind)
	p.setString(attrs["provider"], &s.Provider)
	if wb := first(blocks, "weights"); wb != nil {
		s.Weights = &structs.ServiceWeights{}
		p.decodeTagged(wb, s.Weights)
	}
	if cb := first(blocks, "connect"); cb != nil {
		s.Connect = p.connect(cb)
	}
	if ib := first(blocks, "identity"); ib != nil {
		s.Identity = &structs.WorkloadIdentity{}
		p.decodeTagged(ib, s.Identity)
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
		for _, n := range []string{"connect", "identity", "tagged_addresses", "weights"} {
			if nb := first(blocks, n); nb != nil {
				p.noteBlock(where+": "+n, nb.DefRange)
			}
		}
		for _, n := range []string{"tagged_addresses", "cluster", "kind", "provider"} {
			if a := attrs[n]; a != nil {
				p.noteBlock(where+": "+n, a.NameRange)
			}
		}
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
	p.setString(attrs["advertise"], &c.Advertise)
	p.setString(attrs["grpc_service"], &c.GRPCService)
	p.setBool(attrs["grpc_use_tls"], &c.GRPCUseTLS)
	p.setBool(attrs["expose"], &c.Expose)
	p.setString(attrs["notes"], &c.Notes)

	p.setString(attrs["name"], &c.Name)
	p.setString(attrs["type"], &c.Type)
	p.setString(attrs["port"], &c.PortLabel)
	p.setString(attrs["path"], &c.Path)
	p.setString(attrs["method"], &c.Method)
	p.setString(attrs["body"], &c.Body)
	p.setString(attrs["protocol"], &c.Protocol)
	p.setDuration(attrs["interval"], &c.Interval)
	p.setDuration(attrs["timeout"], &c.Timeout)
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

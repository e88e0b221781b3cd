package jobspec

import (
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// A group's `network { mode = "host" port "http" { static = 8080 } }`;
// mode may also be "bridge", "none" or "cni/<name>" (the client gives the
// allocation its own network namespace), and a cni block's args go to
// the CNI plugins in bridge and cni modes.
// Values the parser can point at (mode, port numbers, repeated static
// ports, the number of ports) are checked here with their position;
// structs' validation repeats the rules for jobs sent as JSON.

var (
	networkAttrs  = []string{"mode", "mbits", "hostname"}
	networkBlocks = []blockKind{
		{name: "port", labels: []string{"label"}, many: true, unique: true},
		{name: "dns"}, {name: "cni"},
	}
	portAttrs = []string{"static", "to", "host_network", "ignore_collision"}
)

func (p *parser) network(b *hcl.Block) []*structs.NetworkResource {
	if b == nil {
		return nil
	}
	n := &structs.NetworkResource{Mode: structs.NetworkModeHost}
	attrs, blocks := p.content(b.Body, networkAttrs, networkBlocks)
	if p.setString(attrs["mode"], &n.Mode) {
		if n.Mode == "" {
			n.Mode = structs.NetworkModeHost
		}
		if err := structs.ValidateNetworkMode(n.Mode); err != nil {
			p.errorf(attrs["mode"].Expr.Range(), "Unsupported network mode", "%s.", err)
		}
	}
	p.setIntRange(attrs["mbits"], 0, 1<<20, func(i int64) { n.MBits = int(i) })
	if p.setString(attrs["hostname"], &n.Hostname) && n.Hostname != "" {
		if err := structs.ValidateNetworkHostname(n.Hostname, n.Mode); err != nil {
			p.errorf(attrs["hostname"].Expr.Range(), "Invalid hostname", "%s.", err)
		}
	}
	if db := first(blocks, "dns"); db != nil {
		d := &structs.DNSConfig{}
		da, _ := p.content(db.Body, []string{"servers", "searches", "options"}, nil)
		p.setStrings(da["servers"], &d.Servers)
		p.setStrings(da["searches"], &d.Searches)
		p.setStrings(da["options"], &d.Options)
		n.DNS = d
		if err := structs.ValidateDNS(d); err != nil {
			r := db.DefRange
			for _, k := range []string{"servers", "searches", "options"} {
				if a := da[k]; a != nil && strings.HasPrefix(err.Error(), k) {
					r = a.Expr.Range()
				}
			}
			p.errorf(r, "Invalid dns", "%s.", err)
		}
	}
	if cb := first(blocks, "cni"); cb != nil {
		ca, _ := p.content(cb.Body, []string{"args"}, nil)
		n.CNI = &structs.CNIConfig{}
		if a := ca["args"]; a != nil {
			n.CNI.Args = p.stringMapAttr(a)
			if err := structs.ValidateCNIArgs(n.CNI.Args); err != nil {
				p.errorf(a.Expr.Range(), "Invalid cni args", "%s.", err)
			}
		}
		if n.Mode != structs.NetworkModeBridge && !strings.HasPrefix(n.Mode, structs.NetworkModeCNIPrefix) {
			p.errorf(cb.DefRange, "Unsupported block type",
				"cni is only allowed with mode = \"bridge\" or \"cni/<name>\" (mode is %q): its args are passed to the CNI plugins.", n.Mode)
		}
	}

	ports := blocks["port"]
	if n.Mode == structs.NetworkModeNone && len(ports) > 0 {
		p.errorf(ports[0].DefRange, "Unsupported block type",
			"mode \"none\" has no ports (the allocation's network is loopback only): use mode = \"bridge\" to map ports.")
	}
	if len(ports) > structs.MaxPortsPerGroup {
		p.errorf(ports[structs.MaxPortsPerGroup].DefRange, "Too many ports",
			"A network block may ask for at most %d ports; this one asks for %d.", structs.MaxPortsPerGroup, len(ports))
		return []*structs.NetworkResource{n}
	}
	static := map[int]*hcl.Attribute{}
	for _, pb := range ports {
		label := pb.Labels[0]
		if !validLabel(label) {
			p.errorf(pb.LabelRanges[0], "Invalid port label",
				"The port label %q must be letters, digits and underscores: it names NOMAD_PORT_%s.", label, label)
		}
		port := structs.Port{Label: label}
		pa, _ := p.content(pb.Body, portAttrs, nil)
		if a := pa["static"]; a != nil && p.setIntRange(a, structs.MinPort, structs.MaxPort, func(i int64) { port.Value = int(i) }) {
			if prev := static[port.Value]; prev != nil {
				p.errorf(a.Expr.Range(), "Duplicate static port",
					"Static port %d is already asked for at %s; each port of a node can be held once.", port.Value, posString(prev.Expr.Range()))
			}
			static[port.Value] = a
		}
		p.setIntRange(pa["to"], -1, structs.MaxPort, func(i int64) { port.To = int(i) })
		if p.setString(pa["host_network"], &port.HostNetwork) && port.HostNetwork != structs.HostNetworkDefault {
			p.errorf(pa["host_network"].Expr.Range(), "Unsupported host_network",
				"host_network is %q; drover serves the node's default network only (host_network = %q).", port.HostNetwork, structs.HostNetworkDefault)
		}
		if a := pa["ignore_collision"]; a != nil && p.setBool(a, &port.IgnoreCollision) && port.IgnoreCollision {
			p.errorf(a.NameRange, "Unsupported argument",
				"ignore_collision = true is not supported: drover never places two allocations on the same port of a node.")
		}
		if port.Value != 0 {
			n.ReservedPorts = append(n.ReservedPorts, port)
		} else {
			n.DynamicPorts = append(n.DynamicPorts, port)
		}
	}
	return []*structs.NetworkResource{n}
}

func validLabel(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

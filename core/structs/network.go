package structs

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Network modes. In host mode a group's tasks use the node's network;
// in bridge mode the allocation gets its own network namespace on the
// client's bridge (with the host ports mapped to the ports inside it); in
// "cni/<name>" mode its own namespace set up by the client's CNI network
// config <name>; in none mode its own namespace with loopback only. A
// group's ports are always ports of the node's own address.
const (
	NetworkModeHost   = "host"
	NetworkModeBridge = "bridge"
	NetworkModeNone   = "none"
	// NetworkModeCNIPrefix starts "cni/<name>".
	NetworkModeCNIPrefix = "cni/"

	// HostNetworkDefault is the only host_network a port may name: the
	// node's fingerprinted address.
	HostNetworkDefault = "default"
)

// Port bounds. A group asks for at most MaxPortsPerGroup ports, each in
// [MinPort, MaxPort]; the dynamic range defaults to Nomad's.
const (
	MinPort                = 1
	MaxPort                = 65535
	MaxPortsPerGroup       = 128
	DefaultMinDynamicPort  = 20000
	DefaultMaxDynamicPort  = 32000
	maxReservedPortsString = 4096

	// Bounds of a cni block's args (CNI_ARGS): count and lengths.
	MaxCNIArgs        = 32
	MaxCNIArgKeyLen   = 128
	MaxCNIArgValueLen = 1024
	// MaxCNINetworkName bounds the <name> of "cni/<name>".
	MaxCNINetworkName = 128
)

// ValidateNetworkMode checks a network block's mode: "" (host), "host",
// "bridge", "none" or "cni/<name>", a name of letters, digits, '.', '_'
// and '-' (the name of a CNI network config, which CNI restricts so).
func ValidateNetworkMode(mode string) error {
	switch mode {
	case "", NetworkModeHost, NetworkModeBridge, NetworkModeNone:
		return nil
	}
	name, ok := strings.CutPrefix(mode, NetworkModeCNIPrefix)
	if !ok {
		return fmt.Errorf("mode %q is not one of \"host\", \"bridge\", \"none\" or \"cni/<name>\"", mode)
	}
	if err := validCNIName(name); err != nil {
		return fmt.Errorf("mode %q: %v", mode, err)
	}
	return nil
}

func validCNIName(name string) error {
	if name == "" {
		return fmt.Errorf("the CNI network name after \"cni/\" is missing")
	}
	if len(name) > MaxCNINetworkName {
		return fmt.Errorf("the CNI network name is %d characters long, at most %d are allowed", len(name), MaxCNINetworkName)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || (i > 0 && (r == '.' || r == '_' || r == '-'))
		if !ok {
			return fmt.Errorf("the CNI network name %q must start with a letter or digit and hold only letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// ValidateCNIArgs checks a cni block's args: bounded, keys non-empty and
// neither keys nor values holding ';' or '=' (CNI_ARGS is
// "K1=V1;K2=V2").
func ValidateCNIArgs(args map[string]string) error {
	if len(args) > MaxCNIArgs {
		return fmt.Errorf("%d args, at most %d are allowed", len(args), MaxCNIArgs)
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := args[k]
		switch {
		case k == "":
			return fmt.Errorf("an arg has an empty name")
		case len(k) > MaxCNIArgKeyLen:
			return fmt.Errorf("arg name %.32q... is %d characters long, at most %d are allowed", k, len(k), MaxCNIArgKeyLen)
		case len(v) > MaxCNIArgValueLen:
			return fmt.Errorf("arg %q is %d characters long, at most %d are allowed", k, len(v), MaxCNIArgValueLen)
		case strings.ContainsAny(k, ";= \t\n\x00"):
			return fmt.Errorf("arg name %q must not hold ';', '=', blanks or NUL (CNI_ARGS is \"K=V;K=V\")", k)
		case strings.ContainsAny(v, ";\n\x00"):
			return fmt.Errorf("arg %q: the value must not hold ';', newlines or NUL (CNI_ARGS is \"K=V;K=V\")", k)
		}
	}
	return nil
}

// Bounds of a network's dns block and hostname. resolv(5) reads at most
// 3 nameservers and 6 search domains; glibc caps the search list at 256
// characters.
const (
	MaxDNSServers     = 3
	MaxDNSSearches    = 6
	MaxDNSSearchLen   = 253
	MaxDNSOptions     = 16
	MaxDNSOptionLen   = 64
	MaxHostnameLength = 63
	// maxHostnameTemplate bounds a hostname holding ${…}.
	maxHostnameTemplate = 256
)

// ValidateDNS checks a network's dns block: servers are IP addresses (at
// most MaxDNSServers), searches domain names, options resolv.conf
// options ("ndots:2", "rotate"); none may hold blanks or newlines, which
// would change the meaning of the resolv.conf written from them.
func ValidateDNS(d *DNSConfig) error {
	if d == nil {
		return nil
	}
	if len(d.Servers) > MaxDNSServers {
		return fmt.Errorf("servers: %d given, at most %d are allowed (the resolver reads only %d)", len(d.Servers), MaxDNSServers, MaxDNSServers)
	}
	for i, s := range d.Servers {
		if _, err := netip.ParseAddr(s); err != nil || strings.Contains(s, "%") {
			return fmt.Errorf("servers[%d]: %q is not an IP address", i, s)
		}
	}
	if len(d.Searches) > MaxDNSSearches {
		return fmt.Errorf("searches: %d given, at most %d are allowed", len(d.Searches), MaxDNSSearches)
	}
	for i, s := range d.Searches {
		if !validDomain(strings.TrimSuffix(s, "."), MaxDNSSearchLen) {
			return fmt.Errorf("searches[%d]: %q is not a domain name (labels of letters, digits and '-', at most %d characters)", i, s, MaxDNSSearchLen)
		}
	}
	if len(d.Options) > MaxDNSOptions {
		return fmt.Errorf("options: %d given, at most %d are allowed", len(d.Options), MaxDNSOptions)
	}
	for i, o := range d.Options {
		if o == "" || len(o) > MaxDNSOptionLen || strings.ContainsFunc(o, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return fmt.Errorf("options[%d]: %q must be 1-%d printable characters without blanks (e.g. \"ndots:2\")", i, o, MaxDNSOptionLen)
		}
	}
	return nil
}

// ValidateNetworkHostname checks a network's hostname: a hostname (RFC
// 1123 label, at most MaxHostnameLength characters), set only in a mode
// where the allocation has a UTS namespace to give it. One holding ${…}
// is interpolated by the client, as in Nomad, and checked there.
func ValidateNetworkHostname(h, mode string) error {
	if mode == "" {
		mode = NetworkModeHost
	}
	if !IsolatedNetworkMode(mode) {
		return fmt.Errorf("hostname is only allowed with mode \"bridge\", \"none\" or \"cni/<name>\" (mode is %q): in host mode tasks have the node's hostname", mode)
	}
	if strings.Contains(h, "${") {
		// Interpolated by the client (${NOMAD_ALLOC_INDEX} and the
		// like), which checks the result.
		if len(h) > maxHostnameTemplate {
			return fmt.Errorf("hostname is %d characters long, at most %d are allowed", len(h), maxHostnameTemplate)
		}
		return nil
	}
	if len(h) > MaxHostnameLength || !validDomain(h, MaxHostnameLength) || strings.Contains(h, ".") {
		return fmt.Errorf("hostname %q must be 1-%d letters, digits and '-', not starting or ending with '-'", h, MaxHostnameLength)
	}
	return nil
}

// validDomain: dot-separated labels of letters, digits and '-' (not at a
// label's ends), at most max characters in all.
func validDomain(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				return false
			}
		}
	}
	return true
}

// IsolatedNetworkMode reports whether mode gives the allocation its own
// network namespace (bridge, none, cni/<name>).
func IsolatedNetworkMode(mode string) bool {
	return mode == NetworkModeBridge || mode == NetworkModeNone || strings.HasPrefix(mode, NetworkModeCNIPrefix)
}

// GroupNetworkMode is the mode of a group's network block ("host" when it
// has none).
func (tg *TaskGroup) GroupNetworkMode() string {
	if tg == nil || len(tg.Networks) == 0 || tg.Networks[0] == nil || tg.Networks[0].Mode == "" {
		return NetworkModeHost
	}
	return tg.Networks[0].Mode
}

// NetworkResource is a group's network block (TaskGroup.Networks) or one
// of a node's addresses (NodeResources.Networks), as Nomad's API spells it.
type NetworkResource struct {
	Mode          string `codec:",omitempty" bound:"id"`
	Device        string `codec:",omitempty" bound:"id"`
	CIDR          string `codec:",omitempty" bound:"id"`
	IP            string `codec:",omitempty" bound:"id"`
	Hostname      string `codec:",omitempty"`
	MBits         int    `codec:",omitempty"`
	ReservedPorts []Port `codec:",omitempty"`
	DynamicPorts  []Port `codec:",omitempty"`
	// DNS is the allocation's resolver configuration: in bridge, none
	// and cni/<name> modes the client writes the allocation's
	// resolv.conf from it for every task; in host mode only docker
	// tasks get it (as in Nomad). CNI's args are passed to the CNI
	// plugins (CNI_ARGS) in bridge and cni/<name> modes.
	DNS *DNSConfig `codec:",omitempty"`
	CNI *CNIConfig `codec:",omitempty"`
}

// DNSConfig is a network's dns block.
type DNSConfig struct {
	Servers  []string `codec:",omitempty"`
	Searches []string `codec:",omitempty"`
	Options  []string `codec:",omitempty"`
}

// AllocNetworkStatus is an allocation's interface and address in its own
// network namespace, and the resolver its network configured (nil: the
// node's), as Nomad's alloc JSON shows them.
type AllocNetworkStatus struct {
	InterfaceName string     `codec:",omitempty" bound:"id"`
	Address       string     `codec:",omitempty" bound:"id"`
	DNS           *DNSConfig `codec:",omitempty"`
}

// CNIConfig is a network's cni block.
type CNIConfig struct {
	Args map[string]string `codec:",omitempty"`
}

// Port is one port a group asks for: Value is the host port (static for a
// reserved port, 0 for a dynamic one until it is picked) and To the port
// the task listens on inside its network namespace (0: the host port).
type Port struct {
	Label       string `codec:",omitempty" bound:"id"`
	Value       int    `codec:",omitempty"`
	To          int    `codec:",omitempty"`
	HostNetwork string `codec:",omitempty" bound:"id"`
	// IgnoreCollision (share a static port with other allocations) is
	// Nomad's; drover holds each port of a node once, so a port setting
	// it is refused.
	IgnoreCollision bool `codec:",omitempty"`
}

// AllocatedPortMapping is one port an allocation holds on its node
// (AllocatedResources.Shared.Ports).
type AllocatedPortMapping struct {
	Label  string `codec:",omitempty"`
	Value  int    `codec:",omitempty"`
	To     int    `codec:",omitempty"`
	HostIP string `codec:",omitempty"`
}

// NodeReservedNetworkResources is the host ports a node keeps from
// scheduling, in the agent's syntax ("22,80,8500-8600").
type NodeReservedNetworkResources struct {
	ReservedHostPorts string `codec:",omitempty"`
}

// PortRange is an inclusive range of ports.
type PortRange struct{ From, To int }

// ParsePortRanges reads a list such as "22,80,8500-8600". Every port must
// be in [1, 65535] and every range ascending.
func ParsePortRanges(s string) ([]PortRange, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if len(s) > maxReservedPortsString {
		return nil, fmt.Errorf("port list is %d characters long, at most %d are allowed", len(s), maxReservedPortsString)
	}
	var out []PortRange
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := parsePort(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		to := from
		if isRange {
			if to, err = parsePort(hi); err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
			if to < from {
				return nil, fmt.Errorf("%q: range must be ascending", part)
			}
		}
		out = append(out, PortRange{From: from, To: to})
	}
	return out, nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("not a port number")
	}
	if n < MinPort || n > MaxPort {
		return 0, fmt.Errorf("port %d is outside %d-%d", n, MinPort, MaxPort)
	}
	return n, nil
}

// validateNetworks checks a group's network blocks: a known mode, at most
// one block, labels unique and usable
// in environment variable names, static ports in range and not repeated,
// and a bounded number of ports.
func (tg *TaskGroup) validateNetworks(l *errList, where string) {
	if len(tg.Networks) == 0 {
		return
	}
	if len(tg.Networks) > 1 {
		l.add("%s: network: only one network block is allowed (got %d)", where, len(tg.Networks))
	}
	labels := map[string]bool{}
	static := map[int]string{}
	for i, n := range tg.Networks {
		w := fmt.Sprintf("%s: network %d", where, i+1)
		if n == nil {
			l.add("%s: null is not allowed (Networks[%d])", w, i)
			continue
		}
		if err := ValidateNetworkMode(n.Mode); err != nil {
			l.add("%s: %v", w, err)
		}
		if n.DNS != nil {
			if err := ValidateDNS(n.DNS); err != nil {
				l.add("%s: dns: %v", w, err)
			}
		}
		if n.Hostname != "" {
			if err := ValidateNetworkHostname(n.Hostname, n.Mode); err != nil {
				l.add("%s: %v", w, err)
			}
		}
		if n.CNI != nil {
			if n.Mode != NetworkModeBridge && !strings.HasPrefix(n.Mode, NetworkModeCNIPrefix) {
				l.add("%s: cni is only allowed with mode \"bridge\" or \"cni/<name>\" (mode is %q): its args are passed to the CNI plugins", w, n.Mode)
			} else if err := ValidateCNIArgs(n.CNI.Args); err != nil {
				l.add("%s: cni: %v", w, err)
			}
		}
		if n.Mode == NetworkModeNone && len(n.ReservedPorts)+len(n.DynamicPorts) > 0 {
			l.add("%s: mode \"none\" has no ports (the allocation's network is loopback only): use mode \"bridge\" to map ports", w)
		}
		if total := len(n.ReservedPorts) + len(n.DynamicPorts); total > MaxPortsPerGroup {
			l.add("%s: %d ports asked, at most %d are allowed", w, total, MaxPortsPerGroup)
			continue
		}
		check := func(p Port, reserved bool) {
			pw := fmt.Sprintf("%s: port %q", w, p.Label)
			switch {
			case p.Label == "":
				l.add("%s: port: missing label", w)
			case !validPortLabel(p.Label):
				l.add("%s: label must be letters, digits and underscores", pw)
			case labels[p.Label]:
				l.add("%s: label defined more than once", pw)
			}
			labels[p.Label] = true
			if reserved {
				if p.Value < MinPort || p.Value > MaxPort {
					l.add("%s: static port %d is outside %d-%d", pw, p.Value, MinPort, MaxPort)
				} else if other, dup := static[p.Value]; dup {
					l.add("%s: static port %d is also asked by port %q", pw, p.Value, other)
				} else {
					static[p.Value] = p.Label
				}
			} else if p.Value != 0 {
				l.add("%s: a dynamic port must not set a value (got %d)", pw, p.Value)
			}
			if p.IgnoreCollision {
				l.add("%s: ignore_collision is not supported: drover never places two allocations on the same port of a node", pw)
			}
			if p.To < -1 || p.To > MaxPort {
				l.add("%s: to %d is outside 0-%d (-1 or 0: the host port)", pw, p.To, MaxPort)
			}
			if p.HostNetwork != "" && p.HostNetwork != HostNetworkDefault {
				l.add("%s: host_network %q is not supported (only %q)", pw, p.HostNetwork, HostNetworkDefault)
			}
		}
		for _, p := range n.ReservedPorts {
			check(p, true)
		}
		for _, p := range n.DynamicPorts {
			check(p, false)
		}
	}
}

// validPortLabel: a label ends up in NOMAD_PORT_<label>.
func validPortLabel(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// Ports are the host ports the allocation holds.
func (a *AllocatedResources) PortValues() []int {
	if a == nil {
		return nil
	}
	out := make([]int, 0, len(a.Shared.Ports))
	for _, p := range a.Shared.Ports {
		out = append(out, p.Value)
	}
	return out
}

// PortCollision names the first host port that two of allocs hold, or
// that the node reserves and a new alloc (one that fresh names) holds;
// "" when none does. Terminal allocs hold none. An alloc placed before
// the node reserved its port keeps it.
func PortCollision(reserved []PortRange, allocs []*Allocation, fresh func(*Allocation) bool) string {
	held := map[int]string{}
	for _, a := range allocs {
		if a == nil || a.TerminalStatus() || a.AllocatedResources == nil {
			continue
		}
		isNew := fresh(a)
		for _, p := range a.AllocatedResources.Shared.Ports {
			for _, r := range reserved {
				if isNew && p.Value >= r.From && p.Value <= r.To {
					return fmt.Sprintf("network: reserved port collision %s=%d", p.Label, p.Value)
				}
			}
			if other, ok := held[p.Value]; ok && other != a.ID {
				return fmt.Sprintf("network: port collision %s=%d", p.Label, p.Value)
			}
			held[p.Value] = a.ID
		}
	}
	return ""
}

// SortedPorts returns the mappings ordered by label, for display.
func SortedPorts(ps []AllocatedPortMapping) []AllocatedPortMapping {
	out := append([]AllocatedPortMapping(nil), ps...)
	sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
	return out
}

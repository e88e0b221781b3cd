// Package acl parses ACL policies written in Nomad's policy language,
// compiles the policies of a token into an ACL, and answers the
// permission checks the HTTP and RPC endpoints make. It does no I/O: the
// Resolver reads tokens and policies through a Source the caller gives it.
//
// Merging follows Nomad. Rules for the same namespace (or the same glob)
// from any number of policies are unioned, except that deny wins: a rule
// that denies a namespace denies it whatever the others grant. For
// node, agent, operator, quota and plugin the strongest policy wins, deny
// being the strongest of all. A management token bypasses every check.
//
// Which rule applies to a namespace is decided before capabilities are
// checked: the rule with the namespace's exact name if there is one,
// else the closest matching glob (see Compile). So
// `namespace "*" { policy = "deny" }` beside `namespace "prod" { policy =
// "read" }` still lets the token read prod: the deny covers the other
// namespaces only.
package acl

import (
	"cmp"
	"slices"
	"strings"
)

// AnonymousPolicyName is the policy that governs requests without a token
// when ACLs are enabled. It grants nothing until an operator writes it.
const AnonymousPolicyName = "anonymous"

// capSet is a set of capabilities, one bit each, in the order of
// namespaceCapabilities (or hostVolumeCapabilities). Bit 0 is deny in
// both.
type capSet uint64

const denyBit capSet = 1

var (
	namespaceBits  = bitsOf(namespaceCapabilities)
	hostVolumeBits = bitsOf(hostVolumeCapabilities)
)

func bitsOf(caps []string) map[string]capSet {
	m := make(map[string]capSet, len(caps))
	for i, c := range caps {
		m[c] = 1 << i
	}
	return m
}

func setOf(bits map[string]capSet, caps []string) capSet {
	var s capSet
	for _, c := range caps {
		s |= bits[c]
	}
	return s
}

// merge unions two rules for the same name; deny wins.
func merge(a, b capSet) capSet {
	if (a|b)&denyBit != 0 {
		return denyBit
	}
	return a | b
}

// ruleSet is the merged rules of one kind (namespaces or host volumes).
type ruleSet struct {
	exact map[string]capSet
	// globs is in precedence order: the first that matches applies.
	globs []globRule
}

type globRule struct {
	pattern string
	literal int // bytes that are not '*'
	stars   int
	caps    capSet
}

func (r *ruleSet) add(name string, caps capSet) {
	if !strings.Contains(name, "*") {
		if r.exact == nil {
			r.exact = map[string]capSet{}
		}
		old, ok := r.exact[name]
		if ok {
			caps = merge(old, caps)
		}
		r.exact[name] = caps
		return
	}
	for i := range r.globs {
		if r.globs[i].pattern == name {
			r.globs[i].caps = merge(r.globs[i].caps, caps)
			return
		}
	}
	stars := strings.Count(name, "*")
	r.globs = append(r.globs, globRule{pattern: name, literal: len(name) - stars, stars: stars, caps: caps})
}

// order sorts the globs by precedence: more literal characters first
// (the glob that leaves the least of the name to its wildcards, as
// Nomad scores them), then fewer wildcards, then the pattern's byte
// order, so that the choice never depends on the order of policies.
func (r *ruleSet) order() {
	slices.SortFunc(r.globs, func(a, b globRule) int {
		return cmp.Or(cmp.Compare(b.literal, a.literal), cmp.Compare(a.stars, b.stars), strings.Compare(a.pattern, b.pattern))
	})
}

// lookup returns the capabilities of the rule that applies to name.
func (r *ruleSet) lookup(name string) (capSet, bool) {
	if c, ok := r.exact[name]; ok {
		return c, true
	}
	for i := range r.globs {
		if globMatch(r.globs[i].pattern, name) {
			return r.globs[i].caps, true
		}
	}
	return 0, false
}

// globMatch reports whether name matches pattern, in which '*' matches
// any run of bytes, empty included, and every other byte itself. It
// runs in O(len(pattern)·len(name)) at worst, without recursion.
func globMatch(pattern, name string) bool {
	p, n := 0, 0
	star, starN := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, starN = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			// Let the last star swallow one more byte and retry.
			starN++
			p, n = star+1, starN
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// ACL is the compiled permissions of one token. It is immutable and safe
// to share between goroutines.
//
// A nil *ACL allows nothing. An endpoint serving with ACLs disabled must
// use ManagementACL rather than nil, so that a forgotten resolution
// fails closed.
type ACL struct {
	management  bool
	namespaces  ruleSet
	hostVolumes ruleSet
	// vars holds the variables path rules by namespace rule name.
	vars     map[string]*ruleSet
	node     string
	agent    string
	operator string
	quota    string
	plugin   string
}

// ManagementACL is the ACL of a management token: every check passes.
var ManagementACL = &ACL{management: true}

// Compile merges policies into one ACL. Nil policies are skipped; no
// policies make an ACL that allows nothing.
//
// Namespace and host volume rules are merged per name (deny wins, see
// the package comment). At check time the rule with the exact name
// applies; failing that, of the globs that match, the one with the most
// literal (non-'*') characters; on a tie, the one with fewer '*'; on a
// tie still, the pattern that sorts first. Nomad leaves that last tie
// unspecified.
func Compile(policies []*Policy) *ACL {
	a := &ACL{}
	for _, p := range policies {
		if p == nil {
			continue
		}
		for _, r := range p.Namespaces {
			a.namespaces.add(r.Name, setOf(namespaceBits, r.Capabilities))
			a.compileVariables(r)
		}
		for _, r := range p.HostVolumes {
			a.hostVolumes.add(r.Name, setOf(hostVolumeBits, r.Capabilities))
		}
		a.node = maxPolicy(a.node, p.Node)
		a.agent = maxPolicy(a.agent, p.Agent)
		a.operator = maxPolicy(a.operator, p.Operator)
		a.quota = maxPolicy(a.quota, p.Quota)
		a.plugin = maxPolicy(a.plugin, p.Plugin)
	}
	a.namespaces.order()
	a.hostVolumes.order()
	for _, rs := range a.vars {
		rs.order()
	}
	return a
}

// maxPolicy merges two policy values: deny, then write, then read, then
// list.
func maxPolicy(a, b string) string {
	for _, p := range []string{PolicyDeny, PolicyWrite, PolicyRead, PolicyList} {
		if a == p || b == p {
			return p
		}
	}
	return ""
}

// IsManagement reports whether the ACL is a management token's.
func (a *ACL) IsManagement() bool { return a != nil && a.management }

// AllowNamespaceOperation reports whether the ACL grants capability (one
// of the NamespaceCapability constants) in namespace ns. An unknown
// capability is never granted.
func (a *ACL) AllowNamespaceOperation(ns, capability string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	bit, ok := namespaceBits[capability]
	if !ok || bit == denyBit {
		return false
	}
	caps, ok := a.namespaces.lookup(ns)
	return ok && caps&denyBit == 0 && caps&bit != 0
}

// AllowNamespace reports whether the ACL grants any capability in ns: the
// test for showing a namespace in a listing.
func (a *ACL) AllowNamespace(ns string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	caps, ok := a.namespaces.lookup(ns)
	return ok && caps != 0 && caps&denyBit == 0
}

// AllowHostVolumeOperation reports whether the ACL grants capability (a
// HostVolumeCapability constant) on the host volume named vol.
func (a *ACL) AllowHostVolumeOperation(vol, capability string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	bit, ok := hostVolumeBits[capability]
	if !ok || bit == denyBit {
		return false
	}
	caps, ok := a.hostVolumes.lookup(vol)
	return ok && caps&denyBit == 0 && caps&bit != 0
}

// AllowHostVolume reports whether the ACL grants any capability on vol.
func (a *ACL) AllowHostVolume(vol string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	caps, ok := a.hostVolumes.lookup(vol)
	return ok && caps != 0 && caps&denyBit == 0
}

// readable and writable answer for the deny|read|write rules; a is not
// nil.
func (a *ACL) readable(policy string) bool {
	return a.management || policy == PolicyRead || policy == PolicyWrite
}

func (a *ACL) writable(policy string) bool {
	return a.management || policy == PolicyWrite
}

// AllowNodeRead reports whether the ACL may read nodes.
func (a *ACL) AllowNodeRead() bool { return a != nil && a.readable(a.node) }

// AllowNodeWrite reports whether the ACL may change nodes (drain,
// eligibility, purge).
func (a *ACL) AllowNodeWrite() bool { return a != nil && a.writable(a.node) }

// AllowAgentRead reports whether the ACL may read agent information.
func (a *ACL) AllowAgentRead() bool { return a != nil && a.readable(a.agent) }

// AllowAgentWrite reports whether the ACL may change agents (join,
// force-leave, log levels).
func (a *ACL) AllowAgentWrite() bool { return a != nil && a.writable(a.agent) }

// AllowOperatorRead reports whether the ACL may read cluster operator
// state (Raft configuration, scheduler configuration).
func (a *ACL) AllowOperatorRead() bool { return a != nil && a.readable(a.operator) }

// AllowOperatorWrite reports whether the ACL may change it.
func (a *ACL) AllowOperatorWrite() bool { return a != nil && a.writable(a.operator) }

// AllowQuotaRead reports whether the ACL may read quotas.
func (a *ACL) AllowQuotaRead() bool { return a != nil && a.readable(a.quota) }

// AllowQuotaWrite reports whether the ACL may change quotas.
func (a *ACL) AllowQuotaWrite() bool { return a != nil && a.writable(a.quota) }

// AllowPluginRead reports whether the ACL may read plugins in detail.
func (a *ACL) AllowPluginRead() bool {
	return a != nil && (a.management || a.plugin == PolicyRead)
}

// AllowPluginList reports whether the ACL may list plugins.
func (a *ACL) AllowPluginList() bool {
	return a != nil && (a.management || a.plugin == PolicyRead || a.plugin == PolicyList)
}

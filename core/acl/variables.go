package acl

import (
	"regexp"
	"slices"
	"sync"

	"github.com/hashicorp/hcl/v2"
)

// Variables capabilities, as Nomad names them: granted per path glob
// inside a namespace rule (`namespace "x" { variables { path "a/*" {
// capabilities = [...] } } }`).
const (
	VariablesCapabilityDeny    = "deny"
	VariablesCapabilityRead    = "read"
	VariablesCapabilityWrite   = "write"
	VariablesCapabilityList    = "list"
	VariablesCapabilityDestroy = "destroy"
)

// variablesCapabilities lists them; the order gives each its bit.
var variablesCapabilities = []string{
	VariablesCapabilityDeny,
	VariablesCapabilityRead,
	VariablesCapabilityWrite,
	VariablesCapabilityList,
	VariablesCapabilityDestroy,
}

var variablesBits = bitsOf(variablesCapabilities)

// A namespace rule's policy shorthand grants variables on every path, as
// Nomad's: read lists and reads, write also writes and destroys, deny
// denies.
func expandVariablesPolicy(policy string) []string {
	switch policy {
	case PolicyDeny:
		return []string{VariablesCapabilityDeny}
	case PolicyRead:
		return []string{VariablesCapabilityList, VariablesCapabilityRead}
	case PolicyWrite:
		return []string{VariablesCapabilityDestroy, VariablesCapabilityList, VariablesCapabilityRead, VariablesCapabilityWrite}
	}
	return nil
}

// VariablesPathRule grants variables capabilities on the paths Path
// matches: a path, or a glob in which `*` matches any run of characters
// ("/" included).
type VariablesPathRule struct {
	Path         string
	Capabilities []string
}

var varPathRuleRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9-_~/*]{1,128}$`) })

func (p *policyParser) variables(b *hcl.Block) []*VariablesPathRule {
	content, diags := b.Body.Content(variablesSchema)
	p.diags = append(p.diags, diags...)
	if content == nil {
		return nil
	}
	var out []*VariablesPathRule
	for _, pb := range content.Blocks {
		path, ok := p.label(pb, varPathRuleRE(), "letters, digits, -, _, ~, / and * wildcards")
		body, diags := pb.Body.Content(varPathSchema)
		p.diags = append(p.diags, diags...)
		if body == nil || !ok {
			continue
		}
		_, caps := p.ruleBody(body, "variables", variablesCapabilities, func(string) []string { return nil })
		out = append(out, &VariablesPathRule{Path: path, Capabilities: caps})
	}
	return out
}

// compileVariables adds a namespace rule's variables rules (and its
// policy's expansion on "*") to a.vars, under the rule's name.
func (a *ACL) compileVariables(r *NamespaceRule) {
	rules := r.Variables
	if exp := expandVariablesPolicy(r.Policy); exp != nil {
		rules = append(slices.Clone(rules), &VariablesPathRule{Path: "*", Capabilities: exp})
	}
	if len(rules) == 0 {
		return
	}
	if a.vars == nil {
		a.vars = map[string]*ruleSet{}
	}
	rs := a.vars[r.Name]
	if rs == nil {
		rs = &ruleSet{}
		a.vars[r.Name] = rs
	}
	for _, pr := range rules {
		rs.add(pr.Path, setOf(variablesBits, pr.Capabilities))
	}
}

// varRules returns the variables rules of the namespace rule that applies
// to ns, or nil (none, or the namespace is denied).
func (a *ACL) varRules(ns string) *ruleSet {
	name, caps, ok := a.namespaces.lookupKey(ns)
	if !ok || caps&denyBit != 0 {
		return nil
	}
	return a.vars[name]
}

// AllowVariableOperation reports whether the ACL grants capability (a
// VariablesCapability constant) on the variable at path in namespace ns.
func (a *ACL) AllowVariableOperation(ns, path, capability string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	bit, ok := variablesBits[capability]
	if !ok || bit == denyBit {
		return false
	}
	rs := a.varRules(ns)
	if rs == nil {
		return false
	}
	caps, ok := rs.lookup(path)
	return ok && caps&denyBit == 0 && caps&bit != 0
}

// AllowVariableSearch reports whether the ACL may list some variables in
// ns: the test for a list request, filtered path by path after.
func (a *ACL) AllowVariableSearch(ns string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	rs := a.varRules(ns)
	if rs == nil {
		return false
	}
	for _, c := range rs.exact {
		if c&denyBit == 0 && c&variablesBits[VariablesCapabilityList] != 0 {
			return true
		}
	}
	for _, g := range rs.globs {
		if g.caps&denyBit == 0 && g.caps&variablesBits[VariablesCapabilityList] != 0 {
			return true
		}
	}
	return false
}

// lookupKey is lookup that also names the rule: the exact name or the
// glob's pattern.
func (r *ruleSet) lookupKey(name string) (string, capSet, bool) {
	if c, ok := r.exact[name]; ok {
		return name, c, true
	}
	for i := range r.globs {
		if globMatch(r.globs[i].pattern, name) {
			return r.globs[i].pattern, r.globs[i].caps, true
		}
	}
	return "", 0, false
}

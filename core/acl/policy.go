package acl

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
)

// Policy values: the `policy` shorthand of each rule.
const (
	PolicyDeny    = "deny"
	PolicyRead    = "read"
	PolicyWrite   = "write"
	PolicyScaling = "scaling" // namespace rules only
	PolicyList    = "list"    // plugin rules only
)

// Namespace capabilities, as Nomad names them.
const (
	NamespaceCapabilityDeny                 = "deny"
	NamespaceCapabilityListJobs             = "list-jobs"
	NamespaceCapabilityParseJob             = "parse-job"
	NamespaceCapabilityReadJob              = "read-job"
	NamespaceCapabilitySubmitJob            = "submit-job"
	NamespaceCapabilityDispatchJob          = "dispatch-job"
	NamespaceCapabilityReadLogs             = "read-logs"
	NamespaceCapabilityReadFS               = "read-fs"
	NamespaceCapabilityAllocExec            = "alloc-exec"
	NamespaceCapabilityAllocNodeExec        = "alloc-node-exec"
	NamespaceCapabilityAllocLifecycle       = "alloc-lifecycle"
	NamespaceCapabilitySentinelOverride     = "sentinel-override"
	NamespaceCapabilityCSIRegisterPlugin    = "csi-register-plugin"
	NamespaceCapabilityCSIWriteVolume       = "csi-write-volume"
	NamespaceCapabilityCSIReadVolume        = "csi-read-volume"
	NamespaceCapabilityCSIListVolume        = "csi-list-volume"
	NamespaceCapabilityCSIMountVolume       = "csi-mount-volume"
	NamespaceCapabilityListScalingPolicies  = "list-scaling-policies"
	NamespaceCapabilityReadScalingPolicy    = "read-scaling-policy"
	NamespaceCapabilityReadJobScaling       = "read-job-scaling"
	NamespaceCapabilityScaleJob             = "scale-job"
	NamespaceCapabilitySubmitRecommendation = "submit-recommendation"
)

// Host volume capabilities.
const (
	HostVolumeCapabilityDeny           = "deny"
	HostVolumeCapabilityMountReadOnly  = "mount-readonly"
	HostVolumeCapabilityMountReadWrite = "mount-readwrite"
)

// namespaceCapabilities lists every namespace capability; its order
// gives each its bit in a capability set.
var namespaceCapabilities = []string{
	NamespaceCapabilityDeny,
	NamespaceCapabilityListJobs,
	NamespaceCapabilityParseJob,
	NamespaceCapabilityReadJob,
	NamespaceCapabilitySubmitJob,
	NamespaceCapabilityDispatchJob,
	NamespaceCapabilityReadLogs,
	NamespaceCapabilityReadFS,
	NamespaceCapabilityAllocExec,
	NamespaceCapabilityAllocNodeExec,
	NamespaceCapabilityAllocLifecycle,
	NamespaceCapabilitySentinelOverride,
	NamespaceCapabilityCSIRegisterPlugin,
	NamespaceCapabilityCSIWriteVolume,
	NamespaceCapabilityCSIReadVolume,
	NamespaceCapabilityCSIListVolume,
	NamespaceCapabilityCSIMountVolume,
	NamespaceCapabilityListScalingPolicies,
	NamespaceCapabilityReadScalingPolicy,
	NamespaceCapabilityReadJobScaling,
	NamespaceCapabilityScaleJob,
	NamespaceCapabilitySubmitRecommendation,
}

var hostVolumeCapabilities = []string{
	HostVolumeCapabilityDeny,
	HostVolumeCapabilityMountReadOnly,
	HostVolumeCapabilityMountReadWrite,
}

// Namespace policy shorthands, expanded as Nomad does. write holds all of
// read; neither holds alloc-node-exec, sentinel-override or
// csi-register-plugin, which must be granted by name.
var (
	namespaceRead = []string{
		NamespaceCapabilityListJobs,
		NamespaceCapabilityParseJob,
		NamespaceCapabilityReadJob,
		NamespaceCapabilityCSIListVolume,
		NamespaceCapabilityCSIReadVolume,
		NamespaceCapabilityReadJobScaling,
		NamespaceCapabilityListScalingPolicies,
		NamespaceCapabilityReadScalingPolicy,
	}
	namespaceWrite = append(slices.Clone(namespaceRead),
		NamespaceCapabilityScaleJob,
		NamespaceCapabilitySubmitJob,
		NamespaceCapabilityDispatchJob,
		NamespaceCapabilityReadLogs,
		NamespaceCapabilityReadFS,
		NamespaceCapabilityAllocExec,
		NamespaceCapabilityAllocLifecycle,
		NamespaceCapabilityCSIMountVolume,
		NamespaceCapabilityCSIWriteVolume,
		NamespaceCapabilitySubmitRecommendation,
	)
	namespaceScaling = []string{
		NamespaceCapabilityListScalingPolicies,
		NamespaceCapabilityReadScalingPolicy,
		NamespaceCapabilityReadJobScaling,
		NamespaceCapabilityScaleJob,
	}
)

// ExpandNamespacePolicy returns the capabilities a namespace `policy`
// shorthand grants, or nil for an unknown one.
func ExpandNamespacePolicy(policy string) []string {
	switch policy {
	case PolicyDeny:
		return []string{NamespaceCapabilityDeny}
	case PolicyRead:
		return slices.Clone(namespaceRead)
	case PolicyWrite:
		return slices.Clone(namespaceWrite)
	case PolicyScaling:
		return slices.Clone(namespaceScaling)
	}
	return nil
}

// ExpandHostVolumePolicy returns the capabilities a host_volume `policy`
// shorthand grants, or nil for an unknown one.
func ExpandHostVolumePolicy(policy string) []string {
	switch policy {
	case PolicyDeny:
		return []string{HostVolumeCapabilityDeny}
	case PolicyRead:
		return []string{HostVolumeCapabilityMountReadOnly}
	case PolicyWrite:
		return []string{HostVolumeCapabilityMountReadOnly, HostVolumeCapabilityMountReadWrite}
	}
	return nil
}

// Policy is one parsed ACL policy.
type Policy struct {
	// Name is the policy's name; it is also the file name in the
	// positions of parse errors.
	Name string
	// Namespaces and HostVolumes are the labelled rules in file order. A
	// name may appear more than once; Compile merges them.
	Namespaces  []*NamespaceRule
	HostVolumes []*HostVolumeRule
	// Node, Agent, Operator, Quota and Plugin are each rule's policy
	// value, "" when the policy has no such rule.
	Node     string
	Agent    string
	Operator string
	Quota    string
	Plugin   string
}

// NamespaceRule grants capabilities in the namespaces its Name matches.
type NamespaceRule struct {
	// Name is a namespace name, or a glob in which `*` matches any run
	// of characters.
	Name string
	// Policy is the shorthand as written, "" when none was.
	Policy string
	// Capabilities are those written plus Policy's expansion: sorted,
	// without duplicates.
	Capabilities []string
	// Variables are the rule's variables path rules in file order.
	Variables []*VariablesPathRule
}

// HostVolumeRule grants capabilities on the host volumes its Name
// matches; Name may be a glob as for NamespaceRule.
type HostVolumeRule struct {
	Name         string
	Policy       string
	Capabilities []string
}

// Name rules for rule labels. Nomad allows `*` in both; host volume names
// also allow `_`, which drover's client host_volume names use.
var (
	namespaceRuleRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9*-]{1,128}$`) })
	hostVolumeRuleRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_*-]{1,128}$`) })
)

// ParseError is returned for policy rules that cannot be parsed. Diags
// carry the position of every problem, the policy's name standing for the
// file name; Error() renders one line per diagnostic as
// "name:line:col: Summary; Detail".
//
// errors.Is(err, structs.ErrInvalid) holds.
type ParseError struct {
	Diags hcl.Diagnostics
}

func (e *ParseError) Error() string {
	var lines []string
	for _, d := range e.Diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += "; " + d.Detail
		}
		if s := d.Subject; s != nil {
			msg = fmt.Sprintf("%s:%d:%d: %s", s.Filename, s.Start.Line, s.Start.Column, msg)
		}
		lines = append(lines, msg)
	}
	return strings.Join(lines, "\n")
}

// Unwrap reports the error's kind.
func (e *ParseError) Unwrap() error { return structs.ErrInvalid }

var (
	policyRootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "namespace", LabelNames: []string{"name"}},
		{Type: "host_volume", LabelNames: []string{"name"}},
		{Type: "node"}, {Type: "agent"}, {Type: "operator"}, {Type: "quota"}, {Type: "plugin"},
	}}
	// A namespace rule may hold one variables block of path rules.
	namespaceSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "policy"}, {Name: "capabilities"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "variables"}},
	}
	variablesSchema  = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "path", LabelNames: []string{"path"}}}}
	varPathSchema    = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "capabilities", Required: true}}}
	hostVolumeSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "policy"}, {Name: "capabilities"}}}
	simpleRuleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "policy", Required: true}}}
)

// ParsePolicy parses rules written in Nomad's ACL policy language:
//
//	namespace "default" { policy = "read"  capabilities = ["submit-job"] }
//	namespace "prod-*"  { policy = "deny" }
//	host_volume "data"  { policy = "write" }
//	node     { policy = "read" }   # also agent, operator, quota: deny|read|write
//	plugin   { policy = "list" }   # deny|read|list
//
// Every refusal names its position, the policy's name standing for the
// file name: unknown blocks and arguments, unknown policies and
// capabilities, bad rule names, a second node (agent, …) block. Rules are
// bounded by structs.MaxACLPolicyRulesBytes and core/hclguard before they
// are parsed. Empty rules parse to a policy that grants nothing.
func ParsePolicy(name, rules string) (*Policy, error) {
	if len(rules) > structs.MaxACLPolicyRulesBytes {
		return nil, &structs.LimitError{
			Where: name,
			Limit: fmt.Sprintf("MaxACLPolicyRulesBytes (%d bytes)", structs.MaxACLPolicyRulesBytes),
			Msg:   fmt.Sprintf("policy rules are %d bytes", len(rules)),
			Kind:  structs.ErrInvalid,
		}
	}
	src := []byte(rules)
	if diags := hclguard.Check(name, src); diags.HasErrors() {
		return nil, &ParseError{Diags: diags}
	}
	file, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, &ParseError{Diags: diags}
	}
	p := &policyParser{policy: &Policy{Name: name}, seen: map[string]*hcl.Range{}}
	p.root(file.Body)
	if p.diags.HasErrors() {
		sortDiags(p.diags)
		return nil, &ParseError{Diags: p.diags}
	}
	return p.policy, nil
}

type policyParser struct {
	policy *Policy
	diags  hcl.Diagnostics
	// seen holds where each unlabelled block was first defined.
	seen map[string]*hcl.Range
}

func (p *policyParser) errorf(rng hcl.Range, summary, format string, args ...any) {
	p.diags = append(p.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: rng.Ptr(),
	})
}

func (p *policyParser) root(body hcl.Body) {
	content, diags := body.Content(policyRootSchema)
	p.diags = append(p.diags, diags...)
	if content == nil {
		return
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "namespace":
			if r := p.namespace(b); r != nil {
				p.policy.Namespaces = append(p.policy.Namespaces, r)
			}
		case "host_volume":
			if r := p.hostVolume(b); r != nil {
				p.policy.HostVolumes = append(p.policy.HostVolumes, r)
			}
		case "node":
			p.simple(b, &p.policy.Node, PolicyDeny, PolicyRead, PolicyWrite)
		case "agent":
			p.simple(b, &p.policy.Agent, PolicyDeny, PolicyRead, PolicyWrite)
		case "operator":
			p.simple(b, &p.policy.Operator, PolicyDeny, PolicyRead, PolicyWrite)
		case "quota":
			p.simple(b, &p.policy.Quota, PolicyDeny, PolicyRead, PolicyWrite)
		case "plugin":
			p.simple(b, &p.policy.Plugin, PolicyDeny, PolicyRead, PolicyList)
		}
	}
}

func (p *policyParser) namespace(b *hcl.Block) *NamespaceRule {
	name, ok := p.label(b, namespaceRuleRE(), "letters, digits, dashes and * wildcards")
	content, diags := b.Body.Content(namespaceSchema)
	p.diags = append(p.diags, diags...)
	if content == nil {
		return nil
	}
	var vars []*VariablesPathRule
	for i, vb := range content.Blocks {
		if i > 0 {
			first := content.Blocks[0].DefRange
			p.errorf(vb.DefRange, "Duplicate variables block",
				"A namespace rule may hold one variables block; the first is at %s:%d:%d.", first.Filename, first.Start.Line, first.Start.Column)
			continue
		}
		vars = p.variables(vb)
	}
	policy, caps := p.ruleBody(content, "namespace", namespaceCapabilities, ExpandNamespacePolicy,
		PolicyDeny, PolicyRead, PolicyWrite, PolicyScaling)
	if !ok {
		return nil
	}
	return &NamespaceRule{Name: name, Policy: policy, Capabilities: caps, Variables: vars}
}

func (p *policyParser) hostVolume(b *hcl.Block) *HostVolumeRule {
	name, ok := p.label(b, hostVolumeRuleRE(), "letters, digits, dashes, underscores and * wildcards")
	content, diags := b.Body.Content(hostVolumeSchema)
	p.diags = append(p.diags, diags...)
	if content == nil {
		return nil
	}
	policy, caps := p.ruleBody(content, "host_volume", hostVolumeCapabilities, ExpandHostVolumePolicy,
		PolicyDeny, PolicyRead, PolicyWrite)
	if !ok {
		return nil
	}
	return &HostVolumeRule{Name: name, Policy: policy, Capabilities: caps}
}

// label checks a rule's name against re.
func (p *policyParser) label(b *hcl.Block, re *regexp.Regexp, allowed string) (string, bool) {
	name := b.Labels[0]
	if re.MatchString(name) {
		return name, true
	}
	p.errorf(b.LabelRanges[0], fmt.Sprintf("Invalid %s name", b.Type),
		"A %s rule's name must be 1 to 128 %s (got %s).", b.Type, allowed, quote(name))
	return "", false
}

// ruleBody reads a labelled rule's policy and capabilities: the policy
// must be one of policies, each capability one of valid. The result is
// the capabilities written plus the policy's expansion, sorted and
// without duplicates.
func (p *policyParser) ruleBody(content *hcl.BodyContent, kind string, valid []string,
	expand func(string) []string, policies ...string) (string, []string) {
	var policy string
	var caps []string
	if attr, ok := content.Attributes["policy"]; ok {
		if s, ok := p.stringValue(attr.Expr); ok {
			if slices.Contains(policies, s) {
				policy = s
				caps = expand(s)
			} else {
				p.errorf(attr.Expr.Range(), fmt.Sprintf("Invalid %s policy", kind),
					"The policy must be one of %s (got %s).", quoteList(policies), quote(s))
			}
		}
	}
	if attr, ok := content.Attributes["capabilities"]; ok {
		elems, diags := hcl.ExprList(attr.Expr)
		p.diags = append(p.diags, diags...)
		for _, e := range elems {
			s, ok := p.stringValue(e)
			if !ok {
				continue
			}
			if !slices.Contains(valid, s) {
				p.errorf(e.Range(), fmt.Sprintf("Unknown %s capability", kind),
					"%s is not a %s capability; the capabilities are %s.", quote(s), kind, strings.Join(valid, ", "))
				continue
			}
			caps = append(caps, s)
		}
	}
	slices.Sort(caps)
	return policy, slices.Compact(caps)
}

// simple reads an unlabelled rule (node, agent, …): one policy, one of
// allowed, and at most one such block per policy.
func (p *policyParser) simple(b *hcl.Block, dst *string, allowed ...string) {
	if first, ok := p.seen[b.Type]; ok {
		p.errorf(b.DefRange, fmt.Sprintf("Duplicate %s block", b.Type),
			"A policy may hold one %s block; the first is at %s:%d:%d.", b.Type, first.Filename, first.Start.Line, first.Start.Column)
		return
	}
	p.seen[b.Type] = b.DefRange.Ptr()
	content, diags := b.Body.Content(simpleRuleSchema)
	p.diags = append(p.diags, diags...)
	if content == nil {
		return
	}
	attr, ok := content.Attributes["policy"]
	if !ok {
		return // reported by Content as a missing required argument
	}
	s, ok := p.stringValue(attr.Expr)
	if !ok {
		return
	}
	if !slices.Contains(allowed, s) {
		p.errorf(attr.Expr.Range(), fmt.Sprintf("Invalid %s policy", b.Type),
			"The policy must be one of %s (got %s).", quoteList(allowed), quote(s))
		return
	}
	*dst = s
}

// stringValue evaluates a constant string expression: no variables or
// functions exist in a policy.
func (p *policyParser) stringValue(e hcl.Expression) (string, bool) {
	v, diags := e.Value(nil)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() {
		return "", false
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		p.errorf(e.Range(), "Incorrect value type", "A string is required here (got %s).", v.Type().FriendlyName())
		return "", false
	}
	return v.AsString(), true
}

func quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q…", s[:64])
	}
	return fmt.Sprintf("%q", s)
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// sortDiags orders diagnostics by position: HCL reports the unknown
// names of a body in map order, and a user reads a file top to bottom.
func sortDiags(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a != nil && b == nil
		}
		return a.Start.Byte < b.Start.Byte
	})
}

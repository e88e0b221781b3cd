// Package feasible decides whether a node can run a task group: a chain of
// small checkers (job constraints, drivers, group and task constraints), each
// rejecting a node with a named reason that users see in placement
// diagnostics, plus the resource fit that bin-packing uses.
//
// Everything here is pure and per-request: compile the checkers once per
// ScheduleRequest (NewGroupChain) and run them against every node. The
// compiled values cache regular expressions and version constraints so a
// 10,000-node request parses each pattern once.
package feasible

import (
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// targetKind says where a constraint operand takes its value from.
type targetKind uint8

const (
	targetLiteral targetKind = iota
	targetNodeID
	targetNodeName
	targetNodeDatacenter
	targetNodeClass
	targetNodePool
	targetAttr
	targetMeta
	// targetUnknown is an interpolation this scheduler does not know; it
	// never resolves, the way an unset attribute does not.
	targetUnknown
)

// Target is a parsed constraint operand: either a literal or one of the
// ${...} interpolations of a node's identity, attributes or metadata.
type Target struct {
	kind targetKind
	// value is the literal text, or the attribute/meta key.
	value string
}

// ParseTarget parses a constraint operand. Only a whole-operand
// interpolation is recognised ("${attr.kernel.name}"); text without "${" is a
// literal, as in Nomad.
func ParseTarget(s string) Target {
	if !strings.HasPrefix(s, "${") || !strings.HasSuffix(s, "}") {
		return Target{kind: targetLiteral, value: s}
	}
	inner := s[2 : len(s)-1]
	switch inner {
	case "node.unique.id":
		return Target{kind: targetNodeID}
	case "node.unique.name":
		return Target{kind: targetNodeName}
	case "node.datacenter":
		return Target{kind: targetNodeDatacenter}
	case "node.class":
		return Target{kind: targetNodeClass}
	case "node.pool":
		return Target{kind: targetNodePool}
	}
	if k, ok := strings.CutPrefix(inner, "attr."); ok {
		return Target{kind: targetAttr, value: k}
	}
	if k, ok := strings.CutPrefix(inner, "meta."); ok {
		return Target{kind: targetMeta, value: k}
	}
	return Target{kind: targetUnknown, value: inner}
}

// Literal reports whether the target resolves to the same value on every
// node, which lets a checker compile it once.
func (t Target) Literal() bool { return t.kind == targetLiteral }

// unique reports whether the target reads a value that differs per node,
// which makes a node's computed class useless as a cache key for it.
func (t Target) unique() bool {
	switch t.kind {
	case targetNodeID, targetNodeName:
		return true
	case targetAttr, targetMeta:
		return strings.HasPrefix(t.value, "unique.")
	}
	return false
}

// Resolve returns the operand's value on the node and whether it is set.
func (t Target) Resolve(n *schedulerpb.Node) (string, bool) {
	switch t.kind {
	case targetLiteral:
		return t.value, true
	case targetNodeID:
		return n.GetId(), true
	case targetNodeName:
		return n.GetName(), true
	case targetNodeDatacenter:
		return n.GetDatacenter(), true
	case targetNodeClass:
		return n.GetNodeClass(), true
	case targetNodePool:
		return n.GetNodePool(), true
	case targetAttr:
		v, ok := n.GetAttributes()[t.value]
		return v, ok
	case targetMeta:
		v, ok := n.GetMeta()[t.value]
		return v, ok
	}
	return "", false
}

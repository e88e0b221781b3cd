package jobspec

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Runtime interpolation.
//
// In Nomad's dialect "${attr.kernel.name}" or "${NOMAD_ALLOC_ID}" inside a
// string is not an HCL variable: the client resolves it after placement. To
// keep such references verbatim while still evaluating the rest of the
// expression with HCL's own rules (escapes, heredocs, type conversion), the
// parser builds, for each expression, an evaluation context in which every
// referenced root is an object whose leaves are the reference's own source
// text: attr = {kernel = {name = "${attr.kernel.name}"}}. Evaluating the
// template then reproduces the reference literally.
//
// That trick is only sound when the reference is interpolated as a whole
// into a string. "${attr.a == "x"}" would silently compare the placeholder,
// so a reference anywhere else (an operand, a function argument, a bare
// `attribute = attr.kernel.name`) is refused with its position.
//
// HCL's own roots (var, local, and a dynamic block's iterator) are real
// values of the evaluation context and are never kept as text; see
// variables.go.

// languageRoots are the roots the evaluation context defines.
var languageRoots = map[string]bool{"var": true, "local": true}

// unsupportedRoots are names that look like HCL roots but are not: kept
// verbatim they would hide the mistake.
var unsupportedRoots = map[string]string{"locals": "local", "vars": "var", "variable": "var"}

// value evaluates expr, preserving runtime references as text.
func (p *parser) value(expr hcl.Expression) (cty.Value, bool) {
	return p.evalWith(expr, nil)
}

// evalWith is value with extra variables (a local's dependencies) laid
// over the context.
func (p *parser) evalWith(expr hcl.Expression, extra map[string]cty.Value) (cty.Value, bool) {
	ctx, ok := p.runtimeContext(expr, extra)
	if !ok {
		return cty.NilVal, false
	}
	if !p.checkForValues(expr, ctx) {
		return cty.NilVal, false
	}
	v, diags := expr.Value(ctx)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() {
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		// Only a variable or local that failed (and was reported) is
		// unknown; say so when nothing was reported.
		if !p.diags.HasErrors() {
			p.errorf(expr.Range(), "Value not known", "This value depends on a variable or local value that could not be evaluated.")
		}
		return cty.NilVal, false
	}
	if v.IsMarked() {
		v, _ = v.UnmarkDeep()
	}
	return v, true
}

// refNode is one step of the tree of runtime references of an expression.
type refNode struct {
	text string // non-empty on a leaf: the literal "${…}" it evaluates to
	kids map[string]*refNode
	at   hcl.Range
}

func (p *parser) runtimeContext(expr hcl.Expression, extra map[string]cty.Value) (*hcl.EvalContext, bool) {
	ctx := p.ctx.NewChild()
	ctx.Variables = map[string]cty.Value{}
	// HCL suggests names for a misspelt function only from the context
	// it is given, not its parents.
	ctx.Functions = p.ctx.Functions
	for k, v := range extra {
		ctx.Variables[k] = v
	}
	vars := expr.Variables()
	if len(vars) == 0 {
		return ctx, true
	}

	// Start offsets of the references that stand alone in a template
	// interpolation ("${x.y}"), the only place where they may appear.
	whole := map[int]bool{}
	// A dynamic block wraps the expressions of the blocks it makes.
	if node, ok := hcl.UnwrapExpression(expr).(hclsyntax.Node); ok {
		hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
			switch t := n.(type) {
			case *hclsyntax.TemplateExpr:
				for _, part := range t.Parts {
					if st, ok := part.(*hclsyntax.ScopeTraversalExpr); ok {
						whole[st.SrcRange.Start.Byte] = true
					}
				}
			case *hclsyntax.TemplateWrapExpr:
				if st, ok := t.Wrapped.(*hclsyntax.ScopeTraversalExpr); ok {
					whole[st.SrcRange.Start.Byte] = true
				}
			}
			return nil
		})
	}

	// The type argument of convert() is a type expression (string,
	// list(number)), not a reference.
	typeArgs := map[int]bool{}
	if node, ok := hcl.UnwrapExpression(expr).(hclsyntax.Node); ok {
		hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
			if call, ok := n.(*hclsyntax.FunctionCallExpr); ok && call.Name == "convert" && len(call.Args) == 2 {
				hclsyntax.VisitAll(call.Args[1], func(n hclsyntax.Node) hcl.Diagnostics {
					if st, ok := n.(*hclsyntax.ScopeTraversalExpr); ok {
						typeArgs[st.SrcRange.Start.Byte] = true
					}
					return nil
				})
			}
			return nil
		})
	}

	roots := map[string]*refNode{}
	ok := true
	for _, trav := range vars {
		rng := trav.SourceRange()
		root := trav.RootName()
		text := string(rng.SliceBytes(p.src))
		switch {
		case isExtra(extra, root) || typeArgs[rng.Start.Byte]:
			continue
		case languageRoots[root]:
			if !p.declared(trav, text) {
				ok = false
			}
			continue
		case unsupportedRoots[root] != "":
			p.errorf(rng, "Unknown variable",
				"There is no variable named %q; did you mean %s.%s?", root, unsupportedRoots[root], strings.TrimPrefix(strings.TrimPrefix(text, root), "."))
			ok = false
		case !whole[rng.Start.Byte]:
			p.errorf(rng, "Invalid runtime reference",
				"%s is resolved on the client after placement and can only be used on its own inside a string, as in \"${%s}\".", text, text)
			ok = false
		default:
			if !p.addRef(roots, trav, "${"+text+"}") {
				ok = false
			}
		}
	}
	if !ok {
		return nil, false
	}
	for name, n := range roots {
		ctx.Variables[name] = n.value()
	}
	return ctx, true
}

// addRef records one reference in the tree, refusing steps that cannot be
// represented as object attributes and references that are both a value
// and a prefix of another ("${attr.a}" with "${attr.a.b}").
func (p *parser) addRef(roots map[string]*refNode, trav hcl.Traversal, text string) bool {
	level := roots
	var node *refNode
	for _, step := range trav {
		var name string
		switch s := step.(type) {
		case hcl.TraverseRoot:
			name = s.Name
		case hcl.TraverseAttr:
			name = s.Name
		case hcl.TraverseIndex:
			if s.Key.IsNull() || s.Key.Type() != cty.String {
				p.errorf(s.SrcRange, "Invalid runtime reference",
					"%s: only attribute names and quoted keys are supported in runtime references.", text)
				return false
			}
			name = s.Key.AsString()
		default:
			p.errorf(step.SourceRange(), "Invalid runtime reference", "%s: unsupported traversal step.", text)
			return false
		}
		if node != nil {
			if node.text != "" {
				return p.conflict(node, trav, text)
			}
			if node.kids == nil {
				node.kids = map[string]*refNode{}
			}
			level = node.kids
		}
		next := level[name]
		if next == nil {
			next = &refNode{at: trav.SourceRange()}
			level[name] = next
		}
		node = next
	}
	switch {
	case node.text == text:
		return true // the same reference twice
	case node.text != "" || len(node.kids) > 0:
		return p.conflict(node, trav, text)
	}
	node.text = text
	return true
}

// declared refuses a reference to a variable or local value the file does
// not define, in words that say how to define it.
func (p *parser) declared(trav hcl.Traversal, text string) bool {
	root := trav.RootName()
	if len(trav) < 2 {
		p.errorf(trav.SourceRange(), "Invalid reference", "%s must be followed by the name of a %s, as in %s.name.", root, map[string]string{"var": "variable", "local": "local value"}[root], root)
		return false
	}
	step, ok := trav[1].(hcl.TraverseAttr)
	if !ok {
		return true // HCL reports it
	}
	if root == "var" && p.vars[step.Name] == nil {
		p.errorf(trav.SourceRange(), "Reference to undeclared input variable",
			"%s: the file has no variable %q block; declare it at the top level of the file.", text, step.Name)
		return false
	}
	if root == "local" && p.localVals[step.Name] == nil {
		p.errorf(trav.SourceRange(), "Reference to undeclared local value",
			"%s: no locals block defines %q.", text, step.Name)
		return false
	}
	return true
}

func isExtra(extra map[string]cty.Value, root string) bool {
	_, ok := extra[root]
	return ok
}

func (p *parser) conflict(existing *refNode, trav hcl.Traversal, text string) bool {
	p.errorf(trav.SourceRange(), "Conflicting runtime references",
		"%s cannot be used in the same value as the reference at %s, because one is a prefix of the other; split the value.",
		text, posString(existing.at))
	return false
}

func (n *refNode) value() cty.Value {
	if n.text != "" {
		return cty.StringVal(n.text)
	}
	attrs := make(map[string]cty.Value, len(n.kids))
	for k, kid := range n.kids {
		attrs[k] = kid.value()
	}
	return cty.ObjectVal(attrs)
}

func posString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// errorf records an error diagnostic at rng.
func (p *parser) errorf(rng hcl.Range, summary, format string, args ...any) {
	r := rng
	p.diags = append(p.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   strings.TrimSpace(fmt.Sprintf(format, args...)),
		Subject:  &r,
	})
}

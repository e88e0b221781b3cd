package jobspec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/core/structs"
)

// The limits of core/structs apply to job files as to JSON bodies: a job
// that parses here must also be accepted by the HTTP API it is sent to,
// and nothing may nest deeper than the Raft log's decoder reads back.

// checkCollections refuses a list, object or body with more than
// structs.MaxCollectionElements entries, at its position, and a for
// expression inside another: results of nested for expressions multiply,
// so a short file could make the parser build billions of values.
func (p *parser) checkCollections(body *hclsyntax.Body) {
	_ = hclsyntax.Walk(body, &limitWalker{p: p})
}

type limitWalker struct {
	p        *parser
	forDepth int
}

func (w *limitWalker) Enter(n hclsyntax.Node) hcl.Diagnostics {
	count := 0
	switch e := n.(type) {
	case *hclsyntax.TupleConsExpr:
		count = len(e.Exprs)
	case *hclsyntax.ObjectConsExpr:
		count = len(e.Items)
	case *hclsyntax.Body:
		count = len(e.Attributes) + len(e.Blocks)
	case *hclsyntax.ForExpr:
		w.forDepth++
		if w.forDepth == 2 {
			w.p.errorf(e.SrcRange, "Nested for expression",
				"A for expression (or template for directive) inside another is not supported: their results multiply.")
		} else if est := forOutputEstimate(e); est > maxForOutputBytes {
			w.p.errorf(e.SrcRange, "For expression too large",
				"This for expression could build about %.0f bytes (its elements times its body, with each use of the loop variables a copy of an element); a job file's for expression may build at most %d.",
				est, maxForOutputBytes)
		}
	}
	if count > structs.MaxCollectionElements {
		w.p.errorf(n.Range(), "Too many elements",
			"This has %d entries; exceeds limit %s.", count, structs.ElementsLimit())
	}
	return nil
}

func (w *limitWalker) Exit(n hclsyntax.Node) hcl.Diagnostics {
	if _, ok := n.(*hclsyntax.ForExpr); ok {
		w.forDepth--
	}
	return nil
}

// checkConfigValue refuses a task config value that, with the levels of
// config blocks above it, nests deeper than the task config's share of
// structs.MaxNestingDepth (see structs.MaxTaskConfigDepth).
func (p *parser) checkConfigValue(rng hcl.Range, name string, v any) bool {
	if d := p.configDepth + structs.ValueDepth(v); d > structs.MaxTaskConfigDepth {
		p.errorf(rng, "Nesting too deep",
			"Config key %q nests %d levels below the task; exceeds limit %s (a task config may nest %d).",
			name, d, structs.DepthLimit(), structs.MaxTaskConfigDepth)
		return false
	}
	if n := structs.MaxElements(v); n > structs.MaxCollectionElements {
		p.errorf(rng, "Too many elements",
			"Config key %q holds a collection of %d entries; exceeds limit %s.", name, n, structs.ElementsLimit())
		return false
	}
	return true
}

// maxForOutputBytes bounds what one for expression may build. Its result
// is its body once per element, and each use of a loop variable copies an
// element: a file of a few MB (a thousand elements of 4 KB, a body of a
// million `${v}`) would otherwise build terabytes and exhaust the memory
// of the agent serving /v1/jobs/parse. Real loops build a few kilobytes.
const maxForOutputBytes = 16 << 20

// forOutputEstimate is an upper bound, in bytes, of what e builds, from
// its source alone: elements × (body length + uses of the loop variables
// × the longest element). For a literal collection these are its entries
// and the longest entry's source; for any other, at most one element per
// byte of its source, each as long as all of it. Float, since the product
// of three lengths overflows int64.
func forOutputEstimate(e *hclsyntax.ForExpr) float64 {
	srcLen := func(r hcl.Range) float64 { return float64(r.End.Byte - r.Start.Byte) }
	// elemLen is the longest element's source; a literal value is never
	// longer once evaluated.
	elems, elemLen := srcLen(e.CollExpr.Range()), srcLen(e.CollExpr.Range())
	switch c := e.CollExpr.(type) {
	case *hclsyntax.TupleConsExpr:
		elems, elemLen = float64(len(c.Exprs)), 0
		for _, x := range c.Exprs {
			elemLen = max(elemLen, srcLen(x.Range()))
		}
	case *hclsyntax.ObjectConsExpr:
		elems, elemLen = float64(len(c.Items)), 0
		for _, it := range c.Items {
			elemLen = max(elemLen, srcLen(it.KeyExpr.Range()), srcLen(it.ValueExpr.Range()))
		}
	}
	var body float64
	uses := 0
	for _, x := range []hclsyntax.Expression{e.KeyExpr, e.ValExpr, e.CondExpr} {
		if x == nil {
			continue
		}
		r := x.Range()
		body += float64(r.End.Byte - r.Start.Byte)
		_ = hclsyntax.VisitAll(x, func(n hclsyntax.Node) hcl.Diagnostics {
			if st, ok := n.(*hclsyntax.ScopeTraversalExpr); ok {
				if root := st.Traversal.RootName(); root == e.ValVar || (e.KeyVar != "" && root == e.KeyVar) {
					uses++
				}
			}
			return nil
		})
	}
	return elems * (body + float64(uses)*elemLen)
}

// Bounds of the HCL2 language features (variables, locals, functions,
// dynamic blocks), which compute values the source does not spell out.
const (
	// maxValueBytes bounds one computed value: a variable's, a local's or
	// a function call's result (valueSize's estimate). A job file is at
	// most hclguard.MaxFileBytes; no value of it needs to be larger.
	maxValueBytes = 1 << 20
	// maxFunctionBytes bounds what all function calls of one parse build
	// together, so a file of many large calls cannot add up to gigabytes.
	maxFunctionBytes = 32 << 20
	// maxDynamicBlocks bounds the blocks all dynamic blocks of a file
	// make together: nested ones multiply.
	maxDynamicBlocks = structs.MaxCollectionElements
	// maxVarFiles and maxVarArgs bound the var files and -var arguments
	// of one parse; each is also bounded in size (hclguard.MaxFileBytes).
	maxVarFiles = 64
	maxVarArgs  = 1_000
)

// checkForEach bounds a dynamic block's for_each: its elements, and the
// blocks of every dynamic block of the file together.
func (p *parser) checkForEach(v cty.Value, expr hcl.Expression, _ *hcl.EvalContext) hcl.Diagnostics {
	if v.IsNull() || !v.IsKnown() || !v.CanIterateElements() {
		return nil // dynblock words these itself
	}
	n := v.LengthInt()
	p.dynBlocks += n
	if p.dynBlocks > maxDynamicBlocks {
		r := expr.Range()
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Too many dynamic blocks", Subject: &r,
			Detail: fmt.Sprintf("The dynamic blocks of this file make more than %d blocks together (this for_each has %d elements); exceeds limit %s.",
				maxDynamicBlocks, n, structs.ElementsLimit())}}
	}
	p.noteSize(v)
	return nil
}

// checkForValues is forOutputEstimate with the values of the context: a
// for expression over a variable, a local or a function call is as large
// as that value, which the source does not show. A collection that
// cannot be evaluated on its own (it refers to a dynamic block's
// iterator) is taken to have structs.MaxCollectionElements elements, each
// as large as the largest value an expression may refer to.
func (p *parser) checkForValues(expr hcl.Expression, ctx *hcl.EvalContext) bool {
	node, ok := hcl.UnwrapExpression(expr).(hclsyntax.Node)
	if !ok {
		return true
	}
	good := true
	_ = hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
		e, ok := n.(*hclsyntax.ForExpr)
		if !ok || !good {
			return nil
		}
		switch e.CollExpr.(type) {
		case *hclsyntax.TupleConsExpr, *hclsyntax.ObjectConsExpr:
			return nil // checkCollections bounded it from its source
		}
		// Not evaluable alone: a function of the iterator may make up to
		// the most elements a value may hold, each as large as the
		// largest value referred to.
		elems, elemLen := float64(max(p.maxRefElems, structs.MaxCollectionElements)), float64(p.maxRefBytes)
		if coll, diags := e.CollExpr.Value(ctx); !diags.HasErrors() && coll.IsWhollyKnown() && !coll.IsNull() && coll.CanIterateElements() {
			elems, elemLen = float64(coll.LengthInt()), 0
			for it := coll.ElementIterator(); it.Next(); {
				k, el := it.Element()
				kn, _ := valueSize(k, maxValueBytes)
				vn, _ := valueSize(el, maxValueBytes)
				elemLen = max(elemLen, float64(kn), float64(vn))
			}
		}
		var body float64
		for _, x := range []hclsyntax.Expression{e.KeyExpr, e.ValExpr, e.CondExpr} {
			if x == nil {
				continue
			}
			r := x.Range()
			body += float64(r.End.Byte - r.Start.Byte)
			_ = hclsyntax.VisitAll(x, func(n hclsyntax.Node) hcl.Diagnostics {
				st, ok := n.(*hclsyntax.ScopeTraversalExpr)
				if !ok {
					return nil
				}
				if root := st.Traversal.RootName(); root == e.ValVar || (e.KeyVar != "" && root == e.KeyVar) {
					body += elemLen
				} else if v, diags := st.Traversal.TraverseAbs(ctx); !diags.HasErrors() {
					sz, _ := valueSize(v, maxValueBytes)
					body += float64(sz)
				}
				return nil
			})
		}
		if est := elems * body; est > maxForOutputBytes {
			p.errorf(e.SrcRange, "For expression too large",
				"This for expression could build about %.0f bytes (%.0f elements times its body with the values it refers to); a job file's for expression may build at most %d.",
				est, elems, maxForOutputBytes)
			good = false
		}
		return nil
	})
	return good
}

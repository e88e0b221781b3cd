package jobspec

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

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

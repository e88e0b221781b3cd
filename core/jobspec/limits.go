package jobspec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/core/structs"
)

// The limits of core/structs apply to job files as to JSON bodies: a job
// that parses here must also be accepted by the HTTP API it is sent to,
// and nothing may nest deeper than the Raft log's decoder reads back.

// maxOperators bounds the operators of one job file. HCL's parser and
// evaluator recurse once per operator of a chain (`- - -1`, `!!!x`,
// `a ? b : c ? …`, `1+1+…`) however flat the brackets are, and a chain a
// body limit allows (millions) exhausts the goroutine stack: a fatal error
// no recover() catches, which would kill the agent serving /v1/jobs/parse.
// Real job files use a handful.
const maxOperators = 10_000

// maxFileBytes and maxTokens bound the work of parsing one job file. The
// lexer and parser hold a few hundred bytes per token and a few kilobytes
// per block: an 8 MB body of `task "tN" {}` lines took 1.2 GB through
// /v1/jobs/parse. Real job files, templates included, are far smaller.
const (
	maxFileBytes = 1 << 20
	maxTokens    = 100_000
)

// checkNesting refuses a file whose brackets, braces, parentheses,
// template interpolations or template directives (%{ if }, %{ for }) nest
// deeper than structs.MaxNestingDepth, or that holds more than
// maxOperators operators, before the recursive parser sees it. It works on
// tokens, so the error points at the token that went one too far.
func checkNesting(src []byte, filename string) hcl.Diagnostics {
	// Lexing errors are left to the parser, which words them better; the
	// depth is still checked, because the parser recurses all the same.
	if len(src) > maxFileBytes {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Job file too large",
			Detail:  fmt.Sprintf("The file is %d bytes; a job file may be at most %d.", len(src), maxFileBytes),
			Subject: &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos}}}
	}
	tokens, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	tooFar := func(tok hclsyntax.Token, summary, detail string) hcl.Diagnostics {
		rng := tok.Range
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: &rng}}
	}
	// directives counts the open %{ if } and %{ for } sections: their
	// %{ … } closes at once, but the parser recurses into their bodies.
	depth, directives, ops := 0, 0, 0
	for i, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
			if tok.Type == hclsyntax.TokenTemplateControl && i+1 < len(tokens) && tokens[i+1].Type == hclsyntax.TokenIdent {
				switch string(tokens[i+1].Bytes) {
				case "if", "for":
					directives++
				case "endif", "endfor":
					directives = max(directives-1, 0)
				}
			}
			if depth+directives > structs.MaxNestingDepth {
				return tooFar(tok, "Nesting too deep",
					fmt.Sprintf("Blocks, lists, objects and expressions nest more than %d levels here; exceeds limit %s.", structs.MaxNestingDepth, structs.DepthLimit()))
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenTemplateSeqEnd:
			if depth > 0 {
				depth--
			}
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash, hclsyntax.TokenPercent,
			hclsyntax.TokenBang, hclsyntax.TokenAnd, hclsyntax.TokenOr, hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual,
			hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq,
			hclsyntax.TokenQuestion:
			ops++
			if ops > maxOperators {
				return tooFar(tok, "Too many operators",
					fmt.Sprintf("The file has more than %d operators; a job file may have at most %d.", maxOperators, maxOperators))
			}
		}
	}
	// Checked last: the nesting and operator errors above say more.
	if len(tokens) > maxTokens {
		return tooFar(tokens[maxTokens], "Too many tokens",
			fmt.Sprintf("The file has %d tokens; a job file may have at most %d.", len(tokens), maxTokens))
	}
	return nil
}

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

// Package hclguard bounds HCL source before it is parsed. HCL's parser and
// evaluator recurse once per level of nesting and once per operator of a
// chain (`!!!…`, `a ? b : c ? …`, `1+1+…`); deep enough input exhausts the
// goroutine stack, which kills the process instead of returning an error.
// Checking the token stream first is cheap and turns such input into an
// ordinary diagnostic that points at the token that went too far. Job files
// and agent config files share these bounds, which are those of every other
// decoder (structs.MaxNestingDepth).
package hclguard

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/core/structs"
)

const (
	// MaxOperators bounds the operators of one file. A real job or agent
	// config has a handful; ten thousand keeps any chain far from the
	// stack's end while leaving generated files room.
	MaxOperators = 10_000

	// MaxFileBytes and MaxTokens bound the work of parsing one file. The
	// lexer and parser hold a few hundred bytes per token and a few
	// kilobytes per block: an 8 MB body of `task "tN" {}` lines took
	// 1.2 GB through /v1/jobs/parse. Real files, templates included, are
	// far smaller.
	MaxFileBytes = 1 << 20
	MaxTokens    = 100_000
)

// Check returns an error diagnostic when src is over MaxFileBytes or
// MaxTokens, nests blocks, brackets, parentheses, strings or template
// sequences deeper than structs.MaxNestingDepth, or holds more than
// MaxOperators operators.
// Lexical errors are left to the parser, which words them better; the
// bounds are still checked, because the parser recurses all the same.
func Check(filename string, src []byte) hcl.Diagnostics {
	if len(src) > MaxFileBytes {
		return diag(hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos}, "File too large",
			fmt.Sprintf("The file is %d bytes; a file may be at most %d (limit MaxFileBytes).", len(src), MaxFileBytes))
	}
	tokens, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	// directives counts the open %{ if } and %{ for } sections: their
	// %{ … } closes at once, but the parser recurses into their bodies.
	depth, directives, ops := 0, 0, 0
	for i, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc,
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
				return diag(tok.Range, "Nesting too deep", fmt.Sprintf(
					"Blocks, lists, objects, strings and expressions nest more than %d levels here; exceeds limit %s.",
					structs.MaxNestingDepth, structs.DepthLimit()))
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen,
			hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			depth = max(depth-1, 0)
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash,
			hclsyntax.TokenPercent, hclsyntax.TokenBang, hclsyntax.TokenAnd, hclsyntax.TokenOr,
			hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan,
			hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq,
			hclsyntax.TokenQuestion:
			ops++
			if ops > MaxOperators {
				return diag(tok.Range, "Too many operators", fmt.Sprintf(
					"The file has more than %d operators; a file may have at most %d (limit MaxOperators).", MaxOperators, MaxOperators))
			}
		}
	}
	// Checked last: the nesting and operator errors above say more.
	if len(tokens) > MaxTokens {
		return diag(tokens[MaxTokens].Range, "Too many tokens",
			fmt.Sprintf("The file has %d tokens; a file may have at most %d (limit MaxTokens).", len(tokens), MaxTokens))
	}
	return nil
}

func diag(rng hcl.Range, summary, detail string) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: &rng}}
}

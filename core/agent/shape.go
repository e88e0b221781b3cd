package agent

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// HCL's parser and evaluator recurse once per level of nesting and per
// operator of a chain (`!!!…`, `a ? b : c ? …`, `1+1+…`); a deep enough
// input exhausts the goroutine stack, which kills the process instead of
// returning an error. The fuzzer's seeds and any real config stay far
// below these bounds, so checking the token stream first costs nothing
// and turns such input into an ordinary error.
const (
	maxConfigNesting   = 100
	maxConfigOperators = 10000
	// maxConfigBytes bounds one file; real agent configs are a few KiB.
	maxConfigBytes = 1 << 20
)

// checkShape refuses a file over maxConfigBytes and source nested deeper than maxConfigNesting or with
// more than maxConfigOperators operators. Lexical errors are left to the
// parser, which reports them better.
func checkShape(filename string, src []byte) error {
	if len(src) > maxConfigBytes {
		return fmt.Errorf("%s: the file is %d bytes; an agent config file may be at most %d", filename, len(src), maxConfigBytes)
	}
	toks, _ := hclsyntax.LexConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	depth, ops := 0, 0
	for _, tok := range toks {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
			hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
			if depth > maxConfigNesting {
				return fmt.Errorf("%s: nested more than %d levels deep", rangeString(tok.Range), maxConfigNesting)
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			depth = max(depth-1, 0)
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash, hclsyntax.TokenPercent,
			hclsyntax.TokenBang, hclsyntax.TokenAnd, hclsyntax.TokenOr, hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual,
			hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq,
			hclsyntax.TokenQuestion:
			ops++
			if ops > maxConfigOperators {
				return fmt.Errorf("%s: more than %d operators in one config file", rangeString(tok.Range), maxConfigOperators)
			}
		}
	}
	return nil
}

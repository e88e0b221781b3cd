package hclguard

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestCheck(t *testing.T) {
	deep := func(open, close string, n int) string {
		return "x = " + strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + "\n"
	}
	for _, tc := range []struct {
		name, src string
		// want is a substring of the error with its position; "" passes.
		want string
	}{
		{"plain job", "job \"a\" {\n  group \"g\" {\n    count = 1 + 2\n  }\n}\n", ""},
		{"brackets at the limit", deep("[", "]", structs.MaxNestingDepth), ""},
		{"brackets past the limit", deep("[", "]", structs.MaxNestingDepth+1), "f.hcl:1:69: Nesting too deep"},
		{"100k brackets", deep("[", "]", 100_000), "Nesting too deep"},
		{"parentheses", deep("(", ")", 1_000), "Nesting too deep"},
		{"templates", "x = " + strings.Repeat(`"${`, 1_000) + "1" + strings.Repeat(`}"`, 1_000), "Nesting too deep"},
		{"blocks", strings.Repeat("a {\n", 100) + strings.Repeat("}\n", 100), "f.hcl:65:3: Nesting too deep"},
		{"negations", "x = " + strings.Repeat("!", 100_000) + "true\n", "Too many operators"},
		{"sums", "x = " + strings.Repeat("1+", 100_000) + "1\n", "Too many operators"},
		{"conditionals", "x = " + strings.Repeat("true ? 1 : ", 20_000) + "2\n", "Too many operators"},
		{"nested directives", "x = \"" + strings.Repeat("%{if true}", 70) + "x" + strings.Repeat("%{endif}", 70) + "\"\n", "Nesting too deep"},
		{"sequential directives", "x = \"" + strings.Repeat("%{if true}x%{endif}", 200) + "\"\n", ""},
		{"file too large", "# " + strings.Repeat("x", MaxFileBytes) + "\n", "f.hcl:1:1: File too large"},
		{"too many tokens", "x = [" + strings.Repeat("1,", MaxTokens/2) + "]\n", "Too many tokens"},
		{"tokens at a real size", "x = [" + strings.Repeat("1,", MaxTokens/4) + "]\n", ""},
		{"unclosed is the parser's", "x = [[[", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diags := Check("f.hcl", []byte(tc.src))
			if tc.want == "" {
				if diags.HasErrors() {
					t.Fatalf("refused: %v", diags)
				}
				return
			}
			if !diags.HasErrors() {
				t.Fatal("accepted")
			}
			d := diags[0]
			got := fmt.Sprintf("%s:%d:%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, d.Summary)
			if !strings.Contains(got, tc.want) {
				t.Errorf("error %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

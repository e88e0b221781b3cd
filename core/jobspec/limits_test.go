package jobspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
)

// configArgs is a job whose task config is `args = <depth levels of [ ]>`,
// on line 6 column 16.
func configArgs(depth int) string {
	return wrapTask("      driver = \"raw_exec\"\n      config {\n        args = " +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n      }\n")
}

func nestedBlocks(depth int) string {
	return wrapTask("      driver = \"raw_exec\"\n      config {\n" +
		strings.Repeat("a {\n", depth) + strings.Repeat("}\n", depth) + "      }\n")
}

// TestParseLimits: job files past the shared input limits are refused with
// file:line:col and the limit's name; the deepest accepted config is also
// accepted by Job.Validate (and so by the HTTP API and the Raft log).
func TestParseLimits(t *testing.T) {
	tests := []struct {
		name string
		src  string
		// want: the start of the error ("job.hcl:line:col: Summary") and a
		// fragment of it; empty for a file that parses.
		want, detail string
	}{
		{"nesting as in the report", configArgs(1100), "job.hcl:6:", "MaxNestingDepth (64 levels)"},
		{"token nesting one past the limit", configArgs(structs.MaxNestingDepth - 3), "job.hcl:6:", "MaxNestingDepth"},
		{"config nesting one past its share", configArgs(structs.MaxTaskConfigDepth), "job.hcl:6:16: Nesting too deep", "a task config may nest 58"},
		{"deepest accepted config", configArgs(structs.MaxTaskConfigDepth - 1), "", ""},
		{"config blocks past its share", nestedBlocks(structs.MaxTaskConfigDepth), "job.hcl:", "Nesting too deep"},
		{"deep nesting with a lexing error", "job \"j\" {\n  x = " + strings.Repeat("[", 100000) + "\x01\n}\n", "job.hcl:2:", "MaxNestingDepth"},
		{"deep parentheses", wrapTask("      driver = \"raw_exec\"\n      kill_signal = " + strings.Repeat("(", 100) + "\"x\"" + strings.Repeat(")", 100) + "\n"),
			"job.hcl:5:82: Nesting too deep", "MaxNestingDepth"},
		{"deep interpolation", wrapTask("      driver = \"raw_exec\"\n      kill_signal = " + strings.Repeat(`"${`, 70) + "1" + strings.Repeat(`}"`, 70) + "\n"),
			"job.hcl:5:", "MaxNestingDepth"},
		{"too many list elements", wrapTask("      driver = \"raw_exec\"\n      config {\n        args = [" +
			strings.Repeat("1,", structs.MaxCollectionElements+1) + "]\n      }\n"), "job.hcl:6:16: Too many elements", "MaxCollectionElements (10000)"},
		{"nested for expressions", wrapTask("      driver = \"raw_exec\"\n      config {\n        args = [for a in [1, 2]: [for b in [3, 4]: a * b]]\n      }\n"),
			"job.hcl:6:34: Nested for expression", "not supported"},
		{"nested template for", wrapTask("      driver = \"raw_exec\"\n      kill_signal = \"%{for a in [1]}%{for b in [2]}x%{endfor}%{endfor}\"\n"),
			"job.hcl:5:", "Nested for expression"},
		{"operator chain that would overflow the parser's stack", wrapTask("      driver = \"raw_exec\"\n      leader = " + strings.Repeat("!", 200000) + "true\n"),
			"job.hcl:5:", "Too many operators"},
		// Operator chains recurse in the parser and evaluator with no
		// bracket at all; a few million of them (well inside the body
		// limit) overflowed the stack, a fatal error that killed an agent
		// serving /v1/jobs/parse. Past hclguard.MaxOperators is refused.
		{"unary operator chain", wrapTask("      driver = \"raw_exec\"\n      kill_signal = " + strings.Repeat("-", 2*hclguard.MaxOperators) + "1\n"),
			"job.hcl:5:", "Too many operators"},
		{"conditional chain", wrapTask("      driver = \"raw_exec\"\n      kill_signal = " + strings.Repeat("true ? 1 : ", hclguard.MaxOperators+1) + "1\n"),
			"job.hcl:5:", "at most 10000"},
		{"operators at the limit", wrapTask("      driver = \"raw_exec\"\n      config {\n        args = [1" + strings.Repeat("+1", hclguard.MaxOperators) + "]\n      }\n"), "", ""},
		{"nested template directives", wrapTask("      driver = \"raw_exec\"\n      kill_signal = \"" + strings.Repeat("%{if true}", 70) + "x" + strings.Repeat("%{endif}", 70) + "\"\n"),
			"job.hcl:5:", "MaxNestingDepth"},
		{"sequential template directives", wrapTask("      driver = \"raw_exec\"\n      kill_signal = \"" + strings.Repeat("%{if true}x%{endif}", 200) + "\"\n"), "", ""},
		// A for expression's result is its body per element, each use of
		// the loop variable a copy: 100 KB of source building 20 MB here,
		// and terabytes within the body limit, exhausting the memory of
		// the agent serving /v1/jobs/parse.
		{"for expression building too much", wrapTask("      driver = \"raw_exec\"\n      config {\n        args = [\"%{for a in [" +
			strings.Repeat(`"`+strings.Repeat("x", 1000)+`",`, 100) + "]}" + strings.Repeat("${a}", 200) + "%{endfor}\"]\n      }\n"),
			"job.hcl:6:", "For expression too large"},
		{"for expression of a real size", wrapTask("      driver = \"raw_exec\"\n      config {\n        args = [for a in [" +
			strings.Repeat(`"abcdefgh",`, 100) + "]: \"${a}-${a}-${a}-${a}-${a}\"]\n      }\n"), "", ""},
		// Parsing costs a few hundred bytes per token and kilobytes per
		// block: 8 MB of `task "tN" {}` took 1.2 GB through /v1/jobs/parse.
		{"file too large", wrapTask("      driver = \"raw_exec\"\n# " + strings.Repeat("x", hclguard.MaxFileBytes) + "\n"),
			"job.hcl:1:1: File too large", "at most 1048576"},
		{"too many tokens", wrapTask("      driver = \"raw_exec\"\n      config {\n" +
			strings.Repeat("        a = ["+strings.Repeat("1,", 5000)+"]\n", 11) + "      }\n"), "job.hcl:", "Too many tokens"},
		{"one for expression", wrapTask("      driver = \"raw_exec\"\n      config {\n        args = [for a in [1, 2]: a * 2]\n      }\n"), "", ""},
		{"list elements at the limit", wrapTask("      driver = \"raw_exec\"\n      config {\n        args = [" +
			strings.Repeat("1,", structs.MaxCollectionElements) + "]\n      }\n"), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job, err := Parse("job.hcl", []byte(tc.src))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if verr := job.Validate(); verr != nil {
					t.Fatalf("parsed job does not validate: %v", verr)
				}
				return
			}
			if err == nil {
				t.Fatal("Parse accepted the file")
			}
			if !errors.Is(err, structs.ErrInvalid) {
				t.Errorf("error kind: %v", err)
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if !strings.HasPrefix(first, tc.want) || !strings.Contains(first, tc.detail) {
				t.Errorf("error %q, want it to start with %q and contain %q", first, tc.want, tc.detail)
			}
		})
	}
}

// TestValidateConfigDepth: Job.Validate holds a config arriving by other
// paths (RPC, the Go API) to the same depth as the parser.
func TestValidateConfigDepth(t *testing.T) {
	job, err := Parse("job.hcl", []byte(configArgs(2)))
	if err != nil {
		t.Fatal(err)
	}
	var deep any = "x"
	for i := 0; i < structs.MaxTaskConfigDepth; i++ {
		deep = []any{deep}
	}
	job.TaskGroups[0].Tasks[0].Config = map[string]any{"args": deep}
	if err := job.Validate(); err == nil || !strings.Contains(err.Error(), "MaxNestingDepth") {
		t.Fatalf("Validate = %v, want the depth limit", err)
	}
}

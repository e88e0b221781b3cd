package jobspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/hclguard"
	"github.com/drover-org/drover/core/structs"
)

// TestHCL2Limits: variables, locals, functions and dynamic blocks compute
// values the source does not spell out; each way of making a short input
// build a huge value is refused with its position (or its source) and the
// limit's name.
func TestHCL2Limits(t *testing.T) {
	big := strings.Repeat("x", hclguard.MaxFileBytes+1)
	manyLocals := "variable \"k\" {}\nlocals {\n"
	for i := range 40 {
		manyLocals += fmt.Sprintf("  l%d = join(\"\", [for i in range(1000) : var.k])\n", i)
	}
	manyLocals += "}\n"
	tests := []struct {
		name string
		src  string
		opts Options
		want []string
	}{
		{name: "nested dynamic blocks multiply", src: `job "j" {
  dynamic "group" {
    for_each = range(200)
    labels   = ["g${group.key}"]
    content {
      dynamic "constraint" {
        for_each = range(100)
        content {
          attribute = "${meta.x}"
          value     = constraint.value
        }
      }
    }
  }
}
`, want: []string{"job.hcl:7:20: Too many dynamic blocks", "MaxCollectionElements (10000)"}},
		{name: "deeply nested function calls", src: region("", strings.Repeat("upper(", 100)+`"x"`+strings.Repeat(")", 100)),
			want: []string{"job.hcl:2:", "Nesting too deep", "MaxNestingDepth"}},
		{name: "huge -var value", src: region("variable \"r\" {}\n", "var.r"), opts: Options{Vars: []string{"r=" + big}},
			want: []string{`Variable value too large; -var "r" is 1048577 bytes`}},
		{name: "huge environment value", src: region("variable \"r\" {}\n", "var.r"), opts: Options{Env: []string{"NOMAD_VAR_r=" + big}},
			want: []string{"Variable value too large; the environment variable NOMAD_VAR_r is 1048577 bytes"}},
		{name: "huge var file", src: region("variable \"r\" {}\n", "var.r"), opts: Options{VarFiles: []VarFile{{Name: "big.hcl", Src: []byte("r = \"" + big + "\"\n")}}},
			want: []string{"big.hcl:1:1: File too large", "limit MaxFileBytes"}},
		{name: "huge JSON var file", src: region("variable \"r\" {}\n", "var.r"), opts: Options{VarFiles: []VarFile{{Name: "big.json", Src: []byte(`{"r": "` + big + `"}`)}}},
			want: []string{"big.json:1:1: File too large"}},
		{name: "deep JSON var file", src: region("variable \"r\" {}\n", `"${length(var.r)}"`),
			opts: Options{VarFiles: []VarFile{{Name: "deep.json", Src: []byte(`{"r": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`)}}},
			want: []string{"deep.json:1:1: Nesting too deep", "MaxNestingDepth"}},
		{name: "var file with too many elements", src: region("variable \"r\" {}\n", `"${length(var.r)}"`),
			opts: Options{VarFiles: []VarFile{{Name: "v.hcl", Src: []byte("r = [" + strings.Repeat("1,", structs.MaxCollectionElements+1) + "]\n")}}},
			want: []string{"v.hcl:1:5: Too many elements"}},
		{name: "too many var files", src: region("variable \"r\" {}\n", "var.r"), opts: Options{Vars: []string{"r=x"}, VarFiles: make([]VarFile, maxVarFiles+1)},
			want: []string{"Too many var files; 65 var files were given; at most 64 are read."}},
		{name: "too many -var", src: region("variable \"r\" {}\n", "var.r"), opts: Options{Vars: make([]string, maxVarArgs+1)},
			want: []string{"Too many -var arguments"}},
		{name: "range", src: region("", `"${length(range(1e9))}"`), want: []string{`job.hcl:2:22: Error in function call`, "this range would be about 1000000000"}},
		{name: "setproduct", src: region("", `"${length(setproduct(range(1000), range(1000)))}"`), want: []string{"this product would be about 1000000"}},
		{name: "format width", src: region("", `format("%999999999d", 1)`), want: []string{"format verb width or precision 999999999 exceeds the limit of 10000"}},
		{name: "replace of the empty string", src: region("variable \"s\" {}\n", `replace(var.s, "", var.s)`), opts: Options{Vars: []string{"s=" + strings.Repeat("s", 20_000)}},
			want: []string{"job.hcl:3:12: Error in function call", "this replace would be about 400"}},
		{name: "join with a huge separator", src: region("variable \"s\" {}\n", `join(var.s, split("", substr(var.s, 0, 5000)))`), opts: Options{Vars: []string{"s=" + strings.Repeat("s", 20_000)}},
			want: []string{"this join would be about 100"}},
		{name: "indent", src: region("variable \"s\" {}\n", "indent(1000, var.s)"), opts: Options{Vars: []string{"s=" + strings.Repeat("\n", 5000)}},
			want: []string{"this indent would be about 500"}},
		{name: "YAML aliases", src: region("", `yamlencode(yamldecode("a: &a [1, 2]\nb: [*a, *a]"))`), want: []string{"YAML aliases (*name) are not supported"}},
		{name: "a function result over maxValueBytes", src: region("variable \"s\" {}\n", `"${length(split("", var.s))}"`), opts: Options{Vars: []string{"s=" + strings.Repeat("s", 100_000)}},
			want: []string{"the result of split() is larger than 1048576 bytes"}},
		{name: "all function results over maxFunctionBytes", src: region(manyLocals, `"${length(local.l1)}"`), opts: Options{Vars: []string{"k=" + strings.Repeat("k", 1000)}},
			want: []string{"more than 33554432 bytes in all (limit maxFunctionBytes)"}},
		{name: "for over a variable with a large body", src: region("variable \"l\" {}\nvariable \"b\" {}\n", `"${length([for s in var.l : "${s}${var.b}"])}"`),
			opts: Options{Vars: []string{"b=" + strings.Repeat("b", 100_000)}, VarFiles: []VarFile{{Name: "l.hcl", Src: []byte("l = [" + strings.Repeat("\"a\",", 5000) + "]\n")}}},
			want: []string{"job.hcl:4:22: For expression too large", "5000 elements"}},
		{name: "for over a dynamic block's iterator", src: `variable "v" {}
job "j" {
  dynamic "constraint" {
    for_each = [var.v]
    content {
      value = join("", [for s in split("", constraint.value) : "${s}${var.v}"])
    }
  }
}
`, opts: Options{Vars: []string{"v=" + strings.Repeat("v", 30_000)}}, want: []string{"job.hcl:6:24: For expression too large"}},
		{name: "a local over maxValueBytes", src: region("variable \"v\" {}\nlocals {\n  l = [var.v, var.v]\n}\n", `"${length(local.l)}"`),
			opts: Options{Vars: []string{"v=" + strings.Repeat("v", 600_000)}}, want: []string{"job.hcl:3:7: Local value too large", "limit maxValueBytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job, err := ParseWith("job.hcl", []byte(tc.src), tc.opts)
			if err == nil {
				t.Fatalf("parsed: %+v", job)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%s", w, truncate(err.Error(), 2000))
				}
			}
		})
	}
}

// TestHCL2WithinLimits: real uses of the same features, near their limits,
// are accepted.
func TestHCL2WithinLimits(t *testing.T) {
	src := `variable "servers" {}
variable "suffix" {
  default = ".example.com"
}
locals {
  hosts = [for s in var.servers : "${s}${var.suffix}"]
}
job "j" {
  meta = { hosts = join(",", local.hosts), n = length(local.hosts) }
  dynamic "constraint" {
    for_each = range(100)
    content {
      attribute = "${meta.rack}"
      operator  = "!="
      value     = "r${constraint.value}"
    }
  }
}
`
	servers := "servers = [" + strings.Repeat("\"srv\",", 5000) + "]\n"
	job := parseVars(t, src, Options{VarFiles: []VarFile{{Name: "s.hcl", Src: []byte(servers)}}})
	if job.Meta["n"] != "5000" || len(job.Constraints) != 100 || !strings.HasPrefix(job.Meta["hosts"], "srv.example.com,srv") {
		t.Fatalf("meta n = %s, constraints = %d", job.Meta["n"], len(job.Constraints))
	}
}

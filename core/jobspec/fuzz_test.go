package jobspec

import (
	"errors"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// FuzzParse: any byte string either parses into a job or fails with a
// positioned *Error of kind invalid; it never panics. A parsed job can be
// validated without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte("job \"j\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n"))
	f.Add([]byte("job \"j\" {\n  group \"g\" {\n    network {\n      port \"http\" {}\n    }\n    service {\n      provider = \"nomad\"\n      port = \"http\"\n      check_restart {\n        limit = 1\n      }\n      check {\n        type = \"http\"\n        path = \"/\"\n        interval = \"10s\"\n        timeout = \"1s\"\n        header {\n          A = [\"b\"]\n        }\n      }\n    }\n    task \"t\" {\n      driver = \"raw_exec\"\n      service {\n        provider = \"nomad\"\n      }\n    }\n  }\n}\n"))
	f.Add([]byte("job \"j\" {\n  ui {\n    description = \"d\"\n    link {\n      url = \"u\"\n    }\n  }\n  reschedule {\n    attempts = 1\n  }\n  group \"g\" {\n    scaling {\n      min = 1\n      max = 2\n      policy {\n        check \"c\" {\n          strategy \"s\" {\n            t = 1\n          }\n        }\n      }\n    }\n    disconnect {\n      reconcile = \"best_score\"\n    }\n    task \"t\" {\n      driver = \"raw_exec\"\n      kind = \"k\"\n      action \"a\" {\n        command = \"c\"\n      }\n      resources {\n        secrets = 1\n        numa {\n          affinity = \"none\"\n        }\n      }\n    }\n  }\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		job, err := Parse("fuzz.hcl", src)
		if err != nil {
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("error without the invalid kind: %v", err)
			}
			return
		}
		if job == nil {
			t.Fatal("nil job without an error")
		}
		_ = job.Validate()
	})
}

// FuzzParseVars: with any var file, -var argument and environment value,
// a job file with variables either parses or fails with a positioned
// *Error of kind invalid; it never panics.
func FuzzParseVars(f *testing.F) {
	src := []byte(`variable "a" {
  type    = list(string)
  default = ["x"]
}
variable "b" {}
locals {
  c = join(",", [for s in var.a : upper(s)])
}
job "j" {
  meta = { c = local.c, b = var.b }
  dynamic "constraint" {
    for_each = var.a
    content {
      attribute = "${meta.k}"
      value     = constraint.value
    }
  }
}
`)
	f.Add(src, []byte(`a = ["p", "q"]`), "b=1", "NOMAD_VAR_b=2")
	f.Add(src, []byte(`{"a": ["p"], "b": "x"}`), `a=["z"]`, "NOMAD_VAR_a=[1]")
	f.Fuzz(func(t *testing.T, src, varFile []byte, arg, env string) {
		name := "v.hcl"
		if len(varFile) > 0 && varFile[0] == '{' {
			name = "v.json"
		}
		opts := Options{Vars: []string{arg}, VarFiles: []VarFile{{Name: name, Src: varFile}}, Env: []string{env}}
		job, err := ParseWith("fuzz.hcl", src, opts)
		if err != nil {
			if !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("error without the invalid kind: %v", err)
			}
			return
		}
		if job == nil {
			t.Fatal("nil job without an error")
		}
		_ = job.Validate()
	})
}

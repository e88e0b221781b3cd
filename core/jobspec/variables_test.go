package jobspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// parseVars parses src as job.hcl with opts, failing the test on an error.
func parseVars(t *testing.T, src string, opts Options) *structs.Job {
	t.Helper()
	job, err := ParseWith("job.hcl", []byte(src), opts)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return job
}

// region parses a job whose region is the expression expr, after decls.
func region(decls, expr string) string {
	return decls + "job \"j\" {\n  region = " + expr + "\n}\n"
}

// TestVariables: values of input variables reach the job from each source,
// the later winning, converted to the declared type.
func TestVariables(t *testing.T) {
	decl := `variable "r" {
  type    = string
  default = "from-default"
}
`
	tests := []struct {
		name string
		src  string
		opts Options
		want string
	}{
		{"default", region(decl, "var.r"), Options{}, "from-default"},
		{"environment", region(decl, "var.r"), Options{Env: []string{"NOMAD_VAR_r=from-env", "NOMAD_VAR_other=x", "PATH=/bin"}}, "from-env"},
		{"var file over environment", region(decl, "var.r"), Options{Env: []string{"NOMAD_VAR_r=env"}, VarFiles: []VarFile{{Name: "a.hcl", Src: []byte(`r = "from-file"`)}}}, "from-file"},
		{"later var file wins", region(decl, "var.r"), Options{VarFiles: []VarFile{{Name: "a.hcl", Src: []byte(`r = "a"`)}, {Name: "b.json", Src: []byte(`{"r": "b"}`)}}}, "b"},
		{"-var over var files", region(decl, "var.r"), Options{Vars: []string{"r=cli"}, VarFiles: []VarFile{{Name: "a.hcl", Src: []byte(`r = "a"`)}}}, "cli"},
		{"value with =", region(decl, "var.r"), Options{Vars: []string{"r=a=b"}}, "a=b"},
		{"interpolated", region(decl, `"eu-${var.r}"`), Options{Vars: []string{"r=1"}}, "eu-1"},
		{"untyped", region("variable \"r\" {}\n", "var.r"), Options{Vars: []string{"r=x"}}, "x"},
		{"number from text", region("variable \"n\" {\n  type = number\n}\n", `"n${var.n + 1}"`), Options{Vars: []string{"n=41"}}, "n42"},
		{"list from text is HCL", region("variable \"l\" {\n  type = list(string)\n}\n", `join("-", var.l)`), Options{Vars: []string{`l=["a", "b"]`}}, "a-b"},
		{"object with optional attribute", region("variable \"o\" {\n  type = object({ a = string, b = optional(string, \"dflt\") })\n}\n", `"${var.o.a}/${var.o.b}"`),
			Options{VarFiles: []VarFile{{Name: "o.hcl", Src: []byte(`o = { a = "x" }`)}}}, "x/dflt"},
		{"locals in any order and blocks", "locals {\n  b = \"${local.a}-b\"\n}\nlocals {\n  a = upper(var.r)\n}\n" + region(decl, "local.b"), Options{}, "FROM-DEFAULT-b"},
		{"heredoc", region(decl, "<<EOT\n${var.r}\nEOT"), Options{}, "from-default\n"},
		{"validation passes", region(`variable "r" {
  default = "eu"
  validation {
    condition     = strlen(var.r) == 2
    error_message = "two letters"
  }
}
`, "var.r"), Options{}, "eu"},
		{"try falls back", region("", `try(jsondecode("{"), "fallback")`), Options{}, "fallback"},
		{"can", region("", `can(convert("abc", number)) ? "yes" : "no"`), Options{}, "no"},
		{"runtime reference kept beside a variable", region(decl, `"${var.r}-${node.datacenter}"`), Options{}, "from-default-${node.datacenter}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseVars(t, tc.src, tc.opts).Region; got != tc.want {
				t.Fatalf("region = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFunctions: Nomad's function library, by its names.
func TestFunctions(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`upper("a")`, "A"}, {`lower("A")`, "a"}, {`title("a b")`, "A B"},
		{`format("%03d-%s", 7, "x")`, "007-x"}, {`join(",", formatlist("n%d", [1, 2]))`, "n1,n2"},
		{`replace("a.b.c", ".", "/")`, "a/b/c"}, {`regex_replace("a1b22", "[0-9]+", "#")`, "a#b#"},
		{`trimspace("  x ")`, "x"}, {`trimprefix("v1.2", "v")`, "1.2"}, {`trimsuffix("a.hcl", ".hcl")`, "a"},
		{`chomp("x\n")`, "x"}, {`strrev("abc")`, "cba"}, {`substr("hello", 1, 3)`, "ell"},
		{`indent(2, "a\nb")`, "a\n  b"}, {`split(",", "a,b")[1]`, "b"},
		{`format("%v", strlen("héllo"))`, "5"}, {`format("%v", length([1, 2, 3]))`, "3"},
		{`join(",", concat(["a"], ["b"]))`, "a,b"}, {`element(["a", "b"], 3)`, "b"},
		{`join(",", keys({b = 1, a = 2}))`, "a,b"}, {`lookup({a = "x"}, "b", "dflt")`, "dflt"},
		{`join(",", [for s in sort(["b", "a"]) : s])`, "a,b"}, {`join(",", distinct(["a", "a"]))`, "a"},
		{`join(",", flatten([["a"], ["b"]]))`, "a,b"}, {`format("%v", contains(["a"], "a"))`, "true"},
		{`join(",", [for i in range(3) : "${i}"])`, "0,1,2"}, {`format("%v", length(setproduct(["a", "b"], [1, 2])))`, "4"},
		{`coalesce(null, "x")`, "x"}, {`join(",", compact(["a", "", "b"]))`, "a,b"}, {`jsonencode(merge({a = 1}, {b = 2}))`, `{"a":1,"b":2}`},
		{`jsondecode("{\"a\": \"x\"}").a`, "x"}, {`yamldecode("a: [1, 2]").a[1]`, "2"}, {`yamlencode({a = "x"})`, "\"a\": \"x\"\n"},
		{`csvdecode("a,b\n1,2")[0].b`, "2"}, {`base64encode("hi")`, "aGk="}, {`base64decode("aGk=")`, "hi"},
		{`urlencode("a b&c")`, "a+b%26c"}, {`md5("x")`, "9dd4e461268c8034f5c8564e155c67a6"},
		{`sha1("x")`, "11f6ad8ec52a2984abaafd7c3b516503785c2072"},
		{`sha256("x")`, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"},
		{`format("%v", strlen(sha512("x")))`, "128"},
		{`uuidv5("dns", "example.com")`, "cfbff0d1-9375-5685-968c-48ce8b15ae17"}, {`format("%v", strlen(uuidv4()))`, "36"},
		{`formatdate("YYYY-MM-DD", "2030-01-02T03:04:05Z")`, "2030-01-02"}, {`timeadd("2030-01-01T00:00:00Z", "1h")`, "2030-01-01T01:00:00Z"},
		{`format("%v", abs(-3) + ceil(1.2) + floor(1.8) + max(1, 4) + min(1, 4) + pow(2, 3) + signum(-2) + parseint("ff", 16))`, "273"},
		{`format("%v", log(8, 2))`, "3"}, {`format("%v", convert("3", number) + 1)`, "4"}, {`format("%v", convert("true", bool))`, "true"},
		{`join(",", convert(convert(["a"], set(string)), list(string)))`, "a"}, {`convert({a = "x"}, map(string)).a`, "x"}, {`convert(1, string)`, "1"}, {`join(",", convert(["a"], list(string)))`, "a"},
		{`join(",", slice(["a", "b", "c"], 1, 3))`, "b,c"}, {`reverse("abc")`, "cba"},
		{`join(",", values(zipmap(["k"], ["v"])))`, "v"}, {`index(["a", "b"], 1)`, "b"}, {`index(convert({k = "v"}, map(string)), "k")`, "v"},
		{`join(",", setunion(["a"], ["b"]))`, "a,b"}, {`join(",", setintersection(["a", "b"], ["b"]))`, "b"},
		{`format("%v", length(chunklist([1, 2, 3], 2)))`, "2"}, {`join(",", coalescelist([], ["x"]))`, "x"},
		{`cidrhost("10.12.112.0/20", 16)`, "10.12.112.16"}, {`cidrhost("10.12.112.0/20", -1)`, "10.12.127.255"},
		{`cidrhost("fd00:fd12:3456:7890::/56", 16)`, "fd00:fd12:3456:7800::10"},
		{`cidrnetmask("172.16.0.0/12")`, "255.240.0.0"}, {`cidrsubnet("172.16.0.0/12", 4, 2)`, "172.18.0.0/16"},
		{`cidrsubnet("10.1.2.0/24", 4, 15)`, "10.1.2.240/28"}, {`cidrsubnet("fd00:fd12:3456:7890::/56", 16, 162)`, "fd00:fd12:3456:7800:a200::/72"},
		{`join(",", cidrsubnets("10.1.0.0/16", 4, 4, 8, 4))`, "10.1.0.0/20,10.1.16.0/20,10.1.32.0/24,10.1.48.0/20"},
		{`substr(bcrypt("pw", 4), 0, 7)`, "$2a$04$"},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			if got := parseVars(t, region("", tc.expr), Options{}).Region; got != tc.want {
				t.Fatalf("%s = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}

// TestDynamicBlocks: dynamic blocks make constraints, groups (with
// labels), meta inside them and task config blocks; iterators nest, and
// runtime references inside them are kept.
func TestDynamicBlocks(t *testing.T) {
	src := `variable "groups" {
  default = { web = 2, api = 1 }
}
variable "ports" {
  default = ["http", "admin"]
}
job "j" {
  dynamic "constraint" {
    for_each = ["linux", "darwin"]
    iterator = os
    content {
      attribute = "${attr.kernel.name}"
      operator  = "!="
      value     = os.value
    }
  }
  dynamic "group" {
    for_each = var.groups
    labels   = [group.key]
    content {
      count = group.value
      meta {
        name = group.key
      }
      task "t" {
        driver = "docker"
        config {
          image = "img:${group.key}"
          dynamic "port" {
            for_each = var.ports
            content {
              name  = "${group.key}-${port.value}"
              index = port.key
              host  = "${attr.unique.network.ip-address}"
            }
          }
        }
      }
    }
  }
}
`
	job := parseVars(t, src, Options{})
	if len(job.Constraints) != 2 || job.Constraints[1].RTarget != "darwin" || job.Constraints[0].LTarget != "${attr.kernel.name}" {
		t.Fatalf("constraints = %+v", job.Constraints)
	}
	if len(job.TaskGroups) != 2 {
		t.Fatalf("groups = %d, want 2", len(job.TaskGroups))
	}
	// A map iterates in key order.
	api, web := job.TaskGroups[0], job.TaskGroups[1]
	if api.Name != "api" || api.Count != 1 || web.Name != "web" || web.Count != 2 || web.Meta["name"] != "web" {
		t.Fatalf("groups = %+v, %+v", api, web)
	}
	cfg := web.Tasks[0].Config
	ports, ok := cfg["port"].([]any)
	if cfg["image"] != "img:web" || !ok || len(ports) != 2 {
		t.Fatalf("config = %#v", cfg)
	}
	p1 := ports[1].(map[string]any)
	if p1["name"] != "web-admin" || p1["index"] != 1 || p1["host"] != "${attr.unique.network.ip-address}" {
		t.Fatalf("port = %#v", p1)
	}
}

// TestVariableErrors: each problem is reported where it is, the parse
// leaves nothing half done, and a second problem is reported too.
func TestVariableErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		opts Options
		// want: fragments of the error, each a line's start or part.
		want []string
	}{
		{name: "missing value", src: region("variable \"r\" {\n  type = string\n}\n", "var.r"),
			want: []string{`job.hcl:1:1: Missing value for variable; Variable "r" has no default`, "-var r=…", "NOMAD_VAR_r"}},
		{name: "undeclared -var", src: region("variable \"r\" {\n  default = \"x\"\n}\n", "var.r"), opts: Options{Vars: []string{"rr=1"}},
			want: []string{`Undeclared variable; -var sets "rr", but the job file declares no variable of that name (declared: r)`}},
		{name: "undeclared in a var file", src: region("variable \"r\" {\n  default = \"x\"\n}\n", "var.r"),
			opts: Options{VarFiles: []VarFile{{Name: "v.hcl", Src: []byte("r = \"a\"\nq = 1\n")}}},
			want: []string{`v.hcl:2:1: Undeclared variable`}},
		{name: "wrong type from a var file", src: region("variable \"n\" {\n  type = number\n}\n", `"${var.n}"`),
			opts: Options{VarFiles: []VarFile{{Name: "v.hcl", Src: []byte("n = \"many\"\n")}}},
			want: []string{`v.hcl:1:5: Invalid value for variable; Variable "n" (declared at job.hcl:1:1) is number`}},
		{name: "wrong type of default", src: region("variable \"n\" {\n  type    = number\n  default = \"x\"\n}\n", `"${var.n}"`),
			want: []string{"job.hcl:3:13: Invalid value for variable"}},
		{name: "default must be constant", src: region("variable \"n\" {\n  default = var.m\n}\n", `"${var.n}"`),
			want: []string{"job.hcl:2:13: Variables not allowed"}},
		{name: "validation message at its condition", src: region(`variable "r" {
  default = "toolong"
  validation {
    condition     = strlen(var.r) <= 3
    error_message = "At most three letters."
  }
}
`, "var.r"), want: []string{`job.hcl:4:21: Invalid value for variable; At most three letters. (variable "r", value from its default)`}},
		{name: "validation without a message", src: region("variable \"r\" {\n  default = \"x\"\n  validation {\n    condition = true\n  }\n}\n", "var.r"),
			want: []string{"job.hcl:3:3: Missing required argument; A validation block needs a condition and an error_message."}},
		{name: "condition not a bool", src: region("variable \"r\" {\n  default = \"x\"\n  validation {\n    condition     = \"yes\"\n    error_message = \"m\"\n  }\n}\n", "var.r"),
			want: []string{"job.hcl:4:21: Invalid validation condition"}},
		{name: "bad type", src: region("variable \"r\" {\n  type = strin\n}\n", "var.r"), want: []string{"job.hcl:2:10: Invalid type specification"}},
		{name: "duplicate variable", src: region("variable \"r\" {\n  default = 1\n}\nvariable \"r\" {\n  default = 2\n}\n", `"${var.r}"`),
			want: []string{`job.hcl:4:10: Duplicate variable "r"`}},
		{name: "undeclared reference", src: region("", `"${var.nope}"`), want: []string{`job.hcl:2:15: Reference to undeclared input variable; var.nope`}},
		{name: "undeclared local", src: region("", "local.nope"), want: []string{`job.hcl:2:12: Reference to undeclared local value; local.nope`}},
		{name: "locals typo", src: region("locals {\n  a = \"x\"\n}\n", "locals.a"), want: []string{`job.hcl:5:12: Unknown variable; There is no variable named "locals"; did you mean local.a?`}},
		{name: "local cycle", src: region("locals {\n  a = local.c\n  b = local.a\n  c = local.b\n}\n", "local.a"),
			want: []string{"job.hcl:2:3: Cycle in local values; local.a refers to itself through local.a → local.c → local.b → local.a."}},
		{name: "self reference", src: region("locals {\n  a = \"${local.a}x\"\n}\n", "local.a"), want: []string{"job.hcl:2:3: Cycle in local values"}},
		{name: "duplicate local", src: region("locals {\n  a = 1\n}\nlocals {\n  a = 2\n}\n", `"${local.a}"`),
			want: []string{"job.hcl:5:3: Duplicate local value; local.a was already defined at job.hcl:2:3."}},
		{name: "file functions are off", src: region("", `file("/etc/passwd")`), want: []string{`job.hcl:2:12: Error in function call; Call to function "file" failed: file() is not available`}},
		{name: "runtime reference in a function", src: region("", `"${upper(attr.kernel.name)}"`), want: []string{"job.hcl:2:21: Invalid runtime reference"}},
		{name: "dynamic block of an unknown type", src: "job \"j\" {\n  dynamic \"nope\" {\n    for_each = [1]\n    content {}\n  }\n}\n",
			want: []string{`job.hcl:2:11: Unsupported block type; Blocks of type "nope" are not expected here.`}},
		{name: "dynamic for_each not a collection", src: "job \"j\" {\n  dynamic \"constraint\" {\n    for_each = 3\n    content {}\n  }\n}\n",
			want: []string{"job.hcl:3:16: Invalid dynamic for_each value"}},
		{name: "bad -var syntax for a list", src: region("variable \"l\" {\n  type = list(string)\n}\n", `join("", var.l)`), opts: Options{Vars: []string{"l=[a"}},
			want: []string{`-var "l":1:`}},
		{name: "bad env syntax", src: region("variable \"l\" {\n  type = list(number)\n}\n", `join("", var.l)`), opts: Options{Env: []string{"NOMAD_VAR_l=[x"}},
			want: []string{`the environment variable NOMAD_VAR_l:1:`}},
		{name: "length of a string, as Nomad refuses it", src: region("", `"${length("abc")}"`),
			want: []string{`job.hcl:2:23: Invalid function argument`, "not a string (as in Nomad); use strlen"}},
		{name: "a Terraform function Nomad lacks", src: region("", `tostring(1)`),
			want: []string{`job.hcl:2:12: Error in function call`, `tostring() is not one of Nomad's job file functions, so a file using it would not parse with Nomad's CLI: use convert(value, string)`}},
		{name: "timestamp", src: region("", `timestamp()`), want: []string{"a job file cannot depend on when it is parsed"}},
		{name: "reverse of a list, as Nomad refuses it", src: region("", `join(",", reverse(["a", "b"]))`), want: []string{"Invalid function argument"}},
		{name: "rsadecrypt", src: region("", `rsadecrypt("x", "y")`), want: []string{"rsadecrypt() is not available"}},
		{name: "bcrypt cost", src: region("", `bcrypt("pw", 20)`), want: []string{"cost must be a whole number from 4 to 12"}},
		{name: "bcrypt calls bounded", src: region("", `join(",", [for i in range(17) : bcrypt("x", 4)])`), want: []string{"a job file may call bcrypt at most 16 times"}},
		{name: "cidrsubnet out of range", src: region("", `cidrsubnet("10.0.0.0/24", 4, 16)`), want: []string{"prefix extension of 4 bits has no subnet number 16"}},
		{name: "cidrsubnets out of space", src: region("", `join(",", cidrsubnets("10.0.0.0/30", 1, 1, 1))`), want: []string{"not enough remaining address space"}},
		{name: "length of a number", src: region("", `"${length(3)}"`), want: []string{"length takes a list, set, tuple, map or object, not number"}},
		{name: "two problems", src: region("variable \"a\" {}\nvariable \"b\" {}\n", `"${var.a}${var.b}"`),
			want: []string{"job.hcl:1:1: Missing value for variable", "job.hcl:2:1: Missing value for variable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job, err := ParseWith("job.hcl", []byte(tc.src), tc.opts)
			if err == nil {
				t.Fatalf("parsed: %+v", job)
			}
			if !errors.Is(err, structs.ErrInvalid) || Diagnostics(err) == nil {
				t.Fatalf("err = %v, want a positioned invalid-kind error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%s", w, err)
				}
			}
		})
	}
}

// TestSensitiveNeverShown: no error quotes a sensitive variable's value,
// whichever message would have.
func TestSensitiveNeverShown(t *testing.T) {
	src := `variable "token" {
  type      = string
  sensitive = true
  validation {
    condition     = strlen(var.token) > 20
    error_message = "The token ${var.token} is too short."
  }
}
variable "timeout" {
  sensitive = true
}
job "j" {
  group "g" {
    task "t" {
      driver       = "docker"
      kill_timeout = var.timeout
      env {
        TOKEN = var.token
      }
    }
  }
}
`
	_, err := ParseWith("job.hcl", []byte(src), Options{Vars: []string{"token=s3cr3t-value", "timeout=hunter2"}})
	if err == nil {
		t.Fatal("parsed")
	}
	msg := err.Error()
	for _, secret := range []string{"s3cr3t-value", "hunter2"} {
		if strings.Contains(msg, secret) {
			t.Errorf("the error shows a sensitive value:\n%s", msg)
		}
	}
	for _, d := range Diagnostics(err) {
		if strings.Contains(d.Detail, "hunter2") || strings.Contains(d.Detail, "s3cr3t") {
			t.Errorf("a diagnostic shows a sensitive value: %s", d.Detail)
		}
	}
	if !strings.Contains(msg, "job.hcl:5:21: Invalid value for variable; The token (sensitive value) is too short.") ||
		!strings.Contains(msg, `job.hcl:16:22: Invalid duration; Attribute "kill_timeout": "(sensitive value)" is not a duration`) {
		t.Errorf("error:\n%s", msg)
	}
}

// TestCheck: Check reports every validation error at the block it names.
func TestCheck(t *testing.T) {
	src := "job \"j\" {\n  priority = 500\n  group \"a\" {\n    count = -1\n    task \"t\" {\n      driver = \"x\"\n    }\n  }\n  group \"b\" {\n    task \"u\" {\n    }\n  }\n}\n"
	_, err := Check("job.hcl", []byte(src), testOptions)
	if err == nil {
		t.Fatal("valid")
	}
	want := []string{
		"job.hcl:1:1: Invalid job; job priority 500",
		`job.hcl:3:3: Invalid job; group "a": count must not be negative`,
		`job.hcl:10:5: Invalid job; group "b": task "u": missing driver`,
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%s", w, err)
		}
	}
	if _, err := Check("job.hcl", []byte(wrapTask("      driver = \"raw_exec\"\n")), testOptions); err != nil {
		t.Fatalf("a valid job: %v", err)
	}
}

// TestCheckBoundsPositions: a field over its bound is reported at the block
// that holds it, with its path and the bound.
func TestCheckBoundsPositions(t *testing.T) {
	big := strings.Repeat("x", structs.MaxTextBytes+1)
	src := "job \"j\" {\n  meta {\n    k = \"" + big + "\"\n  }\n  group \"a\" {\n    meta {\n      k = \"" + big + "\"\n    }\n" +
		"    task \"t\" {\n      driver = \"raw_exec\"\n      env {\n        V = \"" + big + "\"\n      }\n    }\n  }\n}\n"
	_, err := Check("job.hcl", []byte(src), testOptions)
	if err == nil {
		t.Fatal("valid")
	}
	for _, w := range []string{
		`job.hcl:1:1: Invalid job; Job.Meta["k"]: 8193 bytes; exceeds limit MaxTextBytes (8192)`,
		`job.hcl:5:3: Invalid job; Job.TaskGroups[0].Meta["k"]: 8193 bytes`,
		`job.hcl:9:5: Invalid job; Job.TaskGroups[0].Tasks[0].Env["V"]: 8193 bytes`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%.2000s", w, err)
		}
	}
}

package jobspec

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// wrapTask puts taskBody inside a job with one group and one task, so that each case
// only writes the lines under test. Line numbers in the cases count from the
// first line of the returned text.
func wrapTask(taskBody string) string {
	return "job \"j\" {\n  group \"g\" {\n    task \"t\" {\n" + taskBody + "    }\n  }\n}\n"
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		// want is the beginning of the first error line: "file:line:col: Summary".
		want string
		// detail is a fragment that must appear in the same line.
		detail string
	}{
		{
			name: "misspelled attribute",
			src:  "job \"j\" {\n  group \"g\" {\n    cuont = 3\n  }\n}\n",
			want: "job.hcl:3:5: Unsupported argument", detail: `An argument named "cuont" is not expected here. Did you mean "count"?`,
		},
		{
			name: "missing job label",
			src:  "job {\n}\n",
			want: "job.hcl:1:5: Missing name for job", detail: "All job blocks must have 1 labels (name)",
		},
		{
			name: "empty job label",
			src:  "job \"\" {\n}\n",
			want: "job.hcl:1:5: Invalid job name", detail: "must not be empty",
		},
		{
			name: "bad duration",
			src:  wrapTask("      driver = \"raw_exec\"\n      kill_timeout = \"10x\"\n"),
			want: "job.hcl:5:22: Invalid duration", detail: `Attribute "kill_timeout": "10x" is not a duration`,
		},
		{
			name: "duration of the wrong type",
			src:  "job \"j\" {\n  group \"g\" {\n    shutdown_delay = true\n  }\n}\n",
			want: "job.hcl:3:22: Incorrect attribute value type", detail: "a duration string",
		},
		{
			name: "wrong type",
			src:  "job \"j\" {\n  group \"g\" {\n    count = \"x\"\n  }\n}\n",
			want: "job.hcl:3:13: Incorrect attribute value type", detail: `attribute "count": a number is required, got string`,
		},
		{
			name: "fractional count",
			src:  "job \"j\" {\n  group \"g\" {\n    count = 1.5\n  }\n}\n",
			want: "job.hcl:3:13: Incorrect attribute value type", detail: "a whole number is required, got 1.5",
		},
		{
			name: "string instead of list",
			src:  "job \"j\" {\n  datacenters = \"dc1\"\n}\n",
			want: "job.hcl:2:17: Incorrect attribute value type", detail: "a list of strings is required",
		},
		{
			name: "unknown block",
			src:  "job \"j\" {\n  group \"g\" {\n    autoscale {\n    }\n  }\n}\n",
			want: "job.hcl:3:5: Unsupported block type", detail: `Blocks of type "autoscale" are not expected here.`,
		},
		{
			name: "two jobs in one file",
			src:  "job \"a\" {\n}\n\njob \"b\" {\n}\n",
			want: "job.hcl:4:1: Duplicate job block", detail: "another was defined at job.hcl:1:1",
		},
		{
			name: "empty file",
			src:  "",
			want: "job.hcl:1:1: Missing job block", detail: "A job file must define one job",
		},
		{
			name: "only comments",
			src:  "# nothing here\n",
			want: "job.hcl:1:1: Missing job block",
		},
		{
			name: "two restart blocks in a group",
			src:  "job \"j\" {\n  group \"g\" {\n    restart {\n    }\n    restart {\n    }\n  }\n}\n",
			want: "job.hcl:5:5: Duplicate restart block", detail: "another was defined at job.hcl:3:5",
		},
		{
			name: "meta as attribute and block",
			src:  "job \"j\" {\n  meta = { a = \"b\" }\n  meta {\n  }\n}\n",
			want: "job.hcl:3:3: Duplicate meta block", detail: "already defined as an attribute at job.hcl:2:3",
		},
		{
			name: "syntax error",
			src:  "job \"j\" {\n  type = \n}\n",
			want: "job.hcl:2:10: Invalid expression",
		},
		{
			name: "top-level attribute",
			src:  "type = \"batch\"\njob \"j\" {\n}\n",
			want: "job.hcl:1:1: Unsupported argument",
		},
		{
			name: "undeclared variable",
			src:  "job \"j\" {\n  region = \"${var.region}\"\n}\n",
			want: "job.hcl:2:15: Reference to undeclared input variable", detail: `no variable "region" block`,
		},
		{
			name: "runtime reference outside a string",
			src:  "job \"j\" {\n  constraint {\n    attribute = attr.kernel.name\n  }\n}\n",
			want: "job.hcl:3:17: Invalid runtime reference", detail: `as in "${attr.kernel.name}"`,
		},
		{
			name: "runtime reference in an operation",
			src:  "job \"j\" {\n  region = \"${attr.a == \"x\"}\"\n}\n",
			want: "job.hcl:2:15: Invalid runtime reference", detail: "attr.a is resolved on the client",
		},
		{
			name: "conflicting runtime references",
			src:  "job \"j\" {\n  region = \"${attr.a}-${attr.a.b}\"\n}\n",
			want: "job.hcl:2:25: Conflicting runtime references", detail: "reference at job.hcl:2:15",
		},
		{
			name: "unknown function",
			src:  "job \"j\" {\n  region = uper(\"eu\")\n}\n",
			want: "job.hcl:2:12: Call to unknown function", detail: `Did you mean "upper"?`,
		},
		{
			name: "two operator shorthands",
			src:  "job \"j\" {\n  constraint {\n    attribute = \"${attr.x}\"\n    regexp = \"a\"\n    version = \"1\"\n  }\n}\n",
			want: "job.hcl:5:5: Conflicting operator", detail: `"regexp" and "version" both set the operator`,
		},
		{
			name: "shorthand with value",
			src:  "job \"j\" {\n  constraint {\n    value = \"a\"\n    semver = \"1\"\n  }\n}\n",
			want: "job.hcl:4:5: Conflicting attributes", detail: `"semver" sets the same target as "value"`,
		},
		{
			name: "affinity weight out of range",
			src:  "job \"j\" {\n  affinity {\n    weight = 101\n  }\n}\n",
			want: "job.hcl:3:14: Value out of range", detail: "between -100 and 100, got 101",
		},
		{
			name: "bad lifecycle hook",
			src:  wrapTask("      lifecycle {\n        hook = \"prestop\"\n      }\n"),
			want: "job.hcl:5:16: Invalid lifecycle hook", detail: `got "prestop"`,
		},
		{
			name: "invalid cron",
			src:  "job \"j\" {\n  periodic {\n    cron = \"* * *\"\n  }\n}\n",
			want: "job.hcl:3:12: Invalid cron expression", detail: `"* * *"`,
		},
		{
			name: "cron of eight fields",
			src:  "job \"j\" {\n  periodic {\n    crons = [\"@daily\", \"0 0 0 * * * 2030 x\"]\n  }\n}\n",
			want: "job.hcl:3:13: Invalid cron expression", detail: `has 8 fields`,
		},
		{
			name: "cron and crons",
			src:  "job \"j\" {\n  periodic {\n    cron = \"@daily\"\n    crons = [\"@hourly\"]\n  }\n}\n",
			want: "job.hcl:4:5: Conflicting attributes", detail: "Set cron or crons, not both",
		},
		{
			name: "unknown time zone",
			src:  "job \"j\" {\n  periodic {\n    cron = \"@daily\"\n    time_zone = \"Mars/Olympus\"\n  }\n}\n",
			want: "job.hcl:4:17: Invalid time zone", detail: `"Mars/Olympus"`,
		},
		{
			name: "bad payload mode",
			src:  "job \"j\" {\n  parameterized {\n    payload = \"maybe\"\n  }\n}\n",
			want: "job.hcl:3:15: Invalid payload mode", detail: `got "maybe"`,
		},
		{
			name: "labelled block in config",
			src:  wrapTask("      config {\n        mount \"a\" {\n        }\n      }\n"),
			want: "job.hcl:5:15: Unsupported config block", detail: "take no labels",
		},
		{
			name: "config block shadowing an attribute",
			src:  wrapTask("      config {\n        opts = 1\n        opts {\n        }\n      }\n"),
			want: "job.hcl:6:9: Duplicate config key", detail: `"opts" is already set as an attribute at job.hcl:5:9`,
		},
		{
			name: "meta value of the wrong type",
			src:  "job \"j\" {\n  meta {\n    list = [1]\n  }\n}\n",
			want: "job.hcl:3:12: Incorrect attribute value type", detail: `meta key "list": a string, number or bool is required`,
		},
		{
			name: "block inside meta",
			src:  "job \"j\" {\n  meta {\n    sub {\n    }\n  }\n}\n",
			want: "job.hcl:3:5: Unexpected \"sub\" block",
		},
		{
			name: "attribute given as a block",
			src:  wrapTask("      driver {\n      }\n"),
			want: "job.hcl:4:7: Unsupported block type", detail: `Did you mean to define argument "driver"?`,
		},
		{
			name: "two groups with one name",
			src:  "job \"j\" {\n  group \"g\" {\n  }\n  group \"g\" {\n  }\n}\n",
			want: `job.hcl:4:9: Duplicate group "g"`, detail: "already defined at job.hcl:2:3",
		},
		{
			name: "two tasks with one name",
			src:  wrapTask("    }\n    task \"t\" {\n"),
			want: `job.hcl:5:10: Duplicate task "t"`, detail: "already defined at job.hcl:3:5",
		},
		{
			name: "two spread targets with one value",
			src:  "job \"j\" {\n  spread {\n    target \"a\" {\n    }\n    target \"a\" {\n    }\n  }\n}\n",
			want: `job.hcl:5:12: Duplicate target "a"`,
		},
		{
			name: "artifact without source",
			src:  wrapTask("      artifact {\n        destination = \"local/\"\n      }\n"),
			want: "job.hcl:4:7: Missing required argument", detail: "needs a source",
		},
		{
			name: "template without destination",
			src:  wrapTask("      template {\n        data = \"x\"\n      }\n"),
			want: "job.hcl:4:7: Missing required argument", detail: "needs a destination",
		},
		{
			name: "template vault_grace",
			src:  wrapTask("      template {\n        data = \"x\"\n        destination = \"local/x\"\n        vault_grace = \"5s\"\n      }\n"),
			want: "job.hcl:7:9: Unsupported argument", detail: "no Vault integration",
		},
		{
			name: "missing task label",
			src:  "job \"j\" {\n  group \"g\" {\n    task {\n    }\n  }\n}\n",
			want: "job.hcl:3:10: Missing name for task",
		},
		{
			name: "unknown volume type",
			src:  "job \"j\" {\n  group \"g\" {\n    volume \"v\" {\n      type = \"nfs\"\n      source = \"x\"\n    }\n  }\n}\n",
			want: "job.hcl:4:14: Unsupported volume type", detail: `type is "nfs"`,
		},
		{
			name: "volume without source",
			src:  "job \"j\" {\n  group \"g\" {\n    volume \"v\" {\n      type = \"csi\"\n    }\n  }\n}\n",
			want: "job.hcl:3:5: Missing required argument", detail: "needs a source",
		},
		{
			name: "bad access mode",
			src:  "job \"j\" {\n  group \"g\" {\n    volume \"v\" {\n      type = \"csi\"\n      source = \"x\"\n      access_mode = \"rw\"\n    }\n  }\n}\n",
			want: "job.hcl:6:21: Invalid access_mode", detail: `"rw" is not one of`,
		},
		{
			name: "two volumes of one name",
			src:  "job \"j\" {\n  group \"g\" {\n    volume \"v\" {\n      type = \"csi\"\n      source = \"a\"\n    }\n    volume \"v\" {\n      type = \"csi\"\n      source = \"a\"\n    }\n  }\n}\n",
			want: "job.hcl:7:12: Duplicate volume \"v\"",
		},
		{
			name: "volume_mount without destination",
			src:  "job \"j\" {\n  group \"g\" {\n    task \"t\" {\n      volume_mount {\n        volume = \"v\"\n      }\n    }\n  }\n}\n",
			want: "job.hcl:4:7: Missing required argument", detail: "needs a destination",
		},
		{
			name: "csi_plugin type",
			src:  "job \"j\" {\n  group \"g\" {\n    task \"t\" {\n      csi_plugin {\n        id = \"p\"\n        type = \"both\"\n      }\n    }\n  }\n}\n",
			want: "job.hcl:6:16: Invalid csi_plugin type", detail: `got "both"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := Parse("job.hcl", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error; parsed %+v", job)
			}
			if job != nil {
				t.Error("a failed parse returned a job")
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if !strings.HasPrefix(first, tt.want) {
				t.Errorf("first error line:\n  %s\nwant prefix:\n  %s", first, tt.want)
			}
			if !strings.Contains(first, tt.detail) {
				t.Errorf("first error line:\n  %s\nwant it to contain:\n  %s", first, tt.detail)
			}
			if !errors.Is(err, structs.ErrInvalid) {
				t.Error("errors.Is(err, structs.ErrInvalid) = false")
			}
			diags := Diagnostics(err)
			if len(diags) == 0 || diags[0].Subject == nil {
				t.Fatalf("diagnostics = %v, want positioned diagnostics", diags)
			}
		})
	}
}

// TestAllErrorsReported checks that one run reports every problem of a
// file, one line each, in source order.
func TestAllErrorsReported(t *testing.T) {
	src := "job \"j\" {\n  priority = \"high\"\n  group \"g\" {\n    cuont = 2\n    task \"t\" {\n      kill_timeout = \"soon\"\n    }\n  }\n}\n"
	_, err := Parse("job.hcl", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"job.hcl:2:14: Incorrect attribute value type",
		"job.hcl:4:5: Unsupported argument",
		"job.hcl:6:22: Invalid duration",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d error lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i+1, lines[i], w)
		}
	}
	diags := Diagnostics(err)
	if len(diags) != 3 || diags[2].Subject.Start.Line != 6 || diags[2].Subject.Start.Column != 22 {
		t.Errorf("diagnostics = %v", diags)
	}
}

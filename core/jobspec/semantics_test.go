package jobspec

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func mustParse(t *testing.T, src string) *structs.Job {
	t.Helper()
	j, err := ParseWith("job.hcl", []byte(src), testOptions)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return j
}

// TestRuntimeInterpolationVerbatim pins the one property every other part of
// drover relies on: Nomad's runtime references reach the job untouched.
func TestRuntimeInterpolationVerbatim(t *testing.T) {
	tests := []struct {
		name string
		expr string // an HCL expression, as written in the file
		want string
	}{
		{"attribute", `"${attr.kernel.name}"`, "${attr.kernel.name}"},
		{"node", `"${node.unique.id}"`, "${node.unique.id}"},
		{"meta with quoted key", `"${meta["rack.id"]}"`, `${meta["rack.id"]}`},
		{"NOMAD variable", `"${NOMAD_ALLOC_ID}"`, "${NOMAD_ALLOC_ID}"},
		{"env", `"${env.PATH}"`, "${env.PATH}"},
		{"inside text", `"a-${node.class}-b"`, "a-${node.class}-b"},
		{"two references", `"${node.class}/${node.datacenter}"`, "${node.class}/${node.datacenter}"},
		{"same reference twice", `"${node.class}${node.class}"`, "${node.class}${node.class}"},
		{"escaped", `"$${attr.x}"`, "${attr.x}"},
		{"spaces are normalized", `"${ attr.x }"`, "${attr.x}"},
		{"escapes still apply", `"${attr.x}\t\"q\""`, "${attr.x}\t\"q\""},
		{"heredoc", "<<EOT\nrun ${NOMAD_TASK_DIR}/x\nEOT\n", "run ${NOMAD_TASK_DIR}/x\n"},
		{"no reference", `"plain"`, "plain"},
		{"bare dollar", `"echo $HOME"`, "echo $HOME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := mustParse(t, "job \"j\" {\n  constraint {\n    attribute = "+tt.expr+"\n  }\n}\n")
			if got := j.Constraints[0].LTarget; got != tt.want {
				t.Errorf("LTarget = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	j := mustParse(t, `job "d" {
  type = "batch"
  periodic {
    cron = "@daily"
  }
  group "a" {
    task "t" {
      driver = "raw_exec"
    }
  }
  group "zero" {
    count = 0
    restart {
      attempts = 1
    }
    task "t" {
      driver = "raw_exec"
      restart {
        delay = "1m"
      }
    }
  }
}`)
	if j.Name != "d" || j.Namespace != "default" || j.Region != "global" || j.Priority != 50 ||
		!reflect.DeepEqual(j.Datacenters, []string{"*"}) || j.NodePool != "default" {
		t.Errorf("job defaults = %+v", j)
	}
	if !j.Periodic.Enabled || j.Periodic.SpecType != "cron" || j.Periodic.TimeZone != "UTC" {
		t.Errorf("periodic = %+v", j.Periodic)
	}
	a, zero := j.TaskGroups[0], j.TaskGroups[1]
	if a.Count != 1 {
		t.Errorf("absent count = %d, want 1", a.Count)
	}
	if zero.Count != 0 {
		t.Errorf("count = 0 became %d", zero.Count)
	}
	batch := testTypes["batch"].DefaultRestart
	if !reflect.DeepEqual(a.RestartPolicy, batch) || !reflect.DeepEqual(a.Tasks[0].RestartPolicy, batch) {
		t.Errorf("default restart = %+v / %+v, want %+v", a.RestartPolicy, a.Tasks[0].RestartPolicy, batch)
	}
	// Blocks are laid over the defaults: group over the job type's, task
	// over the group's.
	wantGroup := *batch
	wantGroup.Attempts = 1
	if !reflect.DeepEqual(*zero.RestartPolicy, wantGroup) {
		t.Errorf("group restart = %+v, want %+v", zero.RestartPolicy, wantGroup)
	}
	wantTask := wantGroup
	wantTask.Delay = time.Minute
	if !reflect.DeepEqual(*zero.Tasks[0].RestartPolicy, wantTask) {
		t.Errorf("task restart = %+v, want %+v", zero.Tasks[0].RestartPolicy, wantTask)
	}
	task := a.Tasks[0]
	if task.Resources.CPU != 100 || task.Resources.MemoryMB != 300 || task.KillTimeout != 5*time.Second ||
		task.LogConfig.MaxFiles != 10 || a.EphemeralDisk.SizeMB != 300 {
		t.Errorf("task defaults = %+v %+v %+v", task, task.Resources, task.LogConfig)
	}
	if err := j.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestPeriodicDisabled(t *testing.T) {
	j := mustParse(t, `job "p" {
  type = "batch"
  periodic {
    crons   = ["@daily"]
    enabled = false
  }
}`)
	if j.Periodic.Enabled || j.IsPeriodicActive() {
		t.Errorf("periodic = %+v, want disabled", j.Periodic)
	}
}

func TestUpdateInheritance(t *testing.T) {
	src := `job "u" {
  type = "%s"
  update {
    max_parallel = 3
    stagger      = "20s"
  }
  group "inherits" {
    task "t" { driver = "raw_exec" }
  }
  group "overrides" {
    update {
      max_parallel = 1
    }
    task "t" { driver = "raw_exec" }
  }
}`
	j := mustParse(t, fmt.Sprintf(src, "system"))
	if u := j.TaskGroups[0].Update; u == nil || u.MaxParallel != 3 || u.Stagger != 20*time.Second {
		t.Errorf("inherited update = %+v", u)
	}
	if u := j.TaskGroups[1].Update; u == nil || u.MaxParallel != 1 || u.Stagger != 20*time.Second {
		t.Errorf("overridden update = %+v, want max_parallel 1 and the job's stagger", u)
	}
	if j.TaskGroups[0].Update == j.Update {
		t.Error("group shares the job's update struct")
	}

	// A type refusing update blocks (sysbatch) has the job-level refusal.
	j = mustParse(t, fmt.Sprintf(src, "sysbatch"))
	if j.TaskGroups[0].Update != nil {
		t.Errorf("sysbatch group inherited update %+v", j.TaskGroups[0].Update)
	}
}

// A job-level migrate block, as Nomad takes it, is the base of every
// group's: a group without one gets a copy, a group's own sets only what it
// names over it.
func TestMigrateInheritance(t *testing.T) {
	j := mustParse(t, `job "m" {
  migrate {
    max_parallel     = 2
    min_healthy_time = "20s"
  }
  group "inherits" {
    task "t" { driver = "raw_exec" }
  }
  group "overrides" {
    migrate {
      max_parallel = 1
    }
    task "t" { driver = "raw_exec" }
  }
  group "plain" {
    task "t" { driver = "raw_exec" }
  }
}`)
	inh, over := j.TaskGroups[0].Migrate, j.TaskGroups[1].Migrate
	if inh == nil || inh.MaxParallel != 2 || inh.MinHealthyTime != 20*time.Second {
		t.Errorf("inherited migrate = %+v", inh)
	}
	if over == nil || over.MaxParallel != 1 || over.MinHealthyTime != 20*time.Second {
		t.Errorf("overridden migrate = %+v, want max_parallel 1 and the job's min_healthy_time", over)
	}
	if inh == j.TaskGroups[2].Migrate {
		t.Error("groups share one migrate struct")
	}
}

func TestConstraintShorthands(t *testing.T) {
	tests := []struct {
		body string
		want structs.Constraint
	}{
		{`attribute = "${attr.a}"` + "\n" + `value = "x"`, structs.Constraint{LTarget: "${attr.a}", RTarget: "x", Operand: "="}},
		{`attribute = "${attr.a}"` + "\n" + `operator = "is_set"`, structs.Constraint{LTarget: "${attr.a}", Operand: "is_set"}},
		{`distinct_hosts = true`, structs.Constraint{Operand: "distinct_hosts"}},
		{`distinct_hosts = false` + "\n" + `operator = "regexp"`, structs.Constraint{Operand: "regexp"}},
		{`distinct_property = "${meta.rack}"`, structs.Constraint{LTarget: "${meta.rack}", Operand: "distinct_property"}},
		{`attribute = "${attr.v}"` + "\n" + `version = ">= 1"`, structs.Constraint{LTarget: "${attr.v}", RTarget: ">= 1", Operand: "version"}},
		{`semver = "~> 2"`, structs.Constraint{RTarget: "~> 2", Operand: "semver"}},
		{`regexp = "^a"`, structs.Constraint{RTarget: "^a", Operand: "regexp"}},
		{`set_contains = "a,b"`, structs.Constraint{RTarget: "a,b", Operand: "set_contains"}},
		{`set_contains_any = "a"`, structs.Constraint{RTarget: "a", Operand: "set_contains_any"}},
		{`set_contains_all = "b"`, structs.Constraint{RTarget: "b", Operand: "set_contains_all"}},
	}
	for _, tt := range tests {
		t.Run(tt.want.Operand, func(t *testing.T) {
			j := mustParse(t, "job \"j\" {\n  constraint {\n"+tt.body+"\n  }\n}\n")
			if got := *j.Constraints[0]; got != tt.want {
				t.Errorf("constraint = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestConfigValues(t *testing.T) {
	j := mustParse(t, `job "c" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        int    = 3
        float  = 2.5
        big    = 1e3
        str    = "s"
        flag   = false
        nothing = null
        list   = [1, "two", [3]]
        obj    = { a = 1, b = { c = "d" } }
        once {
          x = 1
          inner {
            y = "z"
          }
        }
        twice {
          n = 1
        }
        twice {
          n = 2
        }
      }
    }
  }
}`)
	want := map[string]any{
		"int":     3,
		"float":   2.5,
		"big":     1000,
		"str":     "s",
		"flag":    false,
		"nothing": nil,
		"list":    []any{1, "two", []any{3}},
		"obj":     map[string]any{"a": 1, "b": map[string]any{"c": "d"}},
		"once":    map[string]any{"x": 1, "inner": map[string]any{"y": "z"}},
		"twice":   []any{map[string]any{"n": 1}, map[string]any{"n": 2}},
	}
	if got := j.TaskGroups[0].Tasks[0].Config; !reflect.DeepEqual(got, want) {
		t.Errorf("config =\n%#v\nwant\n%#v", got, want)
	}
}

func TestMetaCoercion(t *testing.T) {
	j := mustParse(t, `job "m" {
  meta {
    s = "v"
    n = 1.4
    i = 7
    b = true
  }
  group "g" {
    meta = {
      "a.b"  = "dotted"
      "node" = "${node.class}"
    }
    task "t" {
      driver = "raw_exec"
      env = {
        "X.Y" = 1
      }
    }
  }
}`)
	if want := map[string]string{"s": "v", "n": "1.4", "i": "7", "b": "true"}; !reflect.DeepEqual(j.Meta, want) {
		t.Errorf("job meta = %v, want %v", j.Meta, want)
	}
	if want := map[string]string{"a.b": "dotted", "node": "${node.class}"}; !reflect.DeepEqual(j.TaskGroups[0].Meta, want) {
		t.Errorf("group meta = %v, want %v", j.TaskGroups[0].Meta, want)
	}
	if want := map[string]string{"X.Y": "1"}; !reflect.DeepEqual(j.TaskGroups[0].Tasks[0].Env, want) {
		t.Errorf("env = %v, want %v", j.TaskGroups[0].Tasks[0].Env, want)
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		expr string
		want time.Duration
	}{
		{`"15s"`, 15 * time.Second},
		{`"1h30m"`, 90 * time.Minute},
		{`"250ms"`, 250 * time.Millisecond},
		{`2000000000`, 2 * time.Second}, // a number is nanoseconds, as in Nomad
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			j := mustParse(t, wrapTask("      kill_timeout = "+tt.expr+"\n"))
			if got := j.TaskGroups[0].Tasks[0].KillTimeout; got != tt.want {
				t.Errorf("kill_timeout = %s, want %s", got, tt.want)
			}
		})
	}
}

// A spread that names no weight gets Nomad's 50, as an affinity does; one
// that names it keeps it.
func TestSpreadDefaultWeight(t *testing.T) {
	j := mustParse(t, `job "web" {
  spread {
    attribute = "${node.datacenter}"
  }
  group "g" {
    spread {
      attribute = "${node.class}"
      weight    = 30
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}`)
	if got := j.Spreads[0].Weight; got != structs.DefaultSpreadWeight {
		t.Errorf("job spread weight = %d; want %d", got, structs.DefaultSpreadWeight)
	}
	if got := j.TaskGroups[0].Spreads[0].Weight; got != 30 {
		t.Errorf("group spread weight = %d; want 30", got)
	}
}
